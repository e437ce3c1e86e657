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

// A move whose commit ZooKeeper has not answered when the shutdown's grace
// period ends may have landed: it is reported as of unknown outcome, not as
// a commit that failed and left the job in its state. Whatever the server
// did, the next daemon finishes the batch.
func TestCommitCutOffAtShutdownIsUnknown(t *testing.T) {
	e := newEnv(t)
	batches := e.outside("ingestq.batch.>")
	proxy, err := zktest.StartProxy(zktest.Shared(t).Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	s, err := zkwatch.Dial(t.Context(), zkwatch.Config{Servers: []string{proxy.Addr()}, SessionTimeout: zktest.SessionTimeout, Logger: e.log})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	obs := moves{outcomes: make(chan string, 4)}
	started, proceed := make(chan string, 1), make(chan struct{})
	pt := reactor.PassThrough{}
	jobs := pt.Handlers()
	jobs[queue.Downloading] = reactor.JobHandlerFunc(func(context.Context, *reactor.Step) (reactor.Result, error) {
		started <- "downloading"
		<-proceed
		return reactor.Result{}, nil
	})
	r, err := reactor.New(reactor.Config{Queue: e.queue(s), Session: s, Bus: e.bus, Host: "host-a", Observer: obs,
		Jobs: jobs, Batches: pt, Reporter: pt, Grace: 300 * time.Millisecond, Logger: e.log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()

	b := e.submit(map[string]any{"payload_url": "passthrough:1"})
	select {
	case <-started:
	case <-time.After(time.Minute):
		t.Fatal("the step never started")
	}
	proxy.Pause() // ZooKeeper goes silent: the step's commit gets no answer
	stop()
	close(proceed)
	select {
	case got := <-obs.outcomes:
		if got != reactor.Unknown {
			t.Fatalf("the cut-off commit's outcome: %q, want %q", got, reactor.Unknown)
		}
	case <-time.After(time.Minute):
		t.Fatal("the step's commit was never given up")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	proxy.Resume()
	s.Close() // its lock goes, if the commit left one

	e.daemon("host-b")
	if rep := e.waitBatch(batches, b.ID); rep.To != "Completed" {
		t.Fatalf("batch ended %s: %s", rep.To, rep.Message)
	}
	e.clean()
}
