package reactor_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// run starts a reactor with pass-through handlers but for jobs' (nil: none
// replaced) until the test ends, and returns its stop, which waits for Run
// to return.
func (e *env) run(host string, jobs map[queue.State]reactor.JobHandler, opts ...func(*reactor.Config)) (stop func()) {
	s := e.session()
	pt := reactor.PassThrough{}
	hs := pt.Handlers()
	for st, h := range jobs {
		hs[st] = h
	}
	cfg := reactor.Config{Queue: e.queue(s), Session: s, Bus: e.bus, Host: host,
		Jobs: hs, Batches: pt, Reporter: pt, Backoff: 10 * time.Millisecond, Grace: 5 * time.Second, Logger: e.log}
	for _, o := range opts {
		o(&cfg)
	}
	r, err := reactor.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	stop = sync.OnceFunc(func() { // a second call waits for the first
		cancel()
		if err := <-done; err != nil {
			e.t.Error(err)
		}
	})
	e.t.Cleanup(stop)
	return stop
}

// await waits for a value from ch, for at most a minute.
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("%s: not within a minute", what)
		panic("unreachable")
	}
}

// A long step (a download of hours) whose job an operator fails under it
// is stopped at once: its context is cancelled, where it ran to its end
// for nothing. The job stays as the operator left it, unlocked.
func TestLongStepStopsWhenItsJobChangesUnderIt(t *testing.T) {
	e := newEnv(t)
	obs := stepRuns{result: reactor.StepAbandoned, ran: make(chan stepRun, 1)}
	started, ended := make(chan string, 1), make(chan error, 1)
	e.run("host-a", map[queue.State]reactor.JobHandler{
		queue.Downloading: reactor.JobHandlerFunc(func(ctx context.Context, s *reactor.Step) (reactor.Result, error) {
			started <- s.Job.ID
			<-ctx.Done() // the download goes on until told to stop
			ended <- context.Cause(ctx)
			return reactor.Result{}, ctx.Err()
		}),
	}, func(c *reactor.Config) { c.Observer = obs })
	e.submit(map[string]any{"payload_url": "passthrough:1"})
	jid := await(t, started, "the step's start")
	if err := e.q.FailJob(t.Context(), jid, "stopped by the operator", true); err != nil {
		t.Fatal(err)
	}
	if cause := await(t, ended, "the step's end after its job was failed"); cause == nil || !strings.Contains(cause.Error(), "changed under its step") {
		t.Fatalf("the step's context ended by %v, want its job's change", cause)
	}
	if s := await(t, obs.ran, "the step's abandonment").state; s != queue.Downloading {
		t.Fatalf("abandoned in %s, want Downloading", s)
	}
	// The worker lets go of its lock right after it says so.
	fired, gone, err := e.q.WatchOnce(t.Context(), e.q.JobLockWait(t.Context(), jid))
	if err != nil {
		t.Fatal(err)
	}
	if !gone {
		await(t, fired, "the abandoned step's lock to go")
	}
	j, err := e.q.LoadJob(t.Context(), jid)
	if err != nil {
		t.Fatal(err)
	}
	if j.State() != queue.Failed || j.Locked || j.Status.Message != "stopped by the operator" {
		t.Fatalf("job %s, locked %v, message %q: want Failed, unlocked, the operator's message", j.State(), j.Locked, j.Status.Message)
	}
}

// A daemon that stops while a step waits to be tried again leaves the job
// in its state, unlocked, with its attempts unspent, for whoever takes it
// next: the grace period is for steps running, not for more attempts,
// which would fail the job on a host that is going away.
func TestStopLeavesARetryingJobForTheNextAttempt(t *testing.T) {
	e := newEnv(t)
	var calls atomic.Int32
	failing, stopping := make(chan string, 1), make(chan struct{})
	logs, log := e.logged()
	stop := e.run("host-a", map[queue.State]reactor.JobHandler{
		queue.Downloading: reactor.JobHandlerFunc(func(ctx context.Context, s *reactor.Step) (reactor.Result, error) {
			if calls.Add(1) == 1 {
				// Fails once the daemon is stopping: the wait for the next
				// attempt (200 ms) then begins after the stop, however late
				// a loaded machine runs the test (a stop called after the
				// first attempt had returned came after a second, at times).
				failing <- s.Job.ID
				select {
				case <-stopping:
				case <-ctx.Done():
				}
			}
			return reactor.Result{}, errors.New("the depositor's server is down")
		}),
	}, func(c *reactor.Config) {
		c.Backoff, c.Attempts = 200*time.Millisecond, 3
		c.Logger = log
	})
	e.submit(map[string]any{"payload_url": "passthrough:1"})
	jid := await(t, failing, "the step's first attempt")
	go stop()
	logs.WaitFor(t, "reactor: stopping; running steps may finish")
	close(stopping)
	stop() // waits for the first call's end
	if n := calls.Load(); n != 1 {
		t.Fatalf("the step ran %d times; after the stop, no attempt more", n)
	}
	j, err := e.q.LoadJob(t.Context(), jid)
	if err != nil {
		t.Fatal(err)
	}
	if j.State() != queue.Downloading || j.Locked {
		t.Fatalf("job %s, locked %v; want Downloading, unlocked, for its next attempt", j.State(), j.Locked)
	}
}

// A long step's guard leaves no watch on its job once the job has ended:
// the watch its final move fires is not set again on a status nothing will
// change (one ZooKeeper watch left a job, found by a soak of a daemon).
func TestLongStepsLeaveNoWatchOnTheirEndedJobs(t *testing.T) {
	e := newEnv(t)
	addr := zktest.Shared(t).Addr
	status := func(jid string) string { return e.q.Path("/jobs/" + jid + "/status") }
	watched := func(jid string) bool {
		w, err := zktest.Watched(addr, status(jid))
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	batches := e.outside("ingestq.batch.>")
	stop := e.run("host-a", map[queue.State]reactor.JobHandler{
		queue.Notify: reactor.JobHandlerFunc(func(ctx context.Context, s *reactor.Step) (reactor.Result, error) {
			for !watched(s.Job.ID) { // a long step: its guard watches its job
				select {
				case <-ctx.Done():
					return reactor.Result{}, ctx.Err()
				case <-time.After(20 * time.Millisecond): // bounded poll: the watch has no event of its own
				}
			}
			return reactor.Result{}, nil
		}),
	})
	b := e.submit(map[string]any{"payload_url": "passthrough:3"})
	if rep := e.waitBatch(batches, b.ID); rep.To != "Completed" {
		t.Fatalf("batch ended %s, want Completed", rep.To)
	}
	stop()
	jids, err := e.q.JobIDs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, jid := range jids {
		if watched(jid) {
			t.Errorf("job %s Completed, its status still watched after its daemon stopped", jid)
		}
	}
}
