package events

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

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

// On a joined NATS the stream records which queue's events it holds: one
// made before streams named their queue is adopted (and says so), the same
// queue's daemons share it, and another queue's is refused at once in
// words that name the stream, the NATS and what to do.
func TestStreamOfAnotherQueueIsRefused(t *testing.T) {
	t.Parallel()
	srv := startServer(t, server.RANDOM_PORT, t.TempDir())
	url := srv.ClientURL()
	js, err := jetstream.New(connect(t, url))
	if err != nil {
		t.Fatal(err)
	}
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
	_, err = Open(ctx, Config{URL: url, Queue: "B", QueueAt: "ZooKeeper zk:2181, root /b", Logger: discardLogger()})
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
// the log, not refused.
func TestEmbeddedStreamOfAnotherQueueIsTakenOver(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	old, _ := openBus(t, Config{DataDir: dir, Queue: "A", QueueAt: "ZooKeeper zk:2181, root /"})
	_ = old.Close()
	bus, logs := openBus(t, Config{DataDir: dir, Queue: "B", QueueAt: "ZooKeeper zk:2181, root /"})
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
}
