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

// A job that waited here for a back end every job of its state needs, and
// that another host then took and finished, leaves no job of this daemon
// waiting for it: the daemon no longer finds the back end out (the gauge of
// ingestq_backend_out clears), though none of its steps got an answer from
// it. It stayed out here until the daemon's restart.
func TestBackEndOutEndsWhenItsWaitingJobEndsOnAnotherHost(t *testing.T) {
	e := newEnv(t)
	batches := e.outside("ingestq.batch.>")
	obs := backEndNews{news: make(chan backEndNew, 10)}
	e.run("host-a", map[queue.State]reactor.JobHandler{
		queue.Recording: reactor.JobHandlerFunc(func(context.Context, *reactor.Step) (reactor.Result, error) {
			return reactor.Result{}, reactor.UnavailableToAll("the inventory", fmt.Errorf("dial tcp 127.0.0.1:5432: %w", syscall.ECONNREFUSED))
		}),
	}, func(c *reactor.Config) { c.Backoff, c.Observer = time.Minute, obs })
	b := e.submit(map[string]any{"payload_url": "passthrough:1", "profile_name": "demo"})
	if n := await(t, obs.news, "host-a finding the inventory out"); n != (backEndNew{"the inventory", true}) {
		t.Fatalf("host-a's first news of a back end: %+v; want the inventory out", n)
	}
	e.daemon("host-b") // reaches the inventory
	if rep := e.waitBatch(batches, b.ID); rep.To != "Completed" {
		t.Fatalf("the batch ended %s: %s", rep.To, rep.Message)
	}
	if n := await(t, obs.news, "host-a no longer finding the inventory out"); n != (backEndNew{"the inventory", false}) {
		t.Fatalf("host-a's next news of a back end: %+v; want the inventory back", n)
	}
}

// A step that names a back end (Step.Doing) and succeeds got an answer from
// it: a job waiting for that back end here is tried again at once, not at
// the back end's next try (a minute here).
func TestStepAnsweredByABackEndEndsItsOutage(t *testing.T) {
	e := newEnv(t)
	batches := e.outside("ingestq.batch.>")
	obs := backEndNews{news: make(chan backEndNew, 10), back: new(atomic.Bool)}
	const inventory = "the inventory of profile p"
	var tries atomic.Int32 // of the job that found the inventory out
	waited := make(chan string, 1)
	retried := make(chan bool, 1) // whether the inventory was found back before
	e.run("host-a", map[queue.State]reactor.JobHandler{
		queue.Recording: reactor.JobHandlerFunc(func(_ context.Context, s *reactor.Step) (reactor.Result, error) {
			s.Doing(inventory)
			if s.Job.Config.PayloadURL != "passthrough:1" {
				return reactor.Result{}, nil
			}
			if tries.Add(1) > 1 {
				retried <- obs.back.Load()
				return reactor.Result{}, nil
			}
			waited <- s.Job.ID
			return reactor.Result{}, reactor.Unavailable(inventory, fmt.Errorf("dial tcp 127.0.0.1:5432: %w", syscall.ECONNREFUSED))
		}),
	}, func(c *reactor.Config) { c.Backoff, c.Observer = time.Minute, obs })
	first := e.submit(map[string]any{"payload_url": "passthrough:1", "profile_name": "p"})
	await(t, waited, "the first job finding the inventory out")
	if n := await(t, obs.news, "the inventory found out"); n != (backEndNew{inventory, true}) {
		t.Fatalf("first news of a back end: %+v; want %s out", n, inventory)
	}
	e.submit(map[string]any{"payload_url": "passthrough:2", "profile_name": "p"})
	if n := await(t, obs.news, "the inventory back"); n != (backEndNew{inventory, false}) {
		t.Fatalf("next news of a back end: %+v; want %s back", n, inventory)
	}
	if !await(t, retried, "the waiting job tried again") {
		t.Fatal("the waiting job was tried again before the inventory was found back; want it tried because the other batch's steps found it back")
	}
	if rep := e.waitBatch(batches, first.ID); rep.To != "Completed" {
		t.Fatalf("the waiting job's batch ended %s: %s", rep.To, rep.Message)
	}
}

// backEndNew is what a daemon tells its observer of a back end.
type backEndNew struct {
	what string
	out  bool
}

// backEndNews is an observer that passes on what the daemon tells of back
// ends.
type backEndNews struct {
	reactor.Observer
	news chan backEndNew
	back *atomic.Bool // told a back end is back; nil: not kept
}

func (o backEndNews) BackEnd(what string, out bool) {
	if o.back != nil && !out {
		o.back.Store(true)
	}
	o.news <- backEndNew{what, out}
}

func (backEndNews) StepRan(queue.State, reactor.StepResult, time.Duration) {}
func (backEndNews) Moved(string, queue.State, string)                      {}
func (backEndNews) Transferred(reactor.Transfer, int64)                    {}
