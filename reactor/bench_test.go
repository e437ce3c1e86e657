package reactor_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// Run: go test -run '^$' -bench . -benchtime 200x ./reactor/   (PERFORMANCE.md)

// benv is a benchmark's queue, bus and one daemon whose Estimating
// handler can be watched.
type benv struct {
	b       *testing.B
	root    string
	q       *queue.Queue
	bus     *events.Bus
	started sync.Map // jid → time its Estimating handler started
}

func newBenv(b *testing.B) *benv {
	quiet := slog.New(slog.DiscardHandler)
	bus, err := events.Open(context.Background(), events.Config{DataDir: b.TempDir(), Host: "bench", Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = bus.Close() })
	e := &benv{b: b, root: zktest.Root(b), bus: bus}
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
	s := dial()
	pt := reactor.PassThrough{}
	hs := pt.Handlers()
	next := hs[queue.Estimating]
	hs[queue.Estimating] = reactor.JobHandlerFunc(func(ctx context.Context, s *reactor.Step) (reactor.Result, error) {
		e.started.LoadOrStore(s.Job.ID, time.Now())
		return next.Handle(ctx, s)
	})
	r, err := reactor.New(reactor.Config{Queue: mkq(s), Session: s, Bus: bus, Jobs: hs, Batches: pt, Reporter: pt, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	b.Cleanup(func() { cancel(); <-done })
	return e
}

func (e *benv) sub(subject string) chan events.Event {
	ch := make(chan events.Event, 100000)
	unsub, err := e.bus.Subscribe(subject, func(ev events.Event) { ch <- ev })
	if err != nil {
		e.b.Fatal(err)
	}
	e.b.Cleanup(unsub)
	return ch
}

func percentiles(b *testing.B, name string, ds []time.Duration) {
	slices.Sort(ds)
	if len(ds) == 0 {
		return
	}
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds()), name+"-p50-µs")
	b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds()), name+"-p99-µs")
}

// BenchmarkDispatch: from a job's ref appearing in the estimating folder (its
// Pending → Estimating commit, stamped by the event) to the Estimating
// handler starting, one job at a time; beside it, a bare child watch firing
// on a create in another session.
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
		est := e.sub("ingestq.job.estimating.*")
		bt, err := e.q.CreateBatch(b.Context(), queue.SubmissionOf(map[string]any{"payload_url": "passthrough:0"}))
		if err != nil {
			b.Fatal(err)
		}
		var lat []time.Duration
		b.ResetTimer()
		for range b.N {
			j, err := e.q.CreateJob(b.Context(), bt, queue.JobSpec{Priority: 5})
			if err != nil {
				b.Fatal(err)
			}
			ev := <-est
			for ev.JobID != j.ID {
				ev = <-est
			}
			for {
				if t, ok := e.started.Load(j.ID); ok {
					lat = append(lat, t.(time.Time).Sub(ev.Time))
					break
				}
				time.Sleep(50 * time.Microsecond) // polling a map the handler fills; not synchronisation of the measured path
			}
		}
		b.StopTimer()
		percentiles(b, "latency", lat)
	})
}

// BenchmarkBatchCompletion: from the commit of a batch's last job (its
// Completed event) to the batch entering Reporting, over batches of 10 jobs.
func BenchmarkBatchCompletion(b *testing.B) {
	e := newBenv(b)
	jobs, batches := e.sub("ingestq.job.completed.*"), e.sub("ingestq.batch.reporting.*")
	var lat []time.Duration
	for range b.N {
		bt, err := e.q.CreateBatch(b.Context(), queue.SubmissionOf(map[string]any{"payload_url": "passthrough:10"}))
		if err != nil {
			b.Fatal(err)
		}
		var last time.Time
		for n := 0; n < 10; {
			ev := <-jobs
			if ev.BatchID == bt.ID {
				n++
				if ev.Time.After(last) {
					last = ev.Time
				}
			}
		}
		ev := <-batches
		for ev.BatchID != bt.ID {
			ev = <-batches
		}
		lat = append(lat, ev.Time.Sub(last))
	}
	percentiles(b, "last-job-to-reporting", lat)
}

// BenchmarkThroughput: whole job lifecycles per second with pass-through
// handlers (one daemon, 4 workers per state), beside the ceiling that raw
// multi() calls give: a lifecycle is 18 writes (2 to create, then per step
// one to acquire and one to move on), run from 32 goroutines.
func BenchmarkThroughput(b *testing.B) {
	const perBatch = 500
	b.Run("reactor", func(b *testing.B) {
		e := newBenv(b)
		done := e.sub("ingestq.batch.completed.*")
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
		}
		b.ReportMetric(float64(b.N*perBatch)/b.Elapsed().Seconds(), "jobs/s")
	})
	b.Run("raw-multi-ceiling", func(b *testing.B) {
		conn, root := zktest.Connect(b), zktest.Root(b)
		acl := zk.WorldACL(zk.PermAll)
		for _, p := range []string{root, root + "/a", root + "/b"} {
			if _, err := conn.Create(p, nil, 0, acl); err != nil {
				b.Fatal(err)
			}
		}
		var next atomic.Int64
		total := int64(b.N * perBatch * 18)
		var wg sync.WaitGroup
		b.ResetTimer()
		for w := range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				status := fmt.Sprintf("%s/s%d", root, w)
				if _, err := conn.Create(status, nil, 0, acl); err != nil {
					b.Error(err)
					return
				}
				ref, version, side := fmt.Sprintf("r%d", w), int32(0), "a"
				if _, err := conn.Create(root+"/a/"+ref, nil, 0, acl); err != nil {
					b.Error(err)
					return
				}
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
			}()
		}
		wg.Wait()
		b.ReportMetric(float64(b.N*perBatch)/b.Elapsed().Seconds(), "jobs/s")
	})
}
