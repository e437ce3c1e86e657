package events

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// logTap is a slog handler that hands each record at info and above to a
// channel, so that a test waits for a log line rather than sleeping.
type logTap chan slog.Record

func (h logTap) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (h logTap) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h logTap) WithGroup(string) slog.Handler                { return h }
func (h logTap) Handle(_ context.Context, r slog.Record) error {
	select {
	case h <- r.Clone():
	default: // nobody is listening for that many: dropped
	}
	return nil
}

// The bus's reconnect to its embedded server names that server: where its
// clients reach it (--nats-listen), not the NATS default address the
// in-process connection reports, where nothing of the bus's listens (a
// host on :24221 logged "reconnected url=nats://127.0.0.1:4222").
func TestReconnectLogNamesTheEmbeddedServer(t *testing.T) {
	t.Parallel()
	tap := make(logTap, 64)
	bus, _ := openBus(t, Config{Listen: "127.0.0.1:0", Logger: slog.New(tap)})
	want := bus.ClientURL() // the port the server took
	id, err := bus.Conn().GetClientID()
	if err != nil {
		t.Fatal(err)
	}
	// The server drops the bus's connection; the client reconnects by itself.
	if err := bus.emb.server().DisconnectClientByID(id); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(testTimeout)
	for {
		select {
		case r := <-tap:
			if r.Message != "events: NATS reconnected" {
				continue
			}
			url := ""
			r.Attrs(func(a slog.Attr) bool {
				if a.Key == "url" {
					url = a.Value.String()
				}
				return true
			})
			if !strings.HasPrefix(url, want+" ") {
				t.Fatalf("reconnect logged url=%q; want the embedded server's client address %s", url, want)
			}
			return
		case <-deadline:
			t.Fatal("no reconnect logged")
		}
	}
}
