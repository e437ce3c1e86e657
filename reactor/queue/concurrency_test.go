package queue_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingestq/ingestq/reactor/queue"
)

// pipelineStates are the states a job is acquired in, in order.
var pipelineStates = []queue.State{queue.Pending, queue.Estimating, queue.Provisioning,
	queue.Downloading, queue.Processing, queue.Storing, queue.Recording, queue.Notify}

func successOf(s queue.State) queue.State {
	if s == queue.Pending {
		return queue.Estimating
	}
	next, _ := queue.JobMachine.Success(s)
	return next
}

// Eight sessions race to acquire and advance 300 jobs through the whole
// pipeline while a checker samples the invariant.
func TestConcurrentPipeline(t *testing.T) {
	const sessions, jobs = 8, 300
	r := newRun(t)
	b := r.processing(true)
	for i := range jobs {
		_, err := r.q.CreateJob(t.Context(), b, queue.JobSpec{Priority: i % 7, Config: queue.JobConfigOf(map[string]any{"n": i})})
		r.ok(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var (
		mu        sync.Mutex
		committed = map[string]int{} // "jid from" → commits
		completed atomic.Int32
		stale     atomic.Int32
	)
	var wg sync.WaitGroup
	for w := range sessions {
		_, q := r.second()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for completed.Load() < jobs && ctx.Err() == nil {
				// Each session starts its sweep at a different state, so they
				// collide on folders as well as on jobs.
				for k := range pipelineStates {
					s := pipelineStates[(k+w)%len(pipelineStates)]
					j, err := q.AcquireJob(ctx, s)
					if err != nil {
						t.Errorf("acquire %s: %v", s, err)
						return
					}
					if j == nil {
						continue
					}
					err = q.SetJobStatus(ctx, j, successOf(s), queue.JobChange{Release: true})
					if errors.Is(err, queue.ErrStale) {
						stale.Add(1)
						continue
					}
					if err != nil {
						t.Errorf("%s %s → %s: %v", j.ID, s, successOf(s), err)
						return
					}
					mu.Lock()
					committed[j.ID+" "+string(s)]++
					mu.Unlock()
					if s == queue.Notify {
						completed.Add(1)
					}
				}
			}
		}()
	}

	samples := 0
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for sampling := true; sampling; {
		select {
		case <-done:
			sampling = false
		default:
		}
		vs, err := r.q.Check(ctx)
		r.ok(err)
		if len(vs) > 0 {
			cancel()
			t.Fatalf("invariant broken at sample %d: %v", samples, vs)
		}
		samples++
	}
	if ctx.Err() != nil {
		t.Fatalf("timed out with %d of %d jobs completed", completed.Load(), jobs)
	}

	if completed.Load() != jobs {
		t.Fatalf("%d jobs completed, want %d", completed.Load(), jobs)
	}
	ids, err := r.q.JobIDs(ctx)
	r.ok(err)
	for _, jid := range ids {
		for _, s := range pipelineStates {
			if n := committed[jid+" "+string(s)]; n != 1 {
				t.Errorf("%s: step %s committed %d times, want once", jid, s, n)
			}
		}
	}
	done2, _, err := r.q.Refs(ctx, queue.Completed)
	r.ok(err)
	buckets, err := r.q.BatchJobs(ctx, b.ID)
	r.ok(err)
	if len(done2) != jobs || len(buckets["batch-completed"]) != jobs || len(buckets["batch-processing"]) != 0 {
		t.Fatalf("completed refs %d, batch-completed %d, batch-processing %d; want %d, %d, 0",
			len(done2), len(buckets["batch-completed"]), len(buckets["batch-processing"]), jobs, jobs)
	}
	if rb, _, err := r.q.AcquireCompletedBatch(context.Background(), nil, nil); err != nil || rb == nil || rb.ID != b.ID {
		t.Fatalf("batch not ready to report: %v %v", rb, err)
	}
	t.Logf("%d sessions, %d jobs: %d invariant samples, %d stale commits abandoned", sessions, jobs, samples, stale.Load())
}
