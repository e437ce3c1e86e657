package reactor_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// laterBatches is the pass-through batch handler, but for a batch whose
// submission says "busy": its handler asks, every time, to be tried again
// in a minute (reactor.Later), as a busy payload server's does.
type laterBatches struct{ reactor.PassThrough }

func (l laterBatches) Objects(ctx context.Context, b *queue.Batch) ([]reactor.Object, error) {
	if _, busy := b.Submission.Extra["busy"]; busy {
		return nil, reactor.Later(time.Now().Add(time.Minute), "waiting for a busy server")
	}
	return l.PassThrough.Objects(ctx, b)
}

// zkRequests are the requests in a queue's debug log (each request's
// paths), from line mark on, and how many of them read a node of one of
// bids.
func zkRequests(log *logtest.Buffer, mark int, root string, bids []string) (reads, requests int) {
	lines := log.Lines("zookeeper request")[mark:]
	for _, l := range lines {
		for _, bid := range bids {
			reads += strings.Count(l, root+"/batches/"+bid+"/")
		}
	}
	return reads, len(lines)
}

// Batches whose handler asked to be tried later are passed over, unread,
// by the daemon that deferred them until their time: a daemon with many
// of them (a busy depositor's server behind 100 batches) makes each other
// batch at the cost of that batch alone. Before, every acquisition of a
// Pending batch read each deferred one (7 nodes) and passed it over after
// reading it: 100 deferred batches cost 700 reads a batch made, and each
// deferral's timer started such a scan.
func TestDeferredBatchesAreNotReadWhilePassedOver(t *testing.T) {
	const busy, others = 100, 5
	e := newEnv(t)
	batches := e.outside("ingestq.batch.>")
	var zkLog logtest.Buffer // the daemon's requests to ZooKeeper
	e.run("host-a", nil, func(c *reactor.Config) {
		q, err := queue.New(c.Session.Conn, e.root, queue.WithLogger(slog.New(slog.NewTextHandler(&zkLog, &slog.HandlerOptions{Level: slog.LevelDebug}))))
		if err != nil {
			t.Fatal(err)
		}
		c.Queue, c.Batches, c.BatchWorkers = q, laterBatches{}, 1
	})
	var deferred []string
	for range busy {
		deferred = append(deferred, e.submit(map[string]any{"payload_url": "passthrough:1", "busy": true}).ID)
	}
	// One batch worker takes the batches in order: once a batch submitted
	// after them has completed, every busy one was tried and deferred.
	if rep := e.waitBatch(batches, e.submit(map[string]any{"payload_url": "passthrough:1"}).ID); rep.To != "Completed" {
		t.Fatalf("batch %s: %s", rep.To, rep.Message)
	}
	for _, bid := range deferred[:3] {
		b, err := e.q.LoadBatch(t.Context(), bid)
		if err != nil {
			t.Fatal(err)
		}
		if b.State() != queue.Pending || b.Locked || b.Status.Deferred == nil {
			t.Fatalf("busy batch %s is %s, locked %v, deferred %v: want Pending, unlocked, deferred", bid, b.State(), b.Locked, b.Status.Deferred)
		}
	}
	mark := len(zkLog.Lines("zookeeper request"))
	for range others {
		if rep := e.waitBatch(batches, e.submit(map[string]any{"payload_url": "passthrough:1"}).ID); rep.To != "Completed" {
			t.Fatalf("batch %s: %s", rep.To, rep.Message)
		}
	}
	n, total := zkRequests(&zkLog, mark, e.root, deferred)
	if n > 0 {
		t.Errorf("making %d other batches read the %d deferred batches' nodes %d times (in %d requests); want none before their time",
			others, busy, n, total)
	}
	t.Logf("%d requests for %d batches", total, others)
}
