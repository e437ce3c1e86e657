package queue_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/reactor/queue"
)

// A batch the daemon cannot read is said once, not on every look (a walk
// beside Merritt counted 14 lines a batch in 2 minutes); again when what
// is wrong with it changes, and once each 10 minutes it stays so.
func TestUnreadableBatchSaidOnce(t *testing.T) {
	r := newRun(t)
	ctx := context.Background()
	var log logtest.Buffer
	var ahead atomic.Int64
	start := time.Now().Truncate(time.Hour) // the looks fall in one period, whenever the test runs
	q, err := queue.New(r.conn, r.root, queue.WithLogger(slog.New(slog.NewTextHandler(&log, nil))),
		queue.WithClock(func() time.Time { return start.Add(time.Duration(ahead.Load())) }))
	r.ok(err)
	b := r.batch()
	said := func(when string, want int) {
		t.Helper()
		for range 3 {
			if _, _, err := q.AcquirePendingBatch(ctx, nil); err != nil {
				t.Fatal(err)
			}
		}
		if got := log.Lines("skipping unreadable batch", b.ID); len(got) != want {
			t.Fatalf("%s: %d lines, want %d:\n%s", when, len(got), want, log.String())
		}
	}
	r.raw("/batches/"+b.ID+"/status", `{"status": "Pending", `)
	said("three looks", 1)
	r.raw("/batches/"+b.ID+"/status", `{"status": "Sleeping"}`)
	said("what is wrong changed", 2)
	ahead.Store(int64(11 * time.Minute))
	said("11 minutes on", 3)
}
