package reactor_test

import (
	"context"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/internal/natstest"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Two daemons on one NATS: one change in ZooKeeper (a new batch) makes
// each daemon's watcher send one wake-up, on its own subject, and each
// daemon's pending-batch pool receives exactly one per change, its own
// daemon's (not one per daemon, as when the signals were shared).
func TestOneWakeUpPerChangePerDaemon(t *testing.T) {
	e := newEnv(t)
	ns := natstest.Run(t, &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true,
		StoreDir: t.TempDir(), NoSigs: true, NoLog: true})
	seen := observeSignals(t, ns.ClientURL())

	if _, err := e.q.HoldQueue(t.Context(), queue.QueueIngest); err != nil {
		t.Fatal(err) // nothing is taken: the batch stays the only change
	}
	hosts := []string{"d1", "d2"}
	for _, host := range hosts {
		bus, err := events.Open(context.Background(), events.Config{URL: ns.ClientURL(), Host: host, Logger: e.log})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = bus.Close() })
		e.daemon(host, func(c *reactor.Config) { c.Bus, c.Rescan = bus, time.Hour })
	}
	pending := func(host string) string { return events.SignalSubject(host, "watch.batch.pending") }
	seen.wait(t, "each daemon's first look at /batches", func(n map[string]int) bool {
		return n[pending("d1")] == 1 && n[pending("d2")] == 1
	})

	e.submit(map[string]any{"profile_name": "demo", "payload_url": "passthrough:1"})
	seen.wait(t, "each daemon's wake-up for the new batch", func(n map[string]int) bool {
		return n[pending("d1")] == 2 && n[pending("d2")] == 2
	})
	// The server hands a signal to its subscribers one after another, so
	// the observer may hold its copy before a pool's subscription counts
	// it: wait until each pool has counted its two, then count again. The
	// four signals were all seen, and a pool that heard the other daemon's
	// signals (as when they were shared) would have counted four.
	delivered := func(host string) int64 {
		conns, err := ns.Connz(&server.ConnzOptions{Subscriptions: true, SubscriptionsDetail: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range conns.Conns {
			for _, s := range c.SubsDetail {
				if c.Name == "ingestq@"+host && s.Subject == pending(host) {
					return s.Msgs
				}
			}
		}
		return -1
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(time.Minute)
	for delivered("d1") < 2 || delivered("d2") < 2 {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("the pools' subscriptions did not count their wake-ups: d1 %d, d2 %d", delivered("d1"), delivered("d2"))
		}
	}
	for _, host := range hosts {
		if n := delivered(host); n != 2 {
			t.Errorf("%s's pending-batch pool received %d wake-ups for its first look and one change, want 2", host, n)
		}
	}
	for subject, n := range seen.counts() {
		if !strings.HasPrefix(subject, events.SignalSubject("d1", "")) && !strings.HasPrefix(subject, events.SignalSubject("d2", "")) {
			t.Errorf("a signal outside the daemons' own subjects: %s (%d)", subject, n)
		}
	}
}

// signalCounts counts the signals seen on each subject.
type signalCounts struct {
	mu      sync.Mutex
	n       map[string]int
	changed chan struct{} // closed and replaced on every signal
}

// observeSignals subscribes, from a connection of its own, to every signal.
func observeSignals(t *testing.T, url string) *signalCounts {
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	s := &signalCounts{n: map[string]int{}, changed: make(chan struct{})}
	if _, err := nc.Subscribe(events.InternalPrefix+">", func(m *nats.Msg) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.n[m.Subject]++
		close(s.changed)
		s.changed = make(chan struct{})
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *signalCounts) counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.n)
}

// wait waits until cond holds over the counts, failing after a minute.
func (s *signalCounts) wait(t *testing.T, what string, cond func(map[string]int) bool) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		s.mu.Lock()
		ok, ch := cond(s.n), s.changed
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out waiting for %s: signals seen %v", what, s.counts())
		}
	}
}
