package reactor_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// A job whose own back end is out (a profile's inventory, say) waits for
// that back end's next try, its attempts unspent; it holds back neither
// the other jobs of its state nor itself: while it waits (a minute here),
// 20 jobs of another batch go through Recording, and it is not tried again.
func TestJobWaitingForItsBackEndHoldsNoOtherBack(t *testing.T) {
	e := newEnv(t)
	batches := e.outside("ingestq.batch.>")
	var deadTries atomic.Int32
	waited := make(chan string, 1)
	e.run("host-a", map[queue.State]reactor.JobHandler{
		queue.Recording: reactor.JobHandlerFunc(func(_ context.Context, s *reactor.Step) (reactor.Result, error) {
			if s.Job.Config.Profile != "gone" {
				return reactor.Result{}, nil
			}
			if deadTries.Add(1) == 1 {
				waited <- s.Job.ID
			}
			return reactor.Result{}, reactor.Unavailable("the inventory of profile gone",
				fmt.Errorf("dial tcp 127.0.0.1:5432: %w", syscall.ECONNREFUSED))
		}),
	}, func(c *reactor.Config) { c.Backoff, c.Attempts = time.Minute, 1 })
	e.submit(map[string]any{"payload_url": "passthrough:1", "profile_name": "gone"})
	jid := await(t, waited, "the dead back end's first try")

	b := e.submit(map[string]any{"payload_url": "passthrough:20", "profile_name": "demo"})
	if rep := e.waitBatch(batches, b.ID); rep.To != "Completed" {
		t.Fatalf("the other batch ended %s: %s", rep.To, rep.Message)
	}
	if n := deadTries.Load(); n != 1 {
		t.Fatalf("the job waiting for its back end was tried %d times within its minute's wait, want once", n)
	}
	j, err := e.q.LoadJob(t.Context(), jid)
	if err != nil {
		t.Fatal(err)
	}
	if j.State() != queue.Recording || j.Locked {
		t.Fatalf("the waiting job is %s, locked %v; want Recording, unlocked (1 attempt, not spent)", j.State(), j.Locked)
	}
}
