package queue_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// A daemon's route is an ephemeral node under its name: another live
// session cannot take the name, the owner may rewrite it, and it goes with
// its session, after which the name is free.
func TestAnnounceRoute(t *testing.T) {
	r := newRun(t)
	connA, qa := r.second()
	_, qb := r.second()
	r.ok(qa.AnnounceRoute(t.Context(), "a", "nats://h1:6222"))
	r.ok(qa.AnnounceRoute(t.Context(), "a", "nats://h1:7222")) // its own: rewritten
	r.ok(qb.AnnounceRoute(t.Context(), "b", "nats://h2:6222"))
	if err := qb.AnnounceRoute(t.Context(), "a", "nats://h2:6222"); !errors.Is(err, queue.ErrRefused) {
		t.Fatalf("b announcing a's name: %v, want ErrRefused", err)
	}
	routes, err := r.q.Routes(t.Context())
	r.ok(err)
	if len(routes) != 2 || routes[0].Name != "a" || string(routes[0].Data) != "nats://h1:7222" || routes[0].Mine ||
		routes[1].Name != "b" || string(routes[1].Data) != "nats://h2:6222" {
		t.Fatalf("Routes = %+v, want a at nats://h1:7222 and b", routes)
	}
	if err := qa.AnnounceRoute(t.Context(), "a/b", "nats://h1:6222"); err == nil {
		t.Fatal("a name with a slash was accepted")
	}

	r.closeAndWait(connA, "/ingestq/routes/a")
	r.ok(qb.AnnounceRoute(t.Context(), "a", "nats://h2:6222"))
	routes, err = qb.Routes(t.Context())
	r.ok(err)
	if len(routes) != 2 || !routes[0].Mine || string(routes[0].Data) != "nats://h2:6222" {
		t.Fatalf("after a's session ended, Routes = %+v, want a taken by b's session", routes)
	}
}

// A daemon restarted in place of one killed just now waits for the dead
// one's host node to go with its session (WithNameWait), then takes the
// name; a name a live daemon keeps is refused once the wait is over.
func TestNameWaitsForAStoppedDaemon(t *testing.T) {
	r := newRun(t)
	connA, qa := r.second()
	r.ok(qa.RegisterHost(t.Context(), "h", []byte(`{"pid":1}`)))
	var log logtest.Buffer
	qb, err := queue.New(zktest.Connect(t), r.root, queue.WithLogger(slog.New(slog.NewTextHandler(&log, nil))),
		queue.WithNameWait(time.Minute))
	r.ok(err)
	done := make(chan error, 1)
	go func() { done <- qb.RegisterHost(t.Context(), "h", []byte(`{"pid":2}`)) }()
	log.WaitFor(t, "waiting for it to end", "hosts/h")
	connA.Close() // the old daemon's session ends
	select {
	case err := <-done:
		r.ok(err)
	case <-time.After(time.Minute):
		t.Fatal("the name was not taken after the old session ended")
	}
	hosts, err := qb.Hosts(t.Context())
	r.ok(err)
	if len(hosts) != 1 || !hosts[0].Mine || string(hosts[0].Data) != `{"pid":2}` {
		t.Fatalf("Hosts = %+v, want h, the new daemon's", hosts)
	}
	qc, err := queue.New(zktest.Connect(t), r.root, queue.WithNameWait(50*time.Millisecond))
	r.ok(err)
	if err := qc.RegisterHost(t.Context(), "h", nil); !errors.Is(err, queue.ErrRefused) || !strings.Contains(err.Error(), "still there after 50ms") {
		t.Fatalf("a name a live daemon keeps: %v, want ErrRefused after the wait", err)
	}
}

// A daemon that takes a name while `hosts forget` writes its note is never
// forgotten while it runs: the check that no node of the name lives and
// the note are one multi(). Here the daemon registers just before the
// forget's write goes to ZooKeeper (the queue's request log says when).
func TestForgetRefusesAHostThatComesUpMeanwhile(t *testing.T) {
	r := newRun(t)
	_, daemon := r.second()
	r.ok(r.q.ForgetHost(t.Context(), "gone", nil)) // the folders are there: the next multi is the forget's write
	registered := false
	hook := slog.New(slog.NewTextHandler(writerFunc(func(line string) {
		if strings.Contains(line, "op=multi") && !registered {
			registered = true
			r.ok(daemon.RegisterHost(t.Context(), "h", []byte(`{"pid":1}`)))
		}
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	q, err := queue.New(r.conn, r.root, queue.WithLogger(hook))
	r.ok(err)
	err = q.ForgetHost(t.Context(), "h", []byte(`{"by":"test"}`))
	if !registered {
		t.Fatal("the forget sent no multi(): the test's hook never ran")
	}
	if !errors.Is(err, queue.ErrRefused) || !strings.Contains(err.Error(), "host h is running") {
		t.Errorf("forget of a host that came up before the write: %v, want refused as running", err)
	}
	if _, forgotten, err := r.q.Forgotten(t.Context(), "h"); err != nil || forgotten {
		t.Errorf("the live host h is noted forgotten (%v, %v)", forgotten, err)
	}
}

// writerFunc hands each log line to a function, as it is written.
type writerFunc func(line string)

func (w writerFunc) Write(p []byte) (int, error) { w(string(p)); return len(p), nil }
