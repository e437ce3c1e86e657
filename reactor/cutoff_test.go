package reactor_test

import (
	"context"
	"testing"
	"time"

	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// moves is an Observer that reports each job commit's outcome.
type moves struct {
	reactor.Observer
	outcomes chan string
}

func (moves) StepRan(queue.State, reactor.StepResult, time.Duration) {}
func (moves) Transferred(reactor.Transfer, int64)                    {}
func (o moves) Moved(kind string, from queue.State, outcome string) {
	if kind == "job" && from == queue.Downloading {
		o.outcomes <- outcome
	}
}

// proxiedSession is a daemon's session that reaches the shared ZooKeeper
// through a proxy, for a test to pause; both end with the test.
func (e *env) proxiedSession() (*zktest.Proxy, *zkwatch.Session) {
	proxy := zktest.ProxyToShared(e.t)
	s, err := zkwatch.Dial(e.t.Context(), zkwatch.Config{Servers: []string{proxy.Addr()}, SessionTimeout: zktest.SessionTimeout, Logger: e.log})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(s.Close)
	return proxy, s
}

// heldStep is a step that says it started on started and ends, successful,
// when proceed is closed, even after the daemon began to stop.
func heldStep(started chan<- string, proceed <-chan struct{}) reactor.JobHandler {
	return reactor.JobHandlerFunc(func(_ context.Context, s *reactor.Step) (reactor.Result, error) {
		started <- string(s.Job.State())
		<-proceed
		return reactor.Result{}, nil
	})
}

// A move whose commit ZooKeeper has not answered when the shutdown's grace
// period ends may have landed: it is reported as of unknown outcome, not as
// a commit that failed and left the job in its state. Whatever the server
// did, the next daemon finishes the batch.
func TestCommitCutOffAtShutdownIsUnknown(t *testing.T) {
	e := newEnv(t)
	batches := e.outside("ingestq.batch.>")
	proxy, s := e.proxiedSession()

	obs := moves{outcomes: make(chan string, 4)}
	started, proceed := make(chan string, 1), make(chan struct{})
	stop := e.run("host-a", map[queue.State]reactor.JobHandler{
		queue.Downloading: heldStep(started, proceed),
	}, func(c *reactor.Config) {
		c.Session, c.Queue, c.Observer, c.Grace = s, e.queue(s), obs, 300*time.Millisecond
	})

	b := e.submit(map[string]any{"payload_url": "passthrough:1"})
	await(t, started, "the step's start")
	proxy.Pause() // ZooKeeper goes silent: the step's commit gets no answer
	go stop()
	close(proceed)
	if got := await(t, obs.outcomes, "the cut-off commit's outcome"); got != reactor.Unknown {
		t.Fatalf("the cut-off commit's outcome: %q, want %q", got, reactor.Unknown)
	}
	stop() // waits for the first to end
	proxy.Resume()
	s.Close() // its lock goes, if the commit left one

	e.daemon("host-b")
	if rep := e.waitBatch(batches, b.ID); rep.To != "Completed" {
		t.Fatalf("batch ended %s: %s", rep.To, rep.Message)
	}
	e.clean()
}
