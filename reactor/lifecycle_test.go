package reactor_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// Run returns only once every goroutine it started has ended, and before
// its session is closed (which would end a ZooKeeper watch anyway): the
// timer of a step that asked to wait, the watch on a lock another session
// holds, the session's reconnect hook.
func TestRunEndsItsGoroutines(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()

	// A Pending job whose lock the operator's session holds: the daemon
	// watches that lock.
	e.submit(map[string]any{"profile_name": "demo", "payload_url": "passthrough:1"})
	taken, _, err := e.q.AcquirePendingBatch(ctx, nil)
	if err != nil || taken == nil {
		t.Fatalf("acquire the pending batch: %v %v", taken, err)
	}
	j, err := e.q.CreateJob(ctx, taken, queue.JobSpec{Priority: queue.DefaultPriority, Config: queue.JobConfig{
		Profile: "demo", PayloadURL: "passthrough:1", ObjectKey: "obj-000000"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.q.LockJob(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.q.SetBatchStatus(ctx, taken, queue.Processing, queue.BatchChange{Release: true}); err != nil {
		t.Fatal(err)
	}

	s := e.session()
	q := e.queue(s)
	// The bus starts its JetStream reply subscription at its first publish:
	// one before the count, so that it is the bus's, not the daemon's.
	e.bus.Publish(events.Event{Kind: events.KindBatch, BatchID: taken.ID, From: "Pending", To: "Processing"})
	if err := e.bus.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	before := goleak.IgnoreCurrent() // the sessions, the bus, the test's own
	waiting := make(chan string, 1)
	pt := reactor.PassThrough{}
	jobs := pt.Handlers()
	jobs[queue.Provisioning] = reactor.JobHandlerFunc(func(_ context.Context, s *reactor.Step) (reactor.Result, error) {
		waiting <- s.Job.ID
		return reactor.Result{Wait: time.Hour}, nil // a timer that outlives Run
	})
	r, err := reactor.New(reactor.Config{Queue: q, Session: s, Bus: e.bus, Host: "host-a",
		Jobs: jobs, Batches: pt, Reporter: pt, Grace: 5 * time.Second, Logger: e.log})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	t.Cleanup(stop)

	e.submit(map[string]any{"profile_name": "demo", "payload_url": "passthrough:1"})
	select {
	case <-waiting:
	case <-time.After(2 * time.Minute):
		t.Fatal("no job reached Provisioning")
	}
	lock := q.JobLockWait(t.Context(), j.ID).Path
	for deadline := time.Now().Add(time.Minute); ; {
		watched, err := zktest.Watched(zktest.Shared(t).Addr, lock)
		if err != nil {
			t.Fatal(err)
		}
		if watched {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon does not watch the lock %s", lock)
		}
		time.Sleep(20 * time.Millisecond) // bounded poll: the watch has no event of its own
	}

	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := goleak.Find(before); err != nil {
		t.Fatalf("goroutines left after Run returned: %v", err)
	}
}
