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

// storingRuns is an Observer that reports each run of a Storing step.
type storingRuns struct {
	reactor.Observer
	results chan reactor.StepResult
}

func (o storingRuns) StepRan(s queue.State, r reactor.StepResult, _ time.Duration) {
	if s == queue.Storing {
		select {
		case o.results <- r:
		default:
		}
	}
}
func (storingRuns) Moved(string, queue.State, string)   {}
func (storingRuns) Transferred(reactor.Transfer, int64) {}

// outage is a daemon's ZooKeeper session through a proxy that can be
// closed (the address refuses, as while a server restarts) and opened
// again at the same address.
type outage struct {
	t     *testing.T
	proxy *zktest.Proxy
	addr  string
	s     *zkwatch.Session
	q     *queue.Queue
}

func newOutage(e *env) *outage {
	t := e.t
	proxy, err := zktest.StartProxy(zktest.Shared(t).Addr)
	if err != nil {
		t.Fatal(err)
	}
	o := &outage{t: t, proxy: proxy, addr: proxy.Addr()}
	t.Cleanup(func() { _ = o.proxy.Close() })
	o.s, err = zkwatch.Dial(t.Context(), zkwatch.Config{Servers: []string{o.addr}, SessionTimeout: zktest.SessionTimeout, Logger: e.log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.s.Close)
	o.q = e.queue(o.s)
	return o
}

func (o *outage) down() {
	if err := o.proxy.Close(); err != nil {
		o.t.Fatal(err)
	}
}

func (o *outage) up() {
	p, err := zktest.StartProxyOn(o.addr, zktest.Shared(o.t).Addr)
	if err != nil {
		o.t.Fatal(err)
	}
	o.proxy = p
}

// A step that finds ZooKeeper out of reach (its server restarted: here the
// daemon's only address refuses connections) spends no attempt: it waits
// for the session and runs again. The job was failed after its attempts
// (3 in 3 s by default), while ZooKeeper took longer to come back.
func TestStepWaitsForZooKeeper(t *testing.T) {
	e := newEnv(t)
	batches := e.outside("ingestq.batch.>")
	o := newOutage(e)
	obs := storingRuns{results: make(chan reactor.StepResult, 8)}
	started, proceed := make(chan string, 1), make(chan struct{})
	e.run("host-a", map[queue.State]reactor.JobHandler{
		queue.Storing: reactor.JobHandlerFunc(func(ctx context.Context, st *reactor.Step) (reactor.Result, error) {
			select {
			case started <- st.Job.ID:
				<-proceed
			default:
			}
			_, err := o.q.LoadJob(ctx, st.Job.ID) // a step's own read of the queue, as the storage lock's check
			return reactor.Result{}, err
		}),
	}, func(c *reactor.Config) { c.Session, c.Queue, c.Observer, c.Attempts = o.s, o.q, obs, 2 })

	b := e.submit(map[string]any{"payload_url": "passthrough:1"})
	jid := await(t, started, "the Storing step's start")
	o.down()
	close(proceed)
	if got := await(t, obs.results, "the step's end with ZooKeeper gone"); got != reactor.StepWait {
		t.Fatalf("the step that found ZooKeeper gone ended %q, want %q (no attempt spent)", got, reactor.StepWait)
	}
	o.up()
	if rep := e.waitBatch(batches, b.ID); rep.To != "Completed" {
		t.Fatalf("batch ended %s: %s (job %s)", rep.To, rep.Message, jid)
	}
	if o.s.Expirations() != 0 {
		t.Fatalf("the session expired: the test is about an outage shorter than it")
	}
}
