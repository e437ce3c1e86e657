package dashboard

import (
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/ingestq/ingestq/internal/visible"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// pageNames are the templates with a page of their own; each is parsed
// with the layout.
var pageNames = []string{"overview", "batches", "batch", "jobs", "job", "access", "search", "login", "error"}

func parsePages() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"ago":        ago,
		"since":      func(t time.Time) string { return ago(time.Since(t)) },
		"when":       when,
		"stamp":      stamp,
		"state":      func(s queue.State) string { return s.Folder() },
		"join":       strings.Join,
		"pct":        func(p *float64) string { return percentText(p) },
		"add":        func(a, b int) int { return a + b },
		"list":       func(s ...string) []string { return s },
		"statusText": http.StatusText,
		"bytes":      func(n int64) string { return humanize.Bytes(uint64(max(n, 0))) },
		"late":       func(h reactor.HostInfo) bool { return h.Late(time.Now()) },
		// visible shows what the queue holds (names, titles, messages) with its
		// bidirectional and control characters as escapes: "\u202e" reorders no name.
		"visible": visible.Text,
		// web tells a link a browser follows (a file: URL it refuses) from a URL shown as text.
		"web": func(u string) bool { return strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://") },
	}
	pages := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("dashboard: template %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// when is how every page shows a time: UTC to the second.
func when(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") }

// stamp shows a time a node keeps as text (Merritt's last_modified, an
// access token's RFC 3339) as when does; one that does not parse (a
// foreign writer's) as written.
func stamp(s string) string {
	if t, ok := queue.NodeTime(s); ok {
		return when(t)
	}
	return s
}

func percentText(p *float64) string {
	if p == nil {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", *p)
}

// bar is a progress bar: segments of a 100-wide SVG (SVG attributes, not
// inline styles, which the page's security policy refuses).
type bar struct {
	Segments []segment
	Title    string
}

type segment struct {
	Class string
	X, W  float64
}

// progress draws a batch's finished jobs: completed, failed, deleted, of
// total.
func progress(total, completed, failed, deleted int) bar {
	b := bar{Title: fmt.Sprintf("%d of %d finished: %d completed, %d failed, %d deleted",
		completed+failed+deleted, total, completed, failed, deleted)}
	if total == 0 {
		return b
	}
	x := 0.0
	for _, s := range []struct {
		class string
		n     int
	}{{"completed", completed}, {"failed", failed}, {"deleted", deleted}} {
		if s.n == 0 {
			continue
		}
		w := 100 * float64(s.n) / float64(total)
		b.Segments = append(b.Segments, segment{s.class, x, w})
		x += w
	}
	return b
}

// chart is the throughput chart: a bar pair per minute in a 600×100 SVG.
type chart struct {
	Bars []chartBar
}

type chartBar struct {
	X, W                 float64
	CompletedY, FailedY  float64
	CompletedH, FailedH  float64
	Title                string
	HasCompleted, HasBad bool
}

const chartW, chartH = 600.0, 100.0

func throughputChart(t Throughput) chart {
	var c chart
	if t.Max == 0 || len(t.Minutes) == 0 {
		return c
	}
	w := chartW / float64(len(t.Minutes))
	for i, m := range t.Minutes {
		ch := chartH * float64(m.Completed) / float64(t.Max)
		fh := chartH * float64(m.Failed) / float64(t.Max)
		c.Bars = append(c.Bars, chartBar{X: float64(i) * w, W: w * 0.8,
			CompletedY: chartH - ch, CompletedH: ch, FailedY: chartH - ch - fh, FailedH: fh,
			HasCompleted: m.Completed > 0, HasBad: m.Failed > 0,
			Title: fmt.Sprintf("%s: %d completed, %d failed", m.At.Format("15:04"), m.Completed, m.Failed)})
	}
	return c
}
