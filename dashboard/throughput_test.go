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
	"github.com/ingestq/ingestq/internal/natstest"
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
	b.waitOverviewFor(t, want, 10*time.Second)
}

// waitOverviewFor is waitOverview for up to d.
func (b *bundle) waitOverviewFor(t *testing.T, want string, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
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

// A dashboard whose daemon's NATS cluster is still forming (its server
// routed to a member not up yet: no meta leader, no stream) waits for the
// event stream without a warning, and reads the last hour's finished jobs
// once the other member is up. Before, every host of a cluster started at
// once warned "the last hour's finished jobs not read from the event
// stream yet; asking again … context deadline exceeded" 5 s in (decision
// 895 (b)).
func TestThroughputWaitsQuietlyForAFormingCluster(t *testing.T) {
	t.Parallel()
	own, later := natstest.FreeAddr(t), natstest.FreeAddr(t) // this member's cluster address, the other's: nothing there yet
	ownRoute, err := events.RouteURL(own)
	must(t, err)
	laterRoute, err := events.RouteURL(later)
	must(t, err)
	member := func(c *events.Config) {
		c.Listen, c.Cluster, c.Routes, c.ClusterName = "127.0.0.1:0", own, []string{laterRoute}, "test"
	}
	b := setup(t, func(o *options) { o.bus = member })
	// The dashboard asks for the stream again once its first ask had no
	// answer (5 s): past the moment it warned.
	asked := natstest.Requests(t, b.bus.ClientURL(), "$JS.API.STREAM.INFO."+events.DefaultStream)
	for range 2 {
		select {
		case <-asked:
		case <-time.After(time.Minute):
			t.Fatal("the dashboard did not ask for the event stream twice in a minute")
		}
	}

	log := slog.New(slog.NewTextHandler(logtest.NewT(t), &slog.HandlerOptions{Level: slog.LevelInfo}))
	other, err := events.Open(t.Context(), events.Config{DataDir: t.TempDir(), Host: "other", Logger: log, Listen: "127.0.0.1:0",
		Cluster: later, Routes: []string{ownRoute}, ClusterName: "test"})
	must(t, err)
	t.Cleanup(func() { _ = other.Close() })
	b.waitOverviewFor(t, "0 completed, 0 failed.", time.Minute) // without "(counted since …)": the hour was read
	if got := b.log.Lines("dashboard:"); len(got) != 0 {
		t.Errorf("the dashboard warned while its cluster formed: %q", got)
	}
}
