package queue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/reactor/queue"
)

// Each batch-level contradiction, written as a foreign writer would leave
// it, is reported with its node; a clean queue reports none.
func TestCheckBatchContradictions(t *testing.T) {
	r := newRun(t)
	ctx := context.Background()
	newBatch := func(keys ...string) (*queue.Batch, []*queue.Job) {
		b, err := r.q.CreateBatch(ctx, queue.SubmissionOf(map[string]any{"profile_name": "demo"}))
		r.ok(err)
		b, _, err = r.q.AcquirePendingBatch(ctx, func(x *queue.Batch) bool { return x.ID == b.ID })
		r.ok(err)
		var jobs []*queue.Job
		for _, k := range keys {
			j, err := r.q.CreateJob(ctx, b, queue.JobSpec{Priority: 5, Config: queue.JobConfigOf(map[string]any{"object_key": k})})
			r.ok(err)
			jobs = append(jobs, j)
		}
		n := len(keys)
		r.ok(r.q.SetBatchStatus(ctx, b, queue.Processing, queue.BatchChange{JobCount: &n, Release: true}))
		return b, jobs
	}
	v, w, err := r.q.CheckAll(ctx, queue.CheckOptions{})
	r.ok(err)
	if len(v)+len(w) != 0 {
		t.Fatalf("an empty queue: %v %v", v, w)
	}

	dup, _ := newBatch("line 1", "line 1")
	done, doneJobs := newBatch("a")
	for s := queue.Pending; s != queue.Completed; {
		j, err := r.q.LoadJob(ctx, doneJobs[0].ID)
		r.ok(err)
		j, err = r.q.TryAcquireJob(ctx, s, j.Ref(), queue.Admission{})
		r.ok(err)
		next, _ := queue.JobMachine.Success(s)
		if s == queue.Pending {
			next = queue.Estimating
		}
		r.ok(r.q.SetJobStatus(ctx, j, next, queue.JobChange{Release: true}))
		s = next
	}
	early, _ := newBatch("b")
	status := func(s queue.State) string {
		return fmt.Sprintf(`{"status":%q,"last_modified":%q,"message":""}`, s, time.Now().Format(queue.TimeLayout))
	}
	r.raw("/batches/"+early.ID+"/status", status(queue.Completed))
	r.raw("/batches/"+early.ID+"/status-report", `{"last_modified":"","successful_jobs":["jid0000999999"],"failed_jobs":[]}`)
	counted, _ := newBatch("c")
	r.raw("/batches/"+counted.ID+"/job-count", "0")
	locked, lockedJobs := newBatch("d")
	_, err = r.q.LockJob(ctx, lockedJobs[0].ID)
	r.ok(err)

	v, w, err = r.q.CheckAll(ctx, queue.CheckOptions{LockAge: time.Nanosecond})
	r.ok(err)
	want := []struct {
		list []queue.Violation
		path string
		has  string
	}{
		{v, "/batches/" + dup.ID, `object "line 1" has 2 jobs`},
		{v, "/batches/" + early.ID, "Completed, but 1 of its jobs are still in batch-processing"},
		{v, "/batches/" + early.ID + "/status-report", "lists 1 successful and 0 failed jobs, its buckets hold 0 completed"},
		{v, "/batches/" + counted.ID, "1 jobs in its buckets, but its handler made 0 (job-count)"},
		{w, "/batches/" + done.ID, "Processing with all 1 jobs done, and no session is reporting it"},
		{w, "/jobs/" + lockedJobs[0].ID + "/lock", "held for "},
	}
	for _, c := range want {
		found := false
		for _, x := range c.list {
			found = found || x.Path == c.path && strings.Contains(x.Problem, c.has)
		}
		if !found {
			t.Errorf("no finding %s: …%s… in violations %v / warnings %v", c.path, c.has, v, w)
		}
	}
	for _, x := range append(v, w...) {
		if strings.Contains(x.Path, locked.ID) {
			t.Errorf("a finding on the consistent batch %s: %v", locked.ID, x)
		}
	}
	// Check alone (the invariant of jobs) sees none of the batch findings.
	plain, err := r.q.Check(ctx)
	r.ok(err)
	if len(plain) != 0 {
		t.Errorf("Check: %v", plain)
	}
}

// A done job purged after its batch reported (`ingestq delete --purge`, which
// the CLI itself names for a Completed job) leaves the report naming it, as
// it was sent: check finds nothing, for a Completed and for a Failed batch.
// A report naming a job that never was is still a violation.
func TestCheckAcceptsJobsPurgedAfterTheReport(t *testing.T) {
	r := newRun(t)
	ctx := context.Background()
	// reported makes a batch whose jobs end as ends says, reported.
	reported := func(ends ...queue.State) (*queue.Batch, []*queue.Job) {
		b, err := r.q.CreateBatch(ctx, queue.SubmissionOf(map[string]any{"profile_name": "demo"}))
		r.ok(err)
		b, _, err = r.q.AcquirePendingBatch(ctx, func(x *queue.Batch) bool { return x.ID == b.ID })
		r.ok(err)
		var jobs []*queue.Job
		for i := range ends {
			j, err := r.q.CreateJob(ctx, b, queue.JobSpec{Priority: 5, Config: queue.JobConfigOf(map[string]any{"object_key": fmt.Sprint(i)})})
			r.ok(err)
			jobs = append(jobs, j)
		}
		n := len(ends)
		r.ok(r.q.SetBatchStatus(ctx, b, queue.Processing, queue.BatchChange{JobCount: &n, Release: true}))
		rep := queue.StatusReport{LastModified: time.Now().Format(queue.TimeLayout), SuccessfulJobs: []string{}, FailedJobs: []string{}}
		for i, end := range ends {
			s := queue.Pending
			for s != end {
				j, err := r.q.LoadJob(ctx, jobs[i].ID)
				r.ok(err)
				j, err = r.q.TryAcquireJob(ctx, s, j.Ref(), queue.Admission{})
				r.ok(err)
				next, _ := queue.JobMachine.Success(s)
				switch {
				case s == queue.Pending:
					next = queue.Estimating
				case end == queue.Failed && s == queue.Downloading:
					next = queue.Failed
				}
				r.ok(r.q.SetJobStatus(ctx, j, next, queue.JobChange{Release: true}))
				s = next
			}
			if end == queue.Completed {
				rep.SuccessfulJobs = append(rep.SuccessfulJobs, jobs[i].ID)
			} else {
				rep.FailedJobs = append(rep.FailedJobs, jobs[i].ID)
			}
		}
		b, err = r.q.LockBatch(ctx, b.ID)
		r.ok(err)
		r.ok(r.q.SetBatchStatus(ctx, b, queue.Reporting, queue.BatchChange{}))
		end := queue.Completed
		if len(rep.FailedJobs) > 0 {
			end = queue.Failed
		}
		r.ok(r.q.SetBatchStatus(ctx, b, end, queue.BatchChange{Report: &rep, Release: true}))
		return b, jobs
	}
	purge := func(j *queue.Job) {
		removed, _, err := r.q.DeleteJob(ctx, j.ID, true)
		r.ok(err)
		if !removed {
			t.Fatalf("purge %s: not removed", j.ID)
		}
	}
	completed, cj := reported(queue.Completed, queue.Completed)
	failed, fj := reported(queue.Completed, queue.Failed)
	purge(cj[0])
	purge(fj[0])
	purge(fj[1])
	v, w, err := r.q.CheckAll(ctx, queue.CheckOptions{})
	r.ok(err)
	if len(v) != 0 {
		t.Errorf("violations after purges of reported jobs (batches %s, %s): %v", completed.ID, failed.ID, v)
	}
	if len(w) != 0 {
		t.Errorf("warnings: %v", w)
	}
	// Still a violation: a report naming a jid the queue never gave out.
	r.raw("/batches/"+completed.ID+"/status-report",
		fmt.Sprintf(`{"last_modified":"","successful_jobs":[%q,"jid0000999999"],"failed_jobs":[]}`, cj[1].ID))
	v, _, err = r.q.CheckAll(ctx, queue.CheckOptions{})
	r.ok(err)
	if len(v) != 1 || v[0].Path != "/batches/"+completed.ID+"/status-report" {
		t.Errorf("a report naming a job that never was: %v, want one violation on its status-report", v)
	}
}

// A done batch with fewer jobs than its job-count, its others deleted as
// mrt-zk's Job.delete does (state ref, batch ref, then the job's nodes;
// job-count, which mrt-zk does not know, left as it was), is no violation:
// check names it as a warning. `ingestq check` called it a violation after
// Merritt's admin deleted a job in the walk-through against mrt-zk f113b84.
func TestCheckTakesJobsDeletedByMerrittsTools(t *testing.T) {
	r := newRun(t)
	ctx := context.Background()
	b, _, c := r.twoDoneJobs()
	got, _, err := r.q.AcquireCompletedBatch(ctx, nil, nil)
	r.ok(err)
	r.ok(r.q.SetBatchStatus(ctx, got, queue.Completed, queue.BatchChange{Release: true}))
	r.mrtzkDelete(b.ID, c.ID)

	v, w, err := r.q.CheckAll(ctx, queue.CheckOptions{})
	r.ok(err)
	if len(v) != 0 {
		t.Fatalf("violations %+v, want none", v)
	}
	want := "Completed with 1 jobs in its buckets, but its handler made 2 (job-count): the others were deleted"
	if len(w) != 1 || w[0].Path != "/batches/"+b.ID || !strings.Contains(w[0].Problem, want) {
		t.Fatalf("warnings %+v, want one on /batches/%s saying %q", w, b.ID, want)
	}
}

// An access request's lock held past LockAge is a warning, as a job's is:
// before, check looked at no access request's lock, and an assembly stuck
// for hours, its request held Processing, went unsaid.
func TestCheckWarnsOfAnOldAccessLock(t *testing.T) {
	r := newRun(t)
	ctx := context.Background()
	a, err := r.q.CreateAccess(ctx, queue.AccessLarge, ourToken("ark:/1/a"))
	r.ok(err)
	taken, err := r.q.AcquireAccess(ctx, queue.AccessLarge)
	r.ok(err)
	if taken == nil || taken.ID != a.ID {
		t.Fatalf("acquired %v, want %s", taken, a.Ref())
	}
	_, w, err := r.q.CheckAll(ctx, queue.CheckOptions{})
	r.ok(err)
	if len(w) != 0 {
		t.Fatalf("a fresh lock: warnings %v, want none", w)
	}
	_, w, err = r.q.CheckAll(ctx, queue.CheckOptions{LockAge: time.Nanosecond})
	r.ok(err)
	want := "/access/large/" + a.ID + "/lock"
	if len(w) != 1 || w[0].Path != want || !strings.Contains(w[0].Problem, "held for ") {
		t.Fatalf("warnings %v, want one: %s held for …", w, want)
	}
}

// A batch whose status cannot be read (bad JSON, a state no machine knows)
// is a violation named with its node; one whose status is missing is a
// creation between its writes while young (mrt-zk's createBatch writes the
// status last) and a violation once older than a creation takes.
func TestCheckNamesUnreadableBatches(t *testing.T) {
	r := newRun(t)
	bad := map[string]string{"bad JSON": `{"status":"Processing",`, `unknown batch state "Weird"`: `{"status":"Weird","message":""}`}
	at := map[string]string{}
	newBatch := func() *queue.Batch {
		b, err := r.q.CreateBatch(t.Context(), queue.SubmissionOf(map[string]any{"profile_name": "demo"}))
		r.ok(err)
		return b
	}
	for problem, status := range bad {
		b := newBatch()
		r.raw("/batches/"+b.ID+"/status", status)
		at["/batches/"+b.ID] = problem
	}
	husk := newBatch()
	r.ok(r.conn.Delete(r.q.Path("/batches/"+husk.ID+"/status"), -1))

	v, _, err := r.q.CheckAll(t.Context(), queue.CheckOptions{})
	r.ok(err)
	if len(v) != len(at) {
		t.Errorf("violations %v, want one for each of %v", v, at)
	}
	for _, x := range v {
		if want, ok := at[x.Path]; !ok || !strings.Contains(x.Problem, want) {
			t.Errorf("violation %v, want %q at its batch", x, want)
		}
	}
	v, _, err = r.later().CheckAll(t.Context(), queue.CheckOptions{})
	r.ok(err)
	if !strings.Contains(fmt.Sprint(v), "/batches/"+husk.ID+"/status: missing") {
		t.Errorf("check 11 minutes later: %v, want the batch without a status named", v)
	}
}

// A batch uuid left naming a batch that is gone (mrt-zk's createBatch cut
// short after the uuid, its empty bid node removed by another program:
// cleanup removes the uuid with it, TestCleanupRemovesTheUUIDOfAHusk) is a
// warning of check once older than a creation can take, and FindBatch
// says the uuid names a batch that is gone ("not found" before).
func TestCheckNamesAUUIDWhoseBatchIsGone(t *testing.T) {
	r := newRun(t)
	ctx := t.Context()
	bid := r.cutShortCreation("uuid-left")
	_, w, err := r.q.CheckAll(ctx, queue.CheckOptions{})
	r.ok(err)
	if len(w) != 0 {
		t.Errorf("a creation under way: warnings %v, want none", w)
	}
	r.ok(r.conn.Delete(r.q.Path("/batches/"+bid), -1))
	v, w, err := r.later().CheckAll(ctx, queue.CheckOptions{})
	r.ok(err)
	if want := "/batch-uuids/uuid-left: names " + bid + ", which is gone"; len(v) != 0 || len(w) != 1 || !strings.Contains(w[0].String(), want) {
		t.Errorf("violations %v, warnings %v; want one warning %q", v, w, want)
	}
	if _, err := r.q.FindBatch(ctx, "uuid-left"); !errors.Is(err, queue.ErrBatchGone) || !errors.Is(err, queue.ErrNotFound) ||
		!strings.Contains(err.Error(), "batch uuid uuid-left names "+bid+", which is gone") {
		t.Errorf("FindBatch: %v, want the uuid's batch gone", err)
	}
}
