package events

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// streamQueue is the queue the stream's metadata names.
func streamQueue(t *testing.T, js jetstream.JetStream) string {
	t.Helper()
	s, err := js.Stream(t.Context(), DefaultStream)
	if err != nil {
		t.Fatalf("stream %s: %v", DefaultStream, err)
	}
	return s.CachedInfo().Config.Metadata[metaQueue]
}

// startStreamServer runs a standalone JetStream nats-server and returns its
// URL and a JetStream client of it, to read the stream.
func startStreamServer(t *testing.T) (string, jetstream.JetStream) {
	t.Helper()
	url := startServer(t, server.RANDOM_PORT, t.TempDir()).ClientURL()
	js, err := jetstream.New(connect(t, url))
	if err != nil {
		t.Fatal(err)
	}
	return url, js
}

// On a joined NATS the stream records which queue's events it holds: one
// made before streams named their queue is adopted (and says so), the same
// queue's daemons share it, and another queue's is refused at once in
// words that name the stream, the NATS and what to do.
func TestStreamOfAnotherQueueIsRefused(t *testing.T) {
	t.Parallel()
	url, js := startStreamServer(t)
	const adopted = "events: the stream named no queue; it records this queue's events from now on"

	old, _ := openBus(t, Config{URL: url}) // an ingestq that named no queue
	_ = old.Close()
	a, logs := openBus(t, Config{URL: url, Queue: "A", QueueAt: "ZooKeeper zk:2181, root /a"})
	if got := streamQueue(t, js); got != "A" {
		t.Errorf("the stream names queue %q, want A", got)
	}
	if n := logs.count(slog.LevelInfo, adopted); n != 1 {
		t.Errorf("%d %q lines, want 1", n, adopted)
	}
	_, logs2 := openBus(t, Config{URL: url, Queue: "A", QueueAt: "ZooKeeper zk2:2181, root /a"}) // the same queue, another server list
	if n := logs2.count(slog.LevelInfo, adopted); n != 0 {
		t.Errorf("a second daemon of queue A logged %q", adopted)
	}

	ctx, cancel := context.WithTimeout(t.Context(), setupTry)
	defer cancel()
	_, err := Open(ctx, Config{URL: url, Queue: "B", QueueAt: "ZooKeeper zk:2181, root /b", Logger: discardLogger()})
	if !errors.Is(err, ErrOtherQueue) {
		t.Fatalf("a daemon of queue B on queue A's NATS: %v, want a refusal (before %v)", err, setupTry)
	}
	for _, want := range []string{DefaultStream, url, "root /a", "root /b", "NATS account"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not name %q: %v", want, err)
		}
	}
	a.Publish(mixedEvents(1)[0])
	flush(t, a)
	if s := a.Stats(); s.Published != 1 {
		t.Errorf("queue A's bus after the refusal: %+v, want its event recorded", s)
	}
	if got := streamQueue(t, js); got != "A" {
		t.Errorf("after the refusal the stream names queue %q, want A", got)
	}
	// Readers: queue A's replay reads, queue B's is refused.
	nc := connect(t, url)
	if got := replay(t, nc, Filter{Queue: "A"}); len(got) != 1 {
		t.Errorf("queue A's replay: %d events, want 1", len(got))
	}
	err = Replay(t.Context(), nc, "", Filter{Queue: "B"}, func(Event) error { return nil })
	if !errors.Is(err, ErrOtherQueue) || !strings.Contains(err.Error(), "root /a") {
		t.Errorf("queue B's replay of queue A's stream: %v, want a refusal naming queue A", err)
	}
}

// An embedded server's stream that names another queue is its data folder
// reused for a new queue (decision 370): it is taken over, with a line in
// the log that tells the two queues apart (their places read the same), not
// refused. A replay of the new queue leaves out the old queue's events,
// even those of the last minute (the clock skew a replay's Since allows).
func TestEmbeddedStreamOfAnotherQueueIsTakenOver(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	old, _ := openBus(t, Config{DataDir: dir, Queue: "A", QueueAt: "ZooKeeper zk:2181, root /"})
	old.Publish(Event{Kind: KindBatch, BatchID: "bid0000000000", To: "Failed", Message: "queue A's"})
	flush(t, old)
	_ = old.Close()
	bus, logs := openBus(t, Config{DataDir: dir, Queue: "B", QueueAt: "ZooKeeper zk:2181, root /"})
	bus.Publish(Event{Kind: KindBatch, BatchID: "bid0000000000", To: "Pending", Message: "queue B's"})
	flush(t, bus)
	for _, f := range []Filter{{Queue: "B"}, {Queue: "B", Since: time.Now().Add(-time.Minute)}, {Queue: "B", BatchID: "bid0000000000"}} {
		if got := replay(t, bus.Conn(), f); len(got) != 1 || got[0].Message != "queue B's" {
			t.Errorf("replay %+v: %+v, want queue B's event only", f, got)
		}
	}
	if got := replay(t, bus.Conn(), Filter{}); len(got) != 2 {
		t.Errorf("replay of the whole stream: %d events, want both queues'", len(got))
	}
	js, err := jetstream.New(bus.Conn())
	if err != nil {
		t.Fatal(err)
	}
	if got := streamQueue(t, js); got != "B" {
		t.Errorf("the stream names queue %q, want B", got)
	}
	const took = "events: the data folder's stream recorded another queue's events; it records this queue's from now on (replays leave the older events out)"
	if n := logs.count(slog.LevelInfo, took); n != 1 {
		t.Errorf("%d %q lines, want 1", n, took)
	}
	said := logs.attrs(took)
	if !strings.Contains(said["was"], "made in A") || !strings.Contains(said["now"], "made in B") {
		t.Errorf("%q says was=%q now=%q: want each queue's identity", took, said["was"], said["now"])
	}
}

// A data folder taken over while its server ran alone, then clustered:
// what it recorded alone moves into the cluster's stream without the old
// queue's events, which the alone stream's first sequence of the new
// queue (metaQueueFrom) left out of its replays; the cluster's stream is
// a new one, with no such sequence.
func TestTakenOverStoreMovesOnlyItsQueuesEventsIntoTheCluster(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	queue := func(id string) func(*Config) {
		return func(c *Config) { c.DataDir, c.Queue, c.QueueAt = dir, id, "ZooKeeper zk:2181, root /" }
	}
	old := openMemberWith(t, "a", queue("A"))
	publishN(t, old, "bid-of-A", 2)
	_ = old.Close()
	a := openMemberWith(t, "a", queue("B"))
	publishN(t, a, "bid-of-B", 1)
	if got := replay(t, connect(t, a.ClientURL()), Filter{Queue: "B"}); len(got) != 1 {
		t.Fatalf("alone, replay of B: %d events, want B's one", len(got))
	}
	b := openMemberWith(t, "b", func(c *Config) { c.Queue, c.QueueAt = "B", "ZooKeeper zk:2181, root /" }, a)
	a.SetRoutes([]string{b.route})
	flush(t, a.Bus) // after the join and the move of what a recorded alone
	for _, e := range replay(t, connect(t, b.ClientURL()), Filter{Queue: "B"}) {
		if e.BatchID != "bid-of-B" {
			t.Errorf("clustered, replay of B has queue A's event %+v", e)
		}
	}
	wantSeen(t, b, map[string]int{"a": 1})
}

// Two daemons that open their buses at the same instant on a NATS with no
// stream yet. Two queues': exactly one creates the stream, naming its
// queue; the other is refused at once, as when the stream was there before,
// and the stream goes on naming the winner. One queue's, listing their
// ZooKeeper servers apart: both run. Many rounds, for the race.
func TestDaemonsCreatingTheStreamAtOnce(t *testing.T) {
	t.Parallel()
	url, js := startStreamServer(t)
	// atOnce opens a bus of each queue at the same instant and closes
	// those that opened.
	atOnce := func(queues, at []string) []error {
		start := make(chan struct{})
		buses, errs := make([]*Bus, len(queues)), make([]error, len(queues))
		var wg sync.WaitGroup
		for i := range queues {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
				defer cancel()
				<-start
				buses[i], errs[i] = Open(ctx, Config{URL: url, Queue: queues[i], QueueAt: at[i], Logger: discardLogger()})
			})
		}
		close(start)
		wg.Wait()
		for _, b := range buses {
			if b != nil {
				_ = b.Close()
			}
		}
		return errs
	}
	queues, at := []string{"A", "B"}, []string{"ZooKeeper zk:2181, root /a", "ZooKeeper zk:2181, root /b"}
	for round := range 30 {
		errs := atOnce(queues, at)
		won := slices.IndexFunc(errs, func(err error) bool { return err == nil })
		if won < 0 || errs[1-won] == nil {
			t.Fatalf("round %d: two queues creating the stream at once: %v; want one refused", round, errs)
		}
		refusal := errs[1-won].Error()
		for _, want := range []string{"it records the events of another queue", DefaultStream, url, at[won], at[1-won], "NATS account"} {
			if !errors.Is(errs[1-won], ErrOtherQueue) || !strings.Contains(refusal, want) {
				t.Fatalf("round %d: the refusal of queue %s: %v; want it to say %q", round, queues[1-won], refusal, want)
			}
		}
		if got := streamQueue(t, js); got != queues[won] {
			t.Fatalf("round %d: queue %s's daemon runs, the stream names queue %q", round, queues[won], got)
		}
		if err := js.DeleteStream(t.Context(), DefaultStream); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 10 {
		if errs := atOnce([]string{"A", "A"}, []string{"ZooKeeper zk1:2181, root /a", "ZooKeeper zk2:2181, root /a"}); errs[0] != nil || errs[1] != nil {
			t.Fatalf("round %d: two daemons of one queue creating the stream at once: %v; want both to run", round, errs)
		}
		if err := js.DeleteStream(t.Context(), DefaultStream); err != nil {
			t.Fatal(err)
		}
	}
}
