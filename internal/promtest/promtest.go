// Package promtest reads a /metrics page over HTTP for tests: it parses
// Prometheus's text format and looks series up by their labels.
package promtest

import (
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families are the metric families of one scrape, by name.
type Families map[string]*dto.MetricFamily

// Scrape GETs url and parses the page; the test fails on an answer other
// than 200 or on a page that is not Prometheus's text format.
func Scrape(t testing.TB, url string) Families {
	t.Helper()
	return ScrapeWith(t, http.DefaultClient, url)
}

// ScrapeWith is Scrape through client (one that trusts an https server's
// CA).
func ScrapeWith(t testing.TB, client *http.Client, url string) Families {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: not Prometheus's text format: %v", url, err)
	}
	return families
}

// Values maps each series of the family name to its value (a gauge's or a
// counter's; a histogram's count), keyed by the given labels in their
// order: "state=pending,profile=demo" ("" for none).
func (f Families) Values(name string, labels ...string) map[string]float64 {
	out := map[string]float64{}
	fam := f[name]
	if fam == nil {
		return out
	}
	for _, m := range fam.GetMetric() {
		var key []string
		for _, l := range labels {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == l {
					key = append(key, l+"="+lp.GetValue())
				}
			}
		}
		switch {
		case m.Gauge != nil:
			out[strings.Join(key, ",")] = m.GetGauge().GetValue()
		case m.Counter != nil:
			out[strings.Join(key, ",")] = m.GetCounter().GetValue()
		case m.Histogram != nil:
			out[strings.Join(key, ",")] = float64(m.GetHistogram().GetSampleCount())
		}
	}
	return out
}

// Equal tells whether two Values maps hold the same series and values.
func Equal(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
