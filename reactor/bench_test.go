package reactor_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"golang.org/x/sync/errgroup"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// Run: go test -run '^$' -bench . -benchtime 200x ./reactor/   (PERFORMANCE.md)

// benv is a benchmark's queue and daemons (one unless newDaemons is
// asked for more), each on its own ZooKeeper session and bus, whose
// Estimating handlers can be watched.
type benv struct {
	b       *testing.B
	root    string
	q       *queue.Queue
	buses   []*events.Bus // one per daemon; bus is the first's
	bus     *events.Bus
	started sync.Map // jid → time its Estimating handler started

	lastBatch string // the batch processingJob made last

	daemons  []*reactor.Reactor
	daemonQs []*queue.Queue // the daemons': their requests are counted
}

// requests are the daemons' ZooKeeper requests so far: their queues'
// reads and writes, and their watchers' listings.
func (e *benv) requests() (reads, writes, listings uint64) {
	for i, q := range e.daemonQs {
		r, w := q.Requests()
		reads, writes, listings = reads+r, writes+w, listings+e.daemons[i].WatcherStats().Listings
	}
	return reads, writes, listings
}

// reportRequests reports the daemons' ZooKeeper requests per job since
// reads0, writes0 and listings0.
func (e *benv) reportRequests(jobs int, reads0, writes0, listings0 uint64) {
	reads, writes, listings := e.requests()
	e.b.ReportMetric(float64(reads-reads0)/float64(jobs), "reads/job")
	e.b.ReportMetric(float64(listings-listings0)/float64(jobs), "listings/job")
	e.b.ReportMetric(float64(writes-writes0)/float64(jobs), "writes/job")
}

func newBenv(b *testing.B, opts ...func(*reactor.Config)) *benv { return newDaemons(b, 1, opts...) }

// newDaemons starts n pass-through daemons on one queue. Each has its own
// session and its own bus (host bench-N), as daemons on separate hosts do.
// opts change each daemon's configuration.
func newDaemons(b *testing.B, n int, opts ...func(*reactor.Config)) *benv {
	quiet := slog.New(slog.DiscardHandler)
	e := &benv{b: b, root: zktest.Root(b)}
	dial := func() *zkwatch.Session {
		s, err := zkwatch.Dial(context.Background(), zkwatch.Config{Servers: []string{zktest.Shared(b).Addr}, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(s.Close)
		return s
	}
	mkq := func(s *zkwatch.Session) *queue.Queue {
		q, err := queue.New(s.Conn, e.root, queue.WithLogger(quiet))
		if err != nil {
			b.Fatal(err)
		}
		if err := q.Init(b.Context()); err != nil {
			b.Fatal(err)
		}
		return q
	}
	e.q = mkq(dial())
	for i := range n {
		host := fmt.Sprintf("bench-%d", i+1)
		bus, err := events.Open(context.Background(), events.Config{DataDir: b.TempDir(), Host: host, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = bus.Close() })
		e.buses = append(e.buses, bus)
		s := dial()
		pt := reactor.PassThrough{}
		hs := pt.Handlers()
		next := hs[queue.Estimating]
		hs[queue.Estimating] = reactor.JobHandlerFunc(func(ctx context.Context, s *reactor.Step) (reactor.Result, error) {
			e.started.LoadOrStore(s.Job.ID, time.Now())
			return next.Handle(ctx, s)
		})
		q := mkq(s)
		cfg := reactor.Config{Queue: q, Session: s, Bus: bus, Host: host, Jobs: hs, Batches: pt, Reporter: pt, Logger: quiet}
		for _, o := range opts {
			o(&cfg)
		}
		r, err := reactor.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		e.daemons, e.daemonQs = append(e.daemons, r), append(e.daemonQs, q)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = r.Run(ctx); close(done) }()
		b.Cleanup(func() { cancel(); <-done })
	}
	e.bus = e.buses[0]
	return e
}

// createJob adds a job to a batch the daemon may be moving meanwhile:
// CreateJob is fenced by the batch's version, so a stale view reads again.
func (e *benv) createJob(bid string, spec queue.JobSpec) (*queue.Job, error) {
	for {
		bt, err := e.q.LoadBatch(e.b.Context(), bid)
		if err != nil {
			return nil, err
		}
		j, err := e.q.CreateJob(e.b.Context(), bt, spec)
		if !errors.Is(err, queue.ErrStale) {
			return j, err
		}
	}
}

// sub follows subject on every daemon's bus.
func (e *benv) sub(subject string) chan events.Event {
	ch := make(chan events.Event, 100000)
	for _, bus := range e.buses {
		unsub, err := bus.Subscribe(subject, func(ev events.Event) { ch <- ev })
		if err != nil {
			e.b.Fatal(err)
		}
		e.b.Cleanup(unsub)
	}
	return ch
}

// percentiles reports the p50, p99 and worst of ds. Its p99 means something
// from a few hundred samples on: of 100 it is the second worst, one stall
// of the machine or of ZooKeeper's JVM (a young collection pauses the
// harness's server 2-7 ms every 0.3-2 s under these loads) from the p100.
func percentiles(b *testing.B, name string, ds []time.Duration) {
	slices.Sort(ds)
	if len(ds) == 0 {
		return
	}
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds()), name+"-p50-µs")
	b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds()), name+"-p99-µs")
	b.ReportMetric(float64(ds[len(ds)-1].Microseconds()), name+"-max-µs")
}

// BenchmarkDispatch: from a job's ref appearing in the estimating folder (its
// Pending → Estimating commit, stamped by the event) to the Estimating
// handler starting, one job at a time; beside it, a bare child watch firing
// on a create in another session. The daemon's own move keeps the job's
// lock for its waiting Estimating worker (decision 211), so "reactor"
// measures that hand-over; "foreign" measures a move by another program:
// from before its commit (as raw-watch counts from before the create)
// through the folder's watch, the acquisition, to the handler, and from
// the commit's reply (after-commit), when the ref is surely there. There
// the daemon works the job states past Pending and takes every payload, as
// an ingest daemon beside Merritt's own intake does.
func BenchmarkDispatch(b *testing.B) {
	b.Run("raw-watch", func(b *testing.B) {
		conn, other, root := zktest.Connect(b), zktest.Connect(b), zktest.Root(b)
		if _, err := conn.Create(root, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			b.Fatal(err)
		}
		var lat []time.Duration
		for i := range b.N {
			_, _, ch, err := conn.ChildrenW(root)
			if err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			if _, err := other.Create(fmt.Sprintf("%s/n%d", root, i), nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				b.Fatal(err)
			}
			<-ch
			lat = append(lat, time.Since(t0))
		}
		percentiles(b, "latency", lat)
	})
	b.Run("reactor", func(b *testing.B) {
		e := newBenv(b)
		est, done := e.sub("ingestq.job.estimating.*"), e.sub("ingestq.job.>")
		bt, err := e.q.CreateBatch(b.Context(), queue.SubmissionOf(map[string]any{"payload_url": "passthrough:0"}))
		if err != nil {
			b.Fatal(err)
		}
		var lat []time.Duration
		b.ResetTimer()
		for range b.N {
			// A pass-through job, as its batch handler would make it: the daemon
			// leaves any other payload alone.
			j, err := e.createJob(bt.ID, queue.JobSpec{Priority: 5, Config: queue.JobConfig{PayloadURL: "passthrough:1"}})
			if err != nil {
				b.Fatal(err)
			}
			ev := <-est
			for ev.JobID != j.ID {
				ev = <-est
			}
			lat = append(lat, e.startedAt(j.ID).Sub(ev.Time))
			e.awaitCompleted(done, j.ID) // an idle queue for the next job
		}
		b.StopTimer()
		percentiles(b, "latency", lat)
	})
	b.Run("foreign", func(b *testing.B) {
		e := newBenv(b, func(c *reactor.Config) {
			c.Roles, c.Batches = nil, nil
			for _, s := range reactor.JobStates[1:] { // not Pending: a job made waits there until this session moves it
				c.Roles = append(c.Roles, reactor.JobRole(s))
			}
		})
		done := e.sub("ingestq.job.>")
		bt, err := e.q.CreateBatch(b.Context(), queue.SubmissionOf(map[string]any{"payload_url": "foreign:0"}))
		if err != nil {
			b.Fatal(err)
		}
		var lat, after []time.Duration // from before the foreign commit; from its reply
		b.ResetTimer()
		for range b.N {
			j, err := e.createJob(bt.ID, queue.JobSpec{Priority: 5, Config: queue.JobConfig{PayloadURL: "passthrough:1"}})
			if err != nil {
				b.Fatal(err)
			}
			if j, err = e.q.LockJob(b.Context(), j.ID); err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			if err := e.q.SetJobStatus(b.Context(), j, queue.Estimating, queue.JobChange{Release: true}); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			started := e.startedAt(j.ID)
			lat, after = append(lat, started.Sub(t0)), append(after, started.Sub(t1))
			e.awaitCompleted(done, j.ID)
		}
		b.StopTimer()
		percentiles(b, "latency", lat)
		percentiles(b, "after-commit", after)
	})
}

// BenchmarkBatchCompletion: from the commit of a batch's last job to the
// batch's move to Reporting (the report pool's acquisition: lock and
// status in one multi(); the time is its event's, stamped when that multi
// returns), one batch at a time, with 1,000 other batches in Processing
// whose jobs are unfinished (Held), so that the daemon watches 1,000
// batch-processing folders. "notify": the last commit is the daemon's own
// Notify step (timed from its Completed event, stamped when the commit
// returned); "foreign": another session moves the job Notify → Completed
// straight through reactor/queue (timed from when that commit returned).
// Baseline in the same run, "raw-watch": a bare ChildrenW on a
// batch-processing folder firing for a delete by another session, timed
// from before the delete. -short: 20 other batches.
func BenchmarkBatchCompletion(b *testing.B) {
	fillers := 1000
	if testing.Short() {
		fillers = 20
	}
	b.Run("raw-watch", func(b *testing.B) {
		conn, other, root := zktest.Connect(b), zktest.Connect(b), zktest.Root(b)
		acl := zk.WorldACL(zk.PermAll)
		if _, err := conn.Create(root, nil, 0, acl); err != nil {
			b.Fatal(err)
		}
		var lat []time.Duration
		for i := range b.N {
			dir := fmt.Sprintf("%s/bid%010d", root, i)
			for _, p := range []string{dir, dir + "/states", dir + "/states/batch-processing", dir + "/states/batch-processing/jid0000000001"} {
				if _, err := conn.Create(p, nil, 0, acl); err != nil {
					b.Fatal(err)
				}
			}
			_, _, ch, err := conn.ChildrenW(dir + "/states/batch-processing")
			if err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			if err := other.Delete(dir+"/states/batch-processing/jid0000000001", -1); err != nil {
				b.Fatal(err)
			}
			<-ch
			lat = append(lat, time.Since(t0))
		}
		percentiles(b, "latency", lat)
	})
	for _, variant := range []string{"notify", "foreign"} {
		b.Run(variant, func(b *testing.B) {
			e := newBenv(b)
			e.fillBatches(fillers)
			completed, reporting, ended := e.sub("ingestq.job.completed.*"), e.sub("ingestq.batch.reporting.*"), e.sub("ingestq.batch.completed.*")
			var lat []time.Duration
			b.ResetTimer()
			for range b.N {
				var last time.Time
				if variant == "notify" {
					j := e.processingJob("passthrough:1")
					ev := <-completed
					for ev.JobID != j.ID {
						ev = <-completed
					}
					last = ev.Time
				} else {
					j := e.processingJob("foreign:1")
					for _, s := range reactor.JobStates[1:] {
						j = e.foreignMove(j, s)
					}
					e.foreignMove(j, queue.Completed)
					last = time.Now()
				}
				bid := e.lastBatch
				ev := <-reporting
				for ev.BatchID != bid {
					ev = <-reporting
				}
				lat = append(lat, ev.Time.Sub(last))
				for ev = <-ended; ev.BatchID != bid; ev = <-ended { // an idle queue for the next batch
				}
			}
			b.StopTimer()
			percentiles(b, "commit-to-reporting", lat)
		})
	}
}

// fillBatches makes n batches in Processing, each with one Held job whose
// payload the daemon does not take: they stay in the queue, unfinished.
func (e *benv) fillBatches(n int) {
	var g errgroup.Group
	g.SetLimit(16)
	for range n {
		g.Go(func() error {
			bt := e.processingBatch()
			j, err := e.q.CreateJob(e.b.Context(), bt, queue.JobSpec{Priority: 5, Config: queue.JobConfig{PayloadURL: "foreign:1"}})
			if err != nil {
				return err
			}
			_, err = e.q.HoldJob(e.b.Context(), j.ID)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		e.b.Fatal(err)
	}
}

// processingBatch makes a batch of one job, as another program would: the
// batch in Processing with its job count, then its job. Its payload is
// not one the daemon takes, so only the daemon's reporter acts on it.
func (e *benv) processingBatch() *queue.Batch {
	ctx := e.b.Context()
	bt, err := e.q.CreateBatch(ctx, queue.SubmissionOf(map[string]any{"payload_url": "foreign:1"}))
	if err != nil {
		e.b.Fatal(err)
	}
	if bt, err = e.q.LockBatch(ctx, bt.ID); err != nil {
		e.b.Fatal(err)
	}
	one := 1
	if err := e.q.SetBatchStatus(ctx, bt, queue.Processing, queue.BatchChange{JobCount: &one, Release: true}); err != nil {
		e.b.Fatal(err)
	}
	return bt
}

// processingJob makes a batch in Processing with one Pending job of the
// given payload, and remembers the batch in lastBatch.
func (e *benv) processingJob(payload string) *queue.Job {
	bt := e.processingBatch()
	j, err := e.q.CreateJob(e.b.Context(), bt, queue.JobSpec{Priority: 5, Config: queue.JobConfig{PayloadURL: payload}})
	if err != nil {
		e.b.Fatal(err)
	}
	e.lastBatch = bt.ID
	return j
}

// foreignMove moves a job the daemon leaves alone to state to, as another
// program would: lock, then one multi that moves it and releases the lock.
func (e *benv) foreignMove(j *queue.Job, to queue.State) *queue.Job {
	j, err := e.q.LockJob(e.b.Context(), j.ID)
	if err != nil {
		e.b.Fatal(err)
	}
	if err := e.q.SetJobStatus(e.b.Context(), j, to, queue.JobChange{Release: true}); err != nil {
		e.b.Fatal(err)
	}
	return j
}

// startedAt is when job jid's Estimating handler started.
func (e *benv) startedAt(jid string) time.Time {
	for {
		if t, ok := e.started.Load(jid); ok {
			return t.(time.Time)
		}
		time.Sleep(50 * time.Microsecond) // polling a map the handler fills; not synchronisation of the measured path
	}
}

// awaitCompleted reads events until job jid's end, which must be Completed.
func (e *benv) awaitCompleted(events chan events.Event, jid string) {
	for ev := range events {
		if ev.JobID != jid || (ev.To != string(queue.Completed) && ev.To != string(queue.Failed)) {
			continue
		}
		if ev.To != string(queue.Completed) {
			e.b.Fatalf("job %s ended %s: %s", jid, ev.To, ev.Message)
		}
		return
	}
}

// BenchmarkThroughput: whole job lifecycles per second with pass-through
// handlers, one 500-job batch at a time (50 with -short), with 1, 2 and 3
// daemons (in-process, each on its own ZooKeeper session and bus, 4
// workers per state), and the daemons' ZooKeeper requests per job. In each
// op, after the batch, the ceiling runs untimed on the same server: the
// writes of as many lifecycles as raw multi() calls (18 each: 2 to create,
// then per step one to acquire and one to move on) from 32 goroutines.
// pct-of-ceiling is the daemons' rate as a percentage of the ceiling's.
// ",foreign" runs the daemons as serve does by default (RecordForeign:
// the done folders watched, listed and diffed too), beside the same count
// without.
func BenchmarkThroughput(b *testing.B) {
	perBatch := 500
	if testing.Short() {
		perBatch = 50
	}
	for _, n := range []int{1, 2, 3} {
		for _, foreign := range []bool{false, true} {
			name := fmt.Sprintf("daemons=%d", n)
			if foreign {
				name += ",foreign"
			}
			b.Run(name, func(b *testing.B) { throughput(b, n, perBatch, foreign) })
		}
	}
}

// throughput runs BenchmarkThroughput's measure with n daemons.
func throughput(b *testing.B, n, perBatch int, foreign bool) {
	e := newDaemons(b, n, func(c *reactor.Config) { c.RecordForeign = foreign })
	done := e.sub("ingestq.batch.completed.*")
	reads0, writes0, listings0 := e.requests()
	var ceiling time.Duration
	b.ResetTimer()
	for range b.N {
		bt, err := e.q.CreateBatch(b.Context(), queue.SubmissionOf(map[string]any{"payload_url": fmt.Sprintf("passthrough:%d", perBatch)}))
		if err != nil {
			b.Fatal(err)
		}
		for ev := range done {
			if ev.BatchID == bt.ID {
				break
			}
		}
		b.StopTimer()
		ceiling += rawCeiling(b, perBatch)
		b.StartTimer()
	}
	b.StopTimer()
	rate, raw := float64(b.N*perBatch)/b.Elapsed().Seconds(), float64(b.N*perBatch)/ceiling.Seconds()
	b.ReportMetric(rate, "jobs/s")
	b.ReportMetric(raw, "ceiling-jobs/s")
	b.ReportMetric(100*rate/raw, "pct-of-ceiling")
	e.reportRequests(b.N*perBatch, reads0, writes0, listings0)
}

// rawCeiling commits the writes of jobs lifecycles as raw multi() calls
// (setData at the version, delete a ref, create a ref), 18 per job, from 32
// goroutines on one session, and returns how long that took.
func rawCeiling(b *testing.B, jobs int) time.Duration {
	conn, root := zktest.Connect(b), zktest.Root(b)
	acl := zk.WorldACL(zk.PermAll)
	for _, p := range []string{root, root + "/a", root + "/b"} {
		if _, err := conn.Create(p, nil, 0, acl); err != nil {
			b.Fatal(err)
		}
	}
	for w := range 32 {
		for _, p := range []string{fmt.Sprintf("%s/s%d", root, w), fmt.Sprintf("%s/a/r%d", root, w)} {
			if _, err := conn.Create(p, nil, 0, acl); err != nil {
				b.Fatal(err)
			}
		}
	}
	var next atomic.Int64
	total := int64(jobs * 18)
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := range 32 {
		wg.Go(func() {
			status, ref, version, side := fmt.Sprintf("%s/s%d", root, w), fmt.Sprintf("r%d", w), int32(0), "a"
			for next.Add(1) <= total {
				other := map[string]string{"a": "b", "b": "a"}[side]
				_, err := conn.Multi(&zk.SetDataRequest{Path: status, Data: []byte("x"), Version: version},
					&zk.DeleteRequest{Path: root + "/" + side + "/" + ref, Version: -1},
					&zk.CreateRequest{Path: root + "/" + other + "/" + ref, Acl: acl})
				if err != nil {
					b.Error(err)
					return
				}
				version, side = version+1, other
			}
		})
	}
	wg.Wait()
	return time.Since(t0)
}
