package reactor_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// stepRuns is an Observer that sends each run of a step in state (any when
// "") that ended with result (any when "") on ran, unless it is full.
type stepRuns struct {
	reactor.Observer
	state  queue.State
	result reactor.StepResult
	ran    chan stepRun
}

type stepRun struct {
	state  queue.State
	result reactor.StepResult
}

func (o stepRuns) StepRan(s queue.State, r reactor.StepResult, _ time.Duration) {
	if (o.state == "" || s == o.state) && (o.result == "" || r == o.result) {
		select {
		case o.ran <- stepRun{s, r}:
		default:
		}
	}
}

func (stepRuns) Moved(string, queue.State, string)   {}
func (stepRuns) Transferred(reactor.Transfer, int64) {}

// A step whose job an operator fails (--force, the lock held) while it
// runs is not run again when it then fails with a retryable error, nor
// when its own checkpoint finds the change: the job is no longer the
// worker's. Its lock goes with it, so the Failed job can be requeued at once.
func TestStepAbandonedWhenItsJobChangesUnderIt(t *testing.T) {
	for _, tc := range []struct {
		name       string
		checkpoint bool // the handler writes to the job after the change, and returns that error
	}{{"retryable error", false}, {"checkpoint", true}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			obs := stepRuns{result: reactor.StepAbandoned, ran: make(chan stepRun, 1)}
			started, proceed := make(chan string, 1), make(chan struct{})
			var calls atomic.Int32
			e.daemon("host-a", func(c *reactor.Config) {
				c.Observer, c.Attempts = obs, 4
				c.Jobs[queue.Downloading] = reactor.JobHandlerFunc(func(ctx context.Context, s *reactor.Step) (reactor.Result, error) {
					if calls.Add(1) == 1 {
						started <- s.Job.ID
						<-proceed
					}
					if tc.checkpoint {
						return reactor.Result{}, s.Checkpoint(ctx, "progress", queue.JobChange{Message: "half way"})
					}
					return reactor.Result{}, errors.New("retryable trouble")
				})
			})
			e.submit(map[string]any{"payload_url": "passthrough:1"})
			var jid string
			select {
			case jid = <-started:
			case <-time.After(time.Minute):
				t.Fatal("the step never started")
			}
			if err := e.q.FailJob(t.Context(), jid, "stopped by the test", true); err != nil {
				close(proceed)
				t.Fatal(err)
			}
			close(proceed)
			select {
			case run := <-obs.ran:
				if run.state != queue.Downloading {
					t.Fatalf("abandoned in %s, want Downloading", run.state)
				}
			case <-time.After(time.Minute):
				t.Fatal("the step was not abandoned")
			}
			if n := calls.Load(); n != 1 {
				t.Fatalf("the handler ran %d times; after the job was failed under it, once", n)
			}
			j, err := e.q.LoadJob(t.Context(), jid)
			if err != nil {
				t.Fatal(err)
			}
			if j.State() != queue.Failed || j.Locked || j.Status.Message != "stopped by the test" {
				t.Fatalf("job %s, locked %v, message %q: want Failed, unlocked, the operator's message", j.State(), j.Locked, j.Status.Message)
			}
			if _, err := e.q.RequeueJob(t.Context(), jid, ""); err != nil {
				t.Fatalf("requeue of the abandoned job: %v", err)
			}
		})
	}
}
