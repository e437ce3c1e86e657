package reactor_test

import (
	"context"
	"errors"
	"fmt"
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
)

// Tests of a queue shared with Merritt's own library (mrt-zk), whose
// writes are separate requests: the project's own client plays the
// foreign reader and writer.

// An outside reader (mrt-zk's reporter reads a batch's status, then its
// batch-processing folder) never finds batch-processing empty while the
// batch is still Pending, that is while its jobs are being made: the folder
// is made with the first job's ref, and that job waits for its batch to
// leave Pending.
func TestOutsideReaderNeverSeesAnEmptyPendingBucket(t *testing.T) {
	const batches, jobs = 100, 4
	e := newEnv(t)
	reports := e.outside("ingestq.batch.>")
	e.daemon("host-a")
	stop := e.samplePendingBuckets()

	var bids []string
	for i := range batches {
		b := e.submit(map[string]any{"profile_name": "demo", "payload_url": fmt.Sprintf("passthrough:%d", jobs), "n": i})
		bids = append(bids, b.ID)
	}
	for _, bid := range bids {
		if rep := e.waitBatch(reports, bid); rep.To != "Completed" {
			t.Fatalf("batch %s ended %s: %s", bid, rep.To, rep.Message)
		}
	}
	stop()
	e.clean()
}

// The jobs a batch handler makes start while it makes the others (decision
// 300): all but the first, which waits for the batch to leave Pending, so
// batch-processing is never empty meanwhile.
func TestJobsStartWhileTheirBatchIsMade(t *testing.T) {
	e := newEnv(t)
	all := e.outside("ingestq.>")
	e.daemon("host-a")
	stop := e.samplePendingBuckets()

	b := e.submit(map[string]any{"profile_name": "demo", "payload_url": "passthrough:40", "create_pace": "50ms"})
	var doneEarly int
	for ev := range all {
		if ev.BatchID != b.ID {
			continue
		}
		if ev.Kind == events.KindJob && ev.To == string(queue.Completed) {
			doneEarly++
		}
		if ev.Kind == events.KindBatch && ev.To == string(queue.Processing) {
			break
		}
	}
	if doneEarly == 0 {
		t.Fatal("no job of the batch completed while its handler was making the others")
	}
	// The handler reads the batch's jobs again before each ten (create_pace)
	// while the earlier ones move on: none is missed and made twice.
	if rep := e.waitBatch(all, b.ID); rep.To != "Completed" || rep.Attrs["successful_count"] != float64(40) {
		t.Fatalf("batch %s ended %s with %v successful (want 40): %s", b.ID, rep.To, rep.Attrs["successful_count"], rep.Message)
	}
	stop()
	t.Logf("%d of 40 jobs completed before their batch left Pending", doneEarly)
	e.clean()
}

// samplePendingBuckets reads, as mrt-zk's reporter does, every batch's
// batch-processing folder and status over and over, until the returned stop
// is called; stop fails the test if a Pending batch's folder was ever empty.
func (e *env) samplePendingBuckets() (stop func()) {
	t, conn := e.t, e.session().Conn
	var (
		halt       atomic.Bool
		wg         sync.WaitGroup
		violations []string
		seen       int // samples of a Pending batch whose folder held jobs
	)
	wg.Go(func() {
		for !halt.Load() {
			bids, _, err := conn.Children(e.q.Path("/batches"))
			if err != nil {
				continue
			}
			for _, bid := range bids {
				// The folder first, then the status: a batch never goes
				// back to Pending, so Pending now means Pending then.
				kids, _, err := conn.Children(e.q.Path("/batches/" + bid + "/states/batch-processing"))
				if err != nil {
					continue
				}
				st, err := e.q.BatchState(t.Context(), bid)
				if err != nil || st != queue.Pending {
					continue
				}
				if len(kids) == 0 {
					violations = append(violations, bid)
				} else {
					seen++
				}
			}
		}
	})
	return func() {
		halt.Store(true)
		wg.Wait()
		if len(violations) > 0 {
			t.Fatalf("an outside reader saw batch-processing empty while the batch was Pending %d times, in %v",
				len(violations), slices.Compact(violations))
		}
		t.Logf("%d samples of a Pending batch whose batch-processing held jobs, none empty", seen)
	}
}

// mrt-zk moves a job's batch ref by a delete and then a create, so on every
// step of a job it drives, batch-processing is empty for an instant. Such a
// moment never makes a report while the job is unfinished, whether the
// batch has a recorded job count (ingestq made its jobs) or not (a foreign
// batch handler did): the batch reports once, when the job is really done,
// and the report names it.
func TestForeignRefMovesNeverReportEarly(t *testing.T) {
	for _, counted := range []bool{true, false} {
		t.Run(fmt.Sprintf("job-count=%v", counted), func(t *testing.T) {
			const trials = 1000
			e := newEnv(t)
			batchEvents := e.outside("ingestq.batch.>")
			s := e.session()
			foreign := e.queue(s)

			b, j := e.foreignJob(foreign, counted)
			e.daemon("host-a")

			ref := e.q.Path("/batches/" + b.ID + "/states/batch-processing/" + j.ID)
			for i := range trials {
				if err := s.Conn.Delete(ref, -1); err != nil {
					t.Fatalf("trial %d: delete %s: %v", i, ref, err)
				}
				if _, err := s.Conn.Create(ref, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
					t.Fatalf("trial %d: create %s: %v", i, ref, err)
				}
			}
			st, err := e.q.BatchState(t.Context(), b.ID)
			if err != nil || st != queue.Processing {
				t.Fatalf("after %d foreign ref moves the batch is %s (%v), want Processing", trials, st, err)
			}

			e.mrtzkComplete(s, foreign, b.ID, j, nil)
			steps := untilReported(t, batchEvents, b.ID)
			e.reportNames(b.ID, j.ID)
			drain(batchEvents, b.ID, &steps)
			// The move to Processing was the foreign intake's: recovered
			// (no "from") before the report's (decision 222).
			if want := []string{"→Processing", "Processing→Reporting", "Reporting→Completed"}; !slices.Equal(steps, want) {
				t.Fatalf("batch events %v, want %v", steps, want)
			}
		})
	}
}

func mustDo(t *testing.T, f func() error) {
	t.Helper()
	if err := f(); err != nil {
		t.Fatal(err)
	}
}

// untilReported collects bid's transitions until it ends Completed or Failed.
func untilReported(t *testing.T, ch chan events.Event, bid string) []string {
	t.Helper()
	var steps []string
	deadline := time.After(2 * time.Minute)
	for {
		select {
		case ev := <-ch:
			if ev.BatchID != bid {
				continue
			}
			steps = append(steps, ev.From+"→"+ev.To)
			if ev.To == "Completed" || ev.To == "Failed" {
				return steps
			}
		case <-deadline:
			t.Fatalf("batch %s did not report; its transitions so far %v", bid, steps)
		}
	}
}

// drain appends the transitions of bid already received on ch.
func drain(ch chan events.Event, bid string, steps *[]string) {
	for {
		select {
		case ev := <-ch:
			if ev.BatchID == bid {
				*steps = append(*steps, ev.From+"→"+ev.To)
			}
		default:
			return
		}
	}
}

// A pass-through daemon on a queue with real work leaves that work alone:
// a real batch stays Pending and unacquired, and a real job (here one
// requeued by an operator) stays where it is, while pass-through batches
// go through.
func TestPassThroughLeavesRealWorkAlone(t *testing.T) {
	e := newEnv(t)
	reports := e.outside("ingestq.batch.>")
	real := e.submit(map[string]any{"profile_name": "demo", "payload_url": "https://example.org/real.checkm"})
	other := e.submit(map[string]any{"profile_name": "demo", "payload_url": "https://example.org/other.checkm"})
	taken, _, err := e.q.AcquirePendingBatch(context.Background(), func(b *queue.Batch) bool { return b.ID == other.ID })
	if err != nil || taken == nil {
		t.Fatalf("acquire %s: %v %v", other.ID, taken, err)
	}
	j, err := e.q.CreateJob(t.Context(), taken, queue.JobSpec{Priority: queue.DefaultPriority,
		Config: queue.JobConfigOf(map[string]any{"profile_name": "demo", "payload_url": "https://example.org/obj.zip"})})
	if err != nil {
		t.Fatal(err)
	}
	one := 1
	if err := e.q.SetBatchStatus(t.Context(), taken, queue.Processing, queue.BatchChange{JobCount: &one, Release: true}); err != nil {
		t.Fatal(err)
	}
	e.daemon("host-a")
	pt := e.submit(map[string]any{"profile_name": "demo", "payload_url": "passthrough:5"})
	if rep := e.waitBatch(reports, pt.ID); rep.To != "Completed" {
		t.Fatalf("the pass-through batch ended %s: %s", rep.To, rep.Message)
	}
	b, err := e.q.LoadBatch(t.Context(), real.ID)
	if err != nil || b.State() != queue.Pending || b.Acquired || b.Locked {
		t.Fatalf("the real batch: %+v (%v); want Pending, never acquired", b, err)
	}
	got, err := e.q.LoadJob(t.Context(), j.ID)
	if err != nil || got.State() != queue.Pending || got.Locked || got.Status.LastModified != j.Status.LastModified {
		t.Fatalf("the real job: %+v (%v); want untouched in Pending", got, err)
	}
}

// A job that another program moves on, one after another, is taken by the
// daemon from the folder's watch every time, never left for the safety
// rescan (here an hour, longer than the test may run): a worker of the
// state it left may still hold it, reading it, when the watch of the state
// it entered reports it, and that worker's end must wake the new state's
// pool. Before the fix, about one job in 150 waited for the rescan.
func TestForeignMovesNeedNoRescan(t *testing.T) {
	const jobs = 300
	e := newEnv(t)
	done := e.outside("ingestq.job.>")
	e.daemon("host-a", func(c *reactor.Config) { c.Rescan = time.Hour })
	// A batch the daemon leaves Pending (not its payload): each job made in
	// it waits in Pending, read and deferred by the daemon, until this
	// session moves it to Estimating.
	bt := e.submit(map[string]any{"profile_name": "demo", "payload_url": "foreign:0"})
	for range jobs {
		var j *queue.Job
		var err error
		for {
			b, lerr := e.q.LoadBatch(t.Context(), bt.ID)
			mustDo(t, func() error { return lerr })
			if j, err = e.q.CreateJob(t.Context(), b, queue.JobSpec{Priority: 5, Config: queue.JobConfig{PayloadURL: "passthrough:1"}}); !errors.Is(err, queue.ErrStale) {
				break
			}
		}
		mustDo(t, func() error { return err })
		for {
			if j, err = e.q.LockJob(t.Context(), j.ID); !errors.Is(err, queue.ErrLocked) {
				break
			}
		}
		mustDo(t, func() error { return err })
		mustDo(t, func() error {
			return e.q.SetJobStatus(t.Context(), j, queue.Estimating, queue.JobChange{Release: true})
		})
		waitEnd(t, done, j.ID)
	}
}

// waitEnd waits for job jid's Completed event; a minute without it is a
// job left for the rescan.
func waitEnd(t *testing.T, events chan events.Event, jid string) {
	t.Helper()
	for {
		select {
		case ev := <-events:
			if ev.JobID != jid || (ev.To != string(queue.Completed) && ev.To != string(queue.Failed)) {
				continue
			}
			if ev.To != string(queue.Completed) {
				t.Fatalf("job %s ended %s: %s", jid, ev.To, ev.Message)
			}
			return
		case <-time.After(time.Minute):
			t.Fatalf("job %s moved to Estimating by another program was not taken in a minute: left for the rescan", jid)
		}
	}
}

// A batch sent to Held by a collection hold and released by Merritt's admin
// tool as mrt-zk does it (the collection's lock deleted, then the batch's
// status rewritten Held → Pending: one write, no event, no folder change)
// is taken by the daemon without waiting for the safety rescan. Seen with
// mrt-zk f113b84's Batch.setStatus against a daemon: the batch waited for
// the next rescan, a minute.
func TestForeignBatchReleaseNeedsNoRescan(t *testing.T) {
	const frozen = "frozen"
	e := newEnv(t)
	batches := e.outside("ingestq.batch.>")
	probes := e.outside("ingestq.batch.>")
	e.daemon("host-a", func(c *reactor.Config) { c.Rescan = time.Hour })
	if _, err := e.q.HoldCollection(t.Context(), frozen); err != nil {
		t.Fatal(err)
	}
	awaitCollectionView(e, probes, frozen, true)
	b := e.submit(map[string]any{"profile_name": frozen, "payload_url": "passthrough:2"})
	nextEvent(e, batches, func(ev events.Event) bool { return ev.BatchID == b.ID && ev.To == string(queue.Held) }, "the batch to go Held")
	if _, err := e.q.ReleaseCollection(t.Context(), frozen); err != nil {
		t.Fatal(err)
	}
	awaitCollectionView(e, probes, frozen, false)
	// Once the probe that went to Processing is Completed, the intake's
	// round that took it is over: nothing of the daemon's own looks at the
	// Held batch again before the rescan.
	nextEvent(e, batches, func(ev events.Event) bool { return ev.To == string(queue.Completed) }, "the last probe to complete")
	e.mrtzkBatchStatus(b.ID, queue.Pending)
	if rep := e.waitBatch(batches, b.ID); rep.To != string(queue.Completed) {
		t.Fatalf("released batch %s ended %s: %s", b.ID, rep.To, rep.Message)
	}
}

// A Failed batch whose new report Merritt's admin tool asks for as mrt-zk
// does it (its status rewritten Failed → UpdateReporting: one write, no
// event, no folder change) is reported again without waiting for the
// safety rescan. Seen with mrt-zk f113b84's Batch.setStatus: the report
// waited for the next rescan.
func TestForeignReportRequestNeedsNoRescan(t *testing.T) {
	e := newEnv(t)
	batches := e.outside("ingestq.batch.>")
	e.daemon("host-a", func(c *reactor.Config) { c.Rescan = time.Hour })
	b, _ := e.failedBatch(batches, 3, 1)
	e.mrtzkBatchStatus(b.ID, queue.UpdateReporting)
	rep := nextEvent(e, batches, func(ev events.Event) bool { return ev.BatchID == b.ID && ev.From == string(queue.UpdateReporting) }, "the batch's new report")
	if rep.To != string(queue.Failed) {
		t.Fatalf("batch %s reported again %s, want Failed (its failed job is still Failed): %s", b.ID, rep.To, rep.Message)
	}
}

// A Completed job that Merritt's admin tool deletes as mrt-zk's Job.delete
// does (its state ref, its batch ref, then its nodes; the batch's job-count,
// which mrt-zk does not know, left as it was) does not stop its batch from
// reporting: asked for a new report, the batch reports with the jobs it
// has left. Seen with mrt-zk f113b84: the batch stayed UpdateReporting.
func TestForeignJobDeleteLeavesItsBatchReportable(t *testing.T) {
	e := newEnv(t)
	batches := e.outside("ingestq.batch.>")
	e.daemon("host-a")
	b, _ := e.failedBatch(batches, 3, 1)
	jobs, err := e.q.BatchJobs(t.Context(), b.ID)
	if err != nil || len(jobs[queue.Bucket(queue.Completed)]) != 2 {
		t.Fatalf("jobs of batch %s: %v %v, want 2 completed", b.ID, jobs, err)
	}
	s := e.session()
	gone, err := e.q.LoadJob(t.Context(), jobs[queue.Bucket(queue.Completed)][0])
	mustDo(t, func() error { return err })
	mustDo(t, func() error { return s.Conn.Delete(e.q.Path("/jobs/states/completed/"+gone.Ref()), -1) })
	mustDo(t, func() error {
		return s.Conn.Delete(e.q.Path("/batches/"+b.ID+"/states/"+queue.Bucket(queue.Completed)+"/"+gone.ID), -1)
	})
	kids, _, err := s.Conn.Children(e.q.Path("/jobs/" + gone.ID))
	mustDo(t, func() error { return err })
	for _, k := range kids {
		mustDo(t, func() error { return s.Conn.Delete(e.q.Path("/jobs/"+gone.ID+"/"+k), -1) })
	}
	mustDo(t, func() error { return s.Conn.Delete(e.q.Path("/jobs/"+gone.ID), -1) })
	e.mrtzkBatchStatus(b.ID, queue.UpdateReporting)
	rep := nextEvent(e, batches, func(ev events.Event) bool { return ev.BatchID == b.ID && ev.From == string(queue.UpdateReporting) }, "the batch's new report")
	if rep.To != string(queue.Failed) || rep.Attrs["successful_count"] != float64(1) || rep.Attrs["failed_count"] != float64(1) {
		t.Fatalf("batch %s reported again %s %v, want Failed with 1 successful and 1 failed job", b.ID, rep.To, rep.Attrs)
	}
}

// mrtzkBatchStatus rewrites a batch's status to state as mrt-zk's
// Batch.setStatus does: one write of the node, no event.
func (e *env) mrtzkBatchStatus(bid string, state queue.State) {
	e.t.Helper()
	status := fmt.Sprintf(`{"last_modified":%q,"message":"","status":%q}`, time.Now().Format(queue.TimeLayout), state)
	if _, err := e.session().Conn.Set(e.q.Path("/batches/"+bid+"/status"), []byte(status), -1); err != nil {
		e.t.Fatal(err)
	}
}

// A job of a batch Merritt's batch handler made (no job-count) whose
// mover pauses between mrt-zk's delete of its batch-processing ref and the
// create of its batch-completed one, on its last step, holds the report
// while the ref is missing (noJobOutside), and the report follows the
// ref's return without waiting for the safety rescan (here an hour): the
// ref comes back in a bucket no folder watch follows. The pause is the
// mover's, longer than the daemon's look at the emptied folder takes.
func TestCountlessBatchReportsWhenItsLastRefReturns(t *testing.T) {
	const pause = 3 * time.Second
	e := newEnv(t)
	batchEvents := e.outside("ingestq.batch.>")
	s := e.session()
	foreign := e.queue(s)
	b, j := e.foreignJob(foreign, false)
	e.daemon("host-a", func(c *reactor.Config) { c.Rescan = time.Hour })

	e.mrtzkComplete(s, foreign, b.ID, j, func() {
		time.Sleep(pause) // the mover's pause (a GC, a slow server), not a synchronisation
		if st, err := e.q.BatchState(t.Context(), b.ID); err != nil || st != queue.Processing {
			t.Fatalf("after the mover's pause the batch is %s (%v), want Processing: its job's ref is not back", st, err)
		}
	})
	untilReported(t, batchEvents, b.ID)
	e.reportNames(b.ID, j.ID)
}

// foreignJob makes a batch of one job as a foreign batch handler does, in
// Processing with a job-count when counted (ingestq's way) or none
// (Merritt's); its job is locked by the foreign consumer that works it, so
// the daemon never takes it.
func (e *env) foreignJob(foreign *queue.Queue, counted bool) (*queue.Batch, *queue.Job) {
	e.t.Helper()
	b := e.submit(map[string]any{"profile_name": "demo", "payload_url": "passthrough:1"})
	taken, _, err := foreign.AcquirePendingBatch(context.Background(), nil)
	if err != nil || taken == nil || taken.ID != b.ID {
		e.t.Fatalf("acquire: %v %v", taken, err)
	}
	j, err := foreign.CreateJob(e.t.Context(), taken, queue.JobSpec{Priority: queue.DefaultPriority})
	mustDo(e.t, func() error { return err })
	locked, err := foreign.LockJob(e.t.Context(), j.ID)
	mustDo(e.t, func() error { return err })
	c := queue.BatchChange{Release: true}
	if counted {
		one := 1
		c.JobCount = &one
	}
	mustDo(e.t, func() error { return foreign.SetBatchStatus(e.t.Context(), taken, queue.Processing, c) })
	return b, locked
}

// mrtzkComplete makes the last step of locked, a job of batch bid in
// Pending, as mrt-zk writes it: status, then the job's ref, then the batch
// ref (delete, create), then unlock; between (nil: nothing) runs between
// the batch ref's delete and its create.
func (e *env) mrtzkComplete(s *zkwatch.Session, foreign *queue.Queue, bid string, locked *queue.Job, between func()) {
	e.t.Helper()
	status := fmt.Sprintf(`{"status":"Completed","last_modified":%q,"message":"","last_successful_status":"Notify","retry_count":0}`,
		time.Now().Format(queue.TimeLayout))
	create := func(p string) error {
		_, err := s.Conn.Create(e.q.Path(p), nil, 0, zk.WorldACL(zk.PermAll))
		return err
	}
	mustDo(e.t, func() error {
		_, err := s.Conn.Set(e.q.Path("/jobs/"+locked.ID+"/status"), []byte(status), -1)
		return err
	})
	mustDo(e.t, func() error { return s.Conn.Delete(e.q.Path("/jobs/states/pending/"+locked.Ref()), -1) })
	mustDo(e.t, func() error { return create("/jobs/states/completed/" + locked.Ref()) })
	mustDo(e.t, func() error {
		return s.Conn.Delete(e.q.Path("/batches/"+bid+"/states/batch-processing/"+locked.ID), -1)
	})
	if between != nil {
		between()
	}
	mustDo(e.t, func() error { return create("/batches/" + bid + "/states/batch-completed") })
	mustDo(e.t, func() error { return create("/batches/" + bid + "/states/batch-completed/" + locked.ID) })
	mustDo(e.t, func() error { return foreign.UnlockJob(e.t.Context(), locked) })
}

// reportNames checks that batch bid reported Completed, naming job jid.
func (e *env) reportNames(bid, jid string) {
	e.t.Helper()
	got, err := e.q.LoadBatch(e.t.Context(), bid)
	mustDo(e.t, func() error { return err })
	if got.State() != queue.Completed || got.Report == nil || !slices.Equal(got.Report.SuccessfulJobs, []string{jid}) {
		e.t.Fatalf("batch %s, report %+v; want Completed naming %s", got.State(), got.Report, jid)
	}
}
