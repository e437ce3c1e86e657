package reactor_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

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
	obs := stepRuns{state: queue.Storing, ran: make(chan stepRun, 8)}
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
	if got := await(t, obs.ran, "the step's end with ZooKeeper gone").result; got != reactor.StepWait {
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

// queueReader is a Reporter and an AccessHandler whose every call reads
// the queue through q, as the real ones may (a profile, an object's lock);
// its first call waits for proceed.
type queueReader struct {
	q        *queue.Queue
	started  chan struct{}
	proceed  chan struct{}
	waitOnce sync.Once
}

func (h *queueReader) read(read func() error) error {
	h.waitOnce.Do(func() { h.started <- struct{}{}; <-h.proceed })
	return read()
}

func (h *queueReader) Report(ctx context.Context, b *queue.Batch, _ reactor.Report) error {
	return h.read(func() error { _, err := h.q.LoadBatch(ctx, b.ID); return err })
}

func (h *queueReader) Assemble(ctx context.Context, a *queue.Access) (map[string]any, error) {
	if err := h.read(func() error { _, err := h.q.LoadAccess(ctx, a.Queue, a.ID); return err }); err != nil {
		return nil, err
	}
	return readyToken(a)
}

func (*queueReader) Sweep(context.Context) ([]*queue.Access, error) { return nil, nil }

// A batch's report and an access request's assembly that find ZooKeeper
// out of reach spend no attempt either: they wait for the session and run
// again. Before, their attempts (2 here, 10 ms apart) were spent while
// ZooKeeper was away: the batch ended with "report not delivered", the
// request Failed.
func TestReportAndAccessWaitForZooKeeper(t *testing.T) {
	for _, step := range []string{"reporter", "access assembly"} {
		t.Run(step, func(t *testing.T) {
			e := newEnv(t)
			ends := e.outside("ingestq.>")
			o := newOutage(e)
			h := &queueReader{q: o.q, started: make(chan struct{}, 1), proceed: make(chan struct{})}
			logs, log := e.logged()
			e.run("host-a", nil, func(c *reactor.Config) {
				c.Session, c.Queue, c.Attempts = o.s, o.q, 2
				c.Logger = log
				if step == "reporter" {
					c.Reporter = h
				} else {
					c.Access, c.AccessWorkers = h, map[string]int{queue.AccessSmall: 1, queue.AccessLarge: 0}
				}
			})
			up := sync.OnceFunc(o.up)
			t.Cleanup(up) // before the daemon stops: its moves wait for ZooKeeper

			var end func()
			if step == "reporter" {
				b := e.submit(map[string]any{"payload_url": "passthrough:1"})
				end = func() {
					if rep := e.waitBatch(ends, b.ID); rep.To != "Completed" || strings.Contains(rep.Message, "not delivered") {
						t.Fatalf("batch ended %s: %q, want Completed with its report delivered", rep.To, rep.Message)
					}
				}
			} else {
				a := e.accessRequest("ark:/1/outage")
				end = func() { e.waitAccess(ends, queue.Completed, a.Ref()) }
			}
			await(t, h.started, "the "+step+"'s start")
			o.down()
			close(h.proceed)
			logs.WaitFor(t, "ZooKeeper is out of reach", "step=", step)
			if spent := logs.Lines(step + " failed; retrying"); len(spent) > 0 {
				t.Fatalf("an attempt spent with ZooKeeper away: %s", spent[0])
			}
			up()
			end()
			if o.s.Expirations() != 0 {
				t.Fatalf("the session expired: the test is about an outage shorter than it")
			}
		})
	}
}
