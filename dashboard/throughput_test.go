package dashboard_test

import (
	"bufio"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/dashboard"
	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/internal/httpd"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/internal/queuetest"
)

// The overview's finished per minute counts the Completed and Failed job
// events of the last hour in the event stream, which every host's daemon
// shares: a dashboard started after them (as on a host started later)
// shows what one running before counted, each event once (a resend comes
// twice to a live subscriber), and nothing older than the hour.
func TestThroughputCountsTheEventStream(t *testing.T) {
	b := setup(t)
	ago := time.Now().Add(-10 * time.Minute)
	fin := func(id, to string, at time.Time) events.Event {
		return events.Event{ID: id, Kind: events.KindJob, BatchID: "bid1", JobID: "jid-" + id, From: "Notify", To: to, Host: "other", Time: at}
	}
	for _, e := range []events.Event{fin("a", "Completed", ago), fin("b", "Completed", ago), fin("c", "Failed", ago),
		fin("a", "Completed", ago), fin("old", "Completed", time.Now().Add(-2*time.Hour))} {
		b.bus.Publish(e)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	must(t, b.bus.Flush(ctx))
	later := *b
	later.base = b.anotherDashboard()
	for _, d := range []*bundle{b, &later} {
		d.waitOverview(t, "2 completed, 1 failed.")
	}
}

// anotherDashboard serves a second dashboard on the bundle's queue and
// bus, as another host's daemon would, and returns its base URL.
func (b *bundle) anotherDashboard() string {
	b.t.Helper()
	log := slog.New(slog.NewTextHandler(logtest.NewT(b.t), &slog.HandlerOptions{Level: slog.LevelWarn}))
	d, err := dashboard.New(dashboard.Config{Ops: b.svc, Session: queuetest.Session(b.t, log), Bus: b.bus,
		Tokens: tokens(b.t, false), Logger: log})
	must(b.t, err)
	web, err := httpd.Start("127.0.0.1:0", log)
	must(b.t, err)
	web.Handle(dashboard.Prefix, d)
	b.t.Cleanup(web.Close)
	b.t.Cleanup(d.Close)
	return web.DefaultAdvertise()
}

// waitOverview reads the overview until it holds want, again at each
// notice of the dashboard's live stream, for up to 10 s.
func (b *bundle) waitOverview(t *testing.T, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", b.base+"/ui/live", nil)
	must(t, err)
	resp, err := b.client(readToken).Do(req)
	must(t, err)
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	for {
		page := b.get(readToken, "/ui/")
		if strings.Contains(page.body, want) {
			return
		}
		notice := false
		for !notice && lines.Scan() {
			notice = strings.HasPrefix(lines.Text(), "data:")
		}
		if !notice { // the stream ended, or the 10 s did
			i := strings.Index(page.body, `id="finished"`)
			t.Fatalf("%s: the overview does not say %q: %s", b.base, want, page.body[max(i, 0):min(max(i, 0)+200, len(page.body))])
		}
	}
}
