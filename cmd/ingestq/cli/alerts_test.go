package cli_test

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"gopkg.in/yaml.v3"

	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/internal/promtest"
	"github.com/ingestq/ingestq/internal/tlstest"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// alertRule is a rule of deploy/ingestq-alerts.yml, as far as the check
// below reads it.
type alertRule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	Annotations map[string]string `yaml:"annotations"`
}

// The metrics, labels and label values deploy/ingestq-alerts.yml's rules
// use all exist in a real daemon's /metrics, scraped after the demo
// deposit (jobs completed and failed) and with its inventory service
// stopped (a back end out, /readyz answering 503), and in a second one's
// that serves HTTPS (its certificate's expiry): a metric or a label
// renamed, or a state or outcome that no longer exists, fails here instead
// of leaving an alert that never fires. promtool's tests of the rules are
// in package deploy.
func TestAlertingRulesMatchTheMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	nats := closedAddr(t)
	inv, err := inventory.OpenLocal(filepath.Join(t.TempDir(), "inventory.db"))
	e.ok(err)
	t.Cleanup(func() { inv.Close() })
	invService := httptest.NewServer(inventory.NewServer(inv, nil))
	t.Cleanup(invService.Close)
	d := serve(t, zktest.Shared(t).Addr, e.root, "--nats-listen", nats, "--inventory", invService.URL)
	web := demoWeb(t)
	_, _, code := e.run("--nats", "nats://"+nats, "submit", "--profile", "demo", "--wait", web.URL+"/batch.checkm")
	wantCode(t, code, 1) // the sample's wrong digest fails one job, so the batch

	invService.Close()
	_, _, code = e.run("submit", "--profile", "demo", web.URL+"/batch.checkm")
	wantCode(t, code, 0)
	d.log.WaitFor(t, "reactor: a back end is out")
	if code, _ := readyz(t, d.url); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz with the inventory service stopped: %d, want 503", code)
	}
	promtest.Scrape(t, d.url+"/metrics") // as Prometheus would have: its route's series
	scrape := promtest.Scrape(t, d.url+"/metrics")
	// The served certificates' expiry: from a daemon serving HTTPS, scraped
	// as Prometheus would, trusting its certificate.
	cert, key, pool := tlstest.SelfSigned(t)
	secure := serve(t, zktest.Shared(t).Addr, newEnv(t).root, "--pipeline", "passthrough", "--tls-cert", cert, "--tls-key", key)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	for name, fam := range promtest.ScrapeWith(t, client, secure.url+"/metrics") {
		if scrape[name] == nil {
			scrape[name] = fam
		}
	}

	data, err := os.ReadFile("../../../deploy/ingestq-alerts.yml")
	e.ok(err)
	var file struct {
		Groups []struct{ Rules []alertRule }
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatalf("deploy/ingestq-alerts.yml: %v", err)
	}
	var n int
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			n++
			for _, problem := range ruleProblems(r, scrape) {
				t.Errorf("deploy/ingestq-alerts.yml, alert %s: %s", r.Alert, problem)
			}
		}
	}
	if n < 10 {
		t.Errorf("deploy/ingestq-alerts.yml has %d rules; the check read too few", n)
	}
}

var (
	// promqlGrouping is a by (…), without (…), on (…) or ignoring (…)
	// clause; promqlRange a [1h].
	promqlGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	promqlRange    = regexp.MustCompile(`\[[^\]]*\]`)
	// promqlSelector is a name and its matchers; a name followed by "(" is
	// a function.
	promqlSelector = regexp.MustCompile(`\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^}]*\})?\s*(\()?`)
	promqlMatcher  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"`)
	templateLabel  = regexp.MustCompile(`\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)`)
)

// promqlKeywords are the words of PromQL between selectors.
var promqlKeywords = []string{"and", "or", "unless", "group_left", "group_right", "bool", "offset"}

// targetLabels are Prometheus's own labels of every scraped series; up is
// its own metric of each target.
var targetLabels = []string{"job", "instance"}

// ruleProblems reads a rule's expression simply (selectors, their
// matchers, the labels of by, without, on and ignoring) and names what
// the scrape lacks: a metric, a label of it, a value an = or != matcher
// names, a regular expression's alternative that matches no value; and a
// $labels.X of its annotations that no metric of the expression has.
func ruleProblems(r alertRule, scrape promtest.Families) []string {
	var problems []string
	labelsOf := map[string]bool{}
	expr := promqlRange.ReplaceAllString(r.Expr, "")
	var grouped []string
	for _, m := range promqlGrouping.FindAllStringSubmatch(expr, -1) {
		for l := range strings.SplitSeq(m[1], ",") {
			grouped = append(grouped, strings.TrimSpace(l))
		}
	}
	expr = promqlGrouping.ReplaceAllString(expr, "")
	var metrics int
	for _, m := range promqlSelector.FindAllStringSubmatch(expr, -1) {
		name, matchers, call := m[1], m[2], m[3] != ""
		if call || slices.Contains(promqlKeywords, name) {
			continue
		}
		metrics++
		if name == "up" {
			continue // Prometheus's own, of each target
		}
		fam := scrape[name]
		if fam == nil {
			problems = append(problems, "metric "+name+" is not in the scrape")
			continue
		}
		values := labelValues(fam)
		for l := range values {
			labelsOf[l] = true
		}
		for _, mm := range promqlMatcher.FindAllStringSubmatch(matchers, -1) {
			label, op, value := mm[1], mm[2], mm[3]
			if slices.Contains(targetLabels, label) {
				continue
			}
			have, ok := values[label]
			if !ok {
				problems = append(problems, name+" has no label "+label)
				continue
			}
			alternatives := []string{regexp.QuoteMeta(value)}
			if op == "=~" || op == "!~" {
				alternatives = strings.Split(value, "|")
			}
			for _, alt := range alternatives {
				re, err := regexp.Compile("^(?:" + alt + ")$")
				if err != nil || !slices.ContainsFunc(have, re.MatchString) {
					problems = append(problems, name+"{"+label+op+`"`+alt+`"} matches no series (its values: `+strings.Join(have, ", ")+")")
				}
			}
		}
	}
	if metrics == 0 {
		problems = append(problems, "no metric read in "+r.Expr)
	}
	for _, l := range grouped {
		if !labelsOf[l] && !slices.Contains(targetLabels, l) {
			problems = append(problems, "grouping label "+l+" is none of its metrics'")
		}
	}
	for _, text := range r.Annotations {
		for _, m := range templateLabel.FindAllStringSubmatch(text, -1) {
			if !labelsOf[m[1]] && !slices.Contains(targetLabels, m[1]) {
				problems = append(problems, "annotation's $labels."+m[1]+" is none of its metrics' labels")
			}
		}
	}
	return problems
}

// labelValues maps each label of a family to the values its series have.
func labelValues(fam *dto.MetricFamily) map[string][]string {
	out := map[string][]string{}
	for _, m := range fam.GetMetric() {
		for _, lp := range m.GetLabel() {
			if !slices.Contains(out[lp.GetName()], lp.GetValue()) {
				out[lp.GetName()] = append(out[lp.GetName()], lp.GetValue())
			}
		}
	}
	return out
}
