package reactor_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// A job whose step waits and says so in its status (queue.Deferral: a
// depositor's busy server asked for a while) is taken by no daemon before
// then, and first by the daemon that waits. Before, a Result.Wait deferred
// it on its own daemon only: the two others each took it within
// milliseconds, each asking the busy server again.
func TestADeferredJobWaitsOnEveryDaemon(t *testing.T) {
	e := newEnv(t)
	const wait = 1500 * time.Millisecond
	type run struct {
		host string
		at   time.Time
	}
	var (
		mu    sync.Mutex
		runs  []run
		until time.Time
	)
	download := func(host string) map[queue.State]reactor.JobHandler {
		return map[queue.State]reactor.JobHandler{queue.Downloading: reactor.JobHandlerFunc(func(ctx context.Context, s *reactor.Step) (reactor.Result, error) {
			mu.Lock()
			defer mu.Unlock()
			runs = append(runs, run{host, time.Now()})
			if len(runs) > 1 {
				return reactor.Result{}, nil
			}
			until = time.Now().Add(wait)
			if err := s.Checkpoint(ctx, "why it waits", queue.JobChange{Message: "waiting for a busy server",
				Deferred: &queue.Deferral{Until: until, Host: host}}); err != nil {
				return reactor.Result{}, err
			}
			return reactor.Result{Wait: wait}, nil
		})}
	}
	for i := range 3 {
		host := fmt.Sprintf("host-%d", i)
		e.run(host, download(host))
	}
	batches := e.outside("ingestq.batch.>")
	b := e.submit(map[string]any{"payload_url": "passthrough:1"})
	if rep := e.waitBatch(batches, b.ID); rep.To != "Completed" {
		t.Fatalf("batch %s, want Completed", rep.To)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(runs) != 2 {
		t.Fatalf("the step ran %d times (%v); want twice: the wait, then once after it", len(runs), runs)
	}
	if again := runs[1]; again.at.Before(until) || again.host != runs[0].host {
		t.Errorf("the step ran again on %s %v after the first run on %s; want on %s, no sooner than %v",
			again.host, again.at.Sub(runs[0].at).Round(time.Millisecond), runs[0].host, runs[0].host, wait)
	}
}
