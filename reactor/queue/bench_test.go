package queue_test

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/reactor/queue"
)

// Run: go test -run '^$' -bench . -benchtime 3s ./reactor/queue/
// (PERFORMANCE.md has the numbers.)

// BenchmarkTransition compares one ingestq job transition (a fenced multi:
// set status, delete the old ref, create the new one) with a raw multi() of
// the same three requests, serially and from 32 goroutines on one session.
func BenchmarkTransition(b *testing.B) {
	for _, par := range []int{1, 32} {
		b.Run(fmt.Sprintf("raw-multi/goroutines=%d", par), func(b *testing.B) {
			r := benchRun(b)
			var next atomic.Int32
			runPar(b, par, func() func() {
				id := next.Add(1)
				status := r.q.Path(fmt.Sprintf("/raw%d", id))
				_, err := r.conn.Create(status, []byte(`{"status":"Pending"}`), 0, zk.WorldACL(zk.PermAll))
				r.ok(err)
				refs := [2]string{r.q.Path(fmt.Sprintf("/jobs/states/pending/05-raw%d", id)), r.q.Path(fmt.Sprintf("/jobs/states/held/05-raw%d", id))}
				_, err = r.conn.Create(refs[0], nil, 0, zk.WorldACL(zk.PermAll))
				r.ok(err)
				version, side := int32(0), 0
				return func() {
					_, err := r.conn.Multi(
						&zk.SetDataRequest{Path: status, Data: []byte(`{"status":"Held"}`), Version: version},
						&zk.DeleteRequest{Path: refs[side], Version: -1},
						&zk.CreateRequest{Path: refs[1-side], Acl: zk.WorldACL(zk.PermAll)})
					if err != nil {
						b.Error(err)
					}
					version, side = version+1, 1-side
				}
			})
		})
		b.Run(fmt.Sprintf("ingestq/goroutines=%d", par), func(b *testing.B) {
			r := benchRun(b)
			bt := r.processing(true)
			runPar(b, par, func() func() {
				j, err := r.q.CreateJob(b.Context(), bt, queue.JobSpec{Priority: 5})
				r.ok(err)
				return func() {
					to := queue.Held
					if j.State() == queue.Held {
						to = queue.Pending
					}
					if err := r.q.SetJobStatus(b.Context(), j, to, queue.JobChange{}); err != nil {
						b.Error(err)
					}
				}
			})
		})
	}
}

// BenchmarkLifecycle is a job's whole life in the pattern a daemon uses:
// create, then for each of the 8 steps acquire (lock, re-read, fence), move
// on and unlock in one multi(). FIELD-NOTES: mrt-zk manages 7.2/s this way.
func BenchmarkLifecycle(b *testing.B) {
	r := benchRun(b)
	bt := r.processing(true)
	b.ResetTimer()
	for range b.N {
		j, err := r.q.CreateJob(b.Context(), bt, queue.JobSpec{Priority: 5})
		r.ok(err)
		for _, s := range pipelineStates {
			got, err := r.q.AcquireJob(b.Context(), s)
			if err != nil || got == nil || got.ID != j.ID {
				b.Fatalf("acquire %s: %v %v", s, got, err)
			}
			r.ok(r.q.SetJobStatus(b.Context(), got, successOf(s), queue.JobChange{Release: true}))
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// benchRun is a fresh queue whose log is dropped: a benchmark's log would
// be noise, and debug lines cost time.
func benchRun(b *testing.B) *run {
	r := newRun(b)
	q, err := queue.New(r.conn, r.root, queue.WithLogger(slog.New(slog.DiscardHandler)))
	r.ok(err)
	r.q = q
	return r
}

// runPar runs b.N iterations over par workers, each made by setup (outside
// the timer) and run by the iterations it takes.
func runPar(b *testing.B, par int, setup func() func()) {
	workers := make([]func(), par)
	for i := range workers {
		workers[i] = setup()
	}
	var next atomic.Int64
	done := make(chan struct{})
	b.ResetTimer()
	for _, w := range workers {
		go func() {
			for next.Add(1) <= int64(b.N) {
				w()
			}
			done <- struct{}{}
		}()
	}
	for range workers {
		<-done
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "transitions/s")
}
