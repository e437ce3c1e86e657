package events

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/ingestq/ingestq/internal/natstest"
)

// testTimeout bounds every wait in these tests; nothing should come near it.
const testTimeout = 45 * time.Second // a cluster re-forming may take an election (up to 9 s) and the 30 s settle of decision 127

// logRecorder is a slog handler that keeps records at info and above (or
// from min), so tests can count warnings and nothing reaches the test
// output.
type logRecorder struct {
	mu   sync.Mutex
	recs []slog.Record
	min  slog.Level
}

func (h *logRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= h.min }
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *logRecorder) WithGroup(string) slog.Handler                { return h }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}

// count returns how many records have the given level and message.
func (h *logRecorder) count(level slog.Level, msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.recs {
		if r.Level == level && r.Message == msg {
			n++
		}
	}
	return n
}

// containing returns how many records, of any level, hold part in their
// message.
func (h *logRecorder) containing(part string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.recs {
		if strings.Contains(r.Message, part) {
			n++
		}
	}
	return n
}

// attrs returns the attributes of the first record whose message is msg,
// as text.
func (h *logRecorder) attrs(msg string) map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]string{}
	for _, r := range h.recs {
		if r.Message == msg {
			r.Attrs(func(a slog.Attr) bool { out[a.Key] = a.Value.String(); return true })
			break
		}
	}
	return out
}

// attrValues returns the value of key in each record whose message holds
// part ("" where it has none).
func (h *logRecorder) attrValues(part, key string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.recs {
		if strings.Contains(r.Message, part) {
			v := ""
			r.Attrs(func(a slog.Attr) bool {
				if a.Key == key {
					v = a.Value.String()
				}
				return true
			})
			out = append(out, v)
		}
	}
	return out
}

// warned returns the first warning whose message holds part, or "".
func (h *logRecorder) warned(part string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.recs {
		if r.Level == slog.LevelWarn && strings.Contains(r.Message, part) {
			return r.Message
		}
	}
	return ""
}

// openBus opens a bus for a test (embedded, in-process, in a temporary
// data dir unless cfg says otherwise) and closes it when the test ends.
func openBus(t testing.TB, cfg Config) (*Bus, *logRecorder) {
	t.Helper()
	rec := &logRecorder{}
	if cfg.URL == "" && cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(rec)
	}
	cfg.Host = "test-host"
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	bus, err := Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = bus.Close() })
	return bus, rec
}

// flush waits for every publish so far to be acknowledged or lost.
func flush(t testing.TB, bus *Bus) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := bus.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
}

// replay returns what Replay delivers.
func replay(t testing.TB, nc *nats.Conn, f Filter) []Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var got []Event
	if err := Replay(ctx, nc, "", f, func(e Event) error {
		got = append(got, e)
		return nil
	}); err != nil {
		t.Fatalf("Replay(%+v): %v", f, err)
	}
	return got
}

// connect opens a separate client connection, closed when the test ends.
func connect(t testing.TB, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// startServer runs a standalone JetStream nats-server, as an external
// cluster would be, on 127.0.0.1:port (server.RANDOM_PORT for any).
func startServer(t testing.TB, port int, storeDir string) *server.Server {
	t.Helper()
	return natstest.Run(t, &server.Options{
		JetStream: true,
		StoreDir:  storeDir,
		Host:      "127.0.0.1",
		Port:      port,
		NoSigs:    true,
		NoLog:     true,
	})
}

// waitFor polls cond until it holds or the test timeout passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// receive returns the next value on ch or fails the test.
func receive[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testTimeout):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

// mixedEvents makes n events of every kind across three batches and ten
// jobs; Message holds the index, so order can be checked.
func mixedEvents(n int) []Event {
	batches := []string{"bid-a", "bid-b", "bid-c"}
	states := []string{"Pending", "Estimating", "Completed", "Failed"}
	evs := make([]Event, n)
	for i := range evs {
		e := Event{
			BatchID: batches[i%3],
			JobID:   fmt.Sprintf("jid-%d", (i/4)%10),
			Message: strconv.Itoa(i),
		}
		switch i % 4 {
		case 0:
			e.Kind, e.From, e.To = KindJob, "Pending", states[(i/4)%4]
		case 1:
			e.Kind, e.JobID, e.From, e.To = KindBatch, "", "Pending", "Processing"
		case 2:
			e.Kind, e.Attrs = KindProgress, map[string]any{"done": float64(i)}
		case 3:
			e.Kind, e.To = KindAdmin, "hold"
		}
		evs[i] = e
	}
	return evs
}

// messages lists the Message of each event that keep accepts.
func messages(evs []Event, keep func(Event) bool) []string {
	var out []string
	for _, e := range evs {
		if keep(e) {
			out = append(out, e.Message)
		}
	}
	return out
}

// discardLogger drops everything.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
