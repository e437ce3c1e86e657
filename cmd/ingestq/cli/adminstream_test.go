package cli_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/ingestq/ingestq/cmd/ingestq/cli"
	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// The CLI's admin events go only into a stream of its own queue (decision
// 385's check, as replay and the daemons make it): pointed at a NATS whose
// stream records another queue's events, an action is made, its event is
// not published, and one warning names both queues; pointed at its own
// queue's NATS, its event is recorded as before.
func TestAdminEventsOnlyIntoTheirQueuesStream(t *testing.T) {
	t.Parallel()
	ns := startNATSServer(t, &server.Options{JetStream: true, StoreDir: t.TempDir()})
	url := ns.ClientURL()
	mine, other := newEnv(t), newEnv(t)
	id, err := mine.q.Identity(t.Context())
	mine.ok(err)
	mineAt := "ZooKeeper " + zktest.Shared(t).Addr + ", root " + mine.root
	bus, err := events.Open(t.Context(), events.Config{URL: url, Queue: id, QueueAt: mineAt, Host: "test",
		Logger: slog.New(slog.NewTextHandler(logtest.NewT(t), &slog.HandlerOptions{Level: slog.LevelWarn}))})
	mine.ok(err)
	t.Cleanup(func() { _ = bus.Close() })

	hold := func(e *env) (string, string) {
		t.Helper()
		out, stderr, code := runEnv(t, map[string]string{"USER": "alice"},
			"--zk", zktest.Shared(t).Addr, "--zk-root", e.root, "--nats", url, "hold", "queue")
		wantCode(t, code, 0)
		held, err := e.q.QueueHeld(t.Context(), queue.QueueIngest)
		e.ok(err)
		if !held {
			t.Errorf("queue of %s not held", e.root)
		}
		return out, stderr
	}

	// Another queue's CLI: the hold is made, its event goes nowhere.
	out, stderr := hold(other)
	if !strings.HasPrefix(out, "queue ingest held: ") {
		t.Errorf("hold queue on another queue's NATS: stdout %q", out)
	}
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], " WRN the change is made, but its event is not recorded") {
		t.Errorf("stderr %q: want one warning that the event is not recorded", stderr)
	}
	for _, want := range []string{events.DefaultStream, url, "another queue", "root " + mine.root, "root " + other.root, "--nats", cli.EnvNATS} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the warning does not name %q: %q", want, stderr)
		}
	}
	if got := recordedEvents(t, url, id); len(got) != 0 {
		t.Errorf("another queue's hold recorded in this queue's stream: %+v", got)
	}

	// Its own queue's CLI: recorded as before, without a word.
	_, stderr = hold(mine)
	if stderr != "" {
		t.Errorf("hold queue on its own queue's NATS: stderr %q", stderr)
	}
	got := recordedEvents(t, url, id)
	if len(got) != 1 || got[0].Kind != events.KindAdmin || got[0].To != "hold" || got[0].Actor != "alice" {
		t.Errorf("recorded: %+v, want this queue's one hold by alice", got)
	}
}

// recordedEvents are the events recorded in url's stream, read as the
// queue whose identity is id reads them.
func recordedEvents(t *testing.T, url, id string) []events.Event {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var evs []events.Event
	err = events.Replay(t.Context(), nc, "", events.Filter{Queue: id}, func(ev events.Event) error {
		evs = append(evs, ev)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// A test's CLI that names no NATS publishes to none (noNATS), not to
// 127.0.0.1:4222, a developer's daemon when one runs.
func TestTestsPublishToNoOutsideNATS(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, stderr, code := e.run("hold", "queue")
	wantCode(t, code, 0)
	if !strings.Contains(stderr, "NATS at "+noNATS) {
		t.Errorf("stderr %q: want the warning to name %s, the NATS tried", stderr, noNATS)
	}
}
