package events

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Joined to an external server, the bus survives its outage: publishes
// stay prompt, events the server does not acknowledge are sent again, and
// once a server is back on the same port and store (within the minute the
// resends last) the bus reconnects by itself and records every event, none
// lost, none twice.
func TestExternalServerOutageAndReconnect(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := startServer(t, server.RANDOM_PORT, dir)
	port := srv.Addr().(*net.TCPAddr).Port
	// A short ack timeout so that events buffered during the outage are
	// sent again within a second rather than fifteen.
	bus, logs := openBus(t, Config{URL: srv.ClientURL(), ackTimeout: time.Second})
	if bus.ClientURL() != srv.ClientURL() {
		t.Errorf("ClientURL() = %q, want %q", bus.ClientURL(), srv.ClientURL())
	}

	evs := mixedEvents(230)
	for _, e := range evs[:10] {
		bus.Publish(e)
	}
	flush(t, bus)
	if s := bus.Stats(); s.Published != 10 || s.Lost != 0 {
		t.Fatalf("before the outage Stats() = %+v", s)
	}

	srv.Shutdown()
	srv.WaitForShutdown()
	for _, e := range evs[10:210] { // must simply complete while the server is down
		bus.Publish(e)
	}
	waitFor(t, "events sent again during the outage", func() bool { return bus.Stats().Retried > 0 })
	t.Logf("during the outage: %+v", bus.Stats())

	startServer(t, port, dir)
	waitFor(t, "the bus to reconnect", func() bool { return bus.Conn().Status() == nats.CONNECTED })
	flush(t, bus) // what the outage left waiting is sent again and acknowledged
	if s := bus.Stats(); s.Lost != 0 || s.Published != 210 || s.Waiting != 0 {
		t.Errorf("after reconnect Stats() = %+v, want all 210 published, none lost or waiting", s)
	}

	for _, e := range evs[210:] {
		bus.Publish(e)
	}
	flush(t, bus)
	if s := bus.Stats(); s.Lost != 0 || s.Published != 230 {
		t.Errorf("at the end Stats() = %+v, want 230 published, none lost", s)
	}
	got := messages(replay(t, bus.Conn(), Filter{}), keepAll)
	if len(got) != 230 {
		t.Errorf("the stream holds %d events, want the 230 published, each once", len(got))
	}
	if !slices.Equal(got[:10], messages(evs[:10], keepAll)) {
		t.Errorf("the events before the outage are not first in the stream: %v", head(got))
	}
	if !slices.Equal(got[len(got)-20:], messages(evs[210:], keepAll)) {
		t.Errorf("the events after the reconnect are not last in the stream: %v", got[len(got)-20:])
	}
	if n := logs.count(slog.LevelWarn, "events: NATS disconnected, reconnecting"); n != 1 {
		t.Errorf("%d disconnect warnings, want 1", n)
	}
	if n := logs.count(slog.LevelInfo, "events: NATS reconnected"); n != 1 {
		t.Errorf("%d reconnect notices, want 1", n)
	}
}

// An unreachable URL fails Open at once, naming the URL (password hidden).
func TestOpenUnreachableURL(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now

	// A user's password, and a token (nats://TOKEN@host), are masked.
	for url, shown := range map[string]string{"nats://ingest:s3cret@" + addr: "nats://ingest:xxxxx@" + addr, "nats://s3cret@" + addr: "nats://xxxxx@" + addr} {
		ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
		start := time.Now()
		bus, err := Open(ctx, Config{URL: url, Logger: discardLogger()})
		cancel()
		if err == nil {
			bus.Close()
			t.Fatal("Open succeeded on a closed port")
		}
		t.Logf("Open failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
		if !strings.Contains(err.Error(), shown) {
			t.Errorf("error %q does not name the URL as %s", err, shown)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("error %q shows the password", err)
		}
	}
}

// An embedded bus needs somewhere to keep its store.
func TestOpenEmbeddedNeedsDataDir(t *testing.T) {
	t.Parallel()
	_, err := Open(t.Context(), Config{Logger: discardLogger()})
	if err == nil || !strings.Contains(err.Error(), "data directory") {
		t.Errorf("Open without DataDir = %v", err)
	}
	_, err = Open(t.Context(), Config{DataDir: t.TempDir(), Listen: "127.0.0.1:http", Logger: discardLogger()})
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:http") {
		t.Errorf("Open with a bad listen address = %v", err)
	}
}

// With the server gone for good, a flood of publishes neither blocks nor
// grows without bound, and Close still returns.
func TestPublishFloodWhileServerIsDown(t *testing.T) {
	t.Parallel()
	srv := startServer(t, server.RANDOM_PORT, t.TempDir())
	bus, _ := openBus(t, Config{URL: srv.ClientURL()})
	srv.Shutdown()
	srv.WaitForShutdown()
	waitFor(t, "the bus to notice", func() bool { return bus.Conn().Status() == nats.RECONNECTING })

	const n = 100_000 // more than the queue, the pending acks and the reconnect buffer hold
	start := time.Now()
	for i := range n {
		bus.Publish(Event{Kind: KindProgress, JobID: "jid", Attrs: map[string]any{"i": i}})
	}
	t.Logf("%d publishes with NATS down took %v; %+v", n, time.Since(start).Round(time.Millisecond), bus.Stats())
	if bus.Stats().Lost == 0 {
		t.Error("nothing counted lost")
	}
	start = time.Now()
	if err := bus.Close(); err != nil {
		t.Fatal(err)
	}
	s := bus.Stats()
	t.Logf("Close took %v; %+v", time.Since(start).Round(time.Millisecond), s)
	// One job's progress events: those a later one of the job supersedes
	// are counted so (decision 930), the rest lost; none published.
	if s.Published != 0 || s.Lost == 0 || s.Lost+s.Superseded != n {
		t.Errorf("Stats() = %+v, want all %d lost or superseded, none published", s, n)
	}
}

// An outage shorter than the ack timeout loses nothing: events published
// while the client reconnects wait in its buffer and are recorded after.
func TestShortOutageLosesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := startServer(t, server.RANDOM_PORT, dir)
	port := srv.Addr().(*net.TCPAddr).Port
	bus, _ := openBus(t, Config{URL: srv.ClientURL()})

	srv.Shutdown()
	srv.WaitForShutdown()
	waitFor(t, "the bus to notice", func() bool { return bus.Conn().Status() == nats.RECONNECTING })
	evs := mixedEvents(200)
	for _, e := range evs {
		bus.Publish(e)
	}
	startServer(t, port, dir)
	flush(t, bus) // returns once the buffered events are acknowledged
	if s := bus.Stats(); s.Published != 200 || s.Lost != 0 {
		t.Errorf("Stats() = %+v, want 200 published, none lost", s)
	}
	if got := messages(replay(t, bus.Conn(), Filter{}), keepAll); !slices.Equal(got, messages(evs, keepAll)) {
		t.Errorf("stream has %d events, want the 200 in order", len(got))
	}
}
