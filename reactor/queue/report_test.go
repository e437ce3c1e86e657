package queue_test

import (
	"context"
	"testing"

	"github.com/ingestq/ingestq/reactor/queue"
)

// A batch with a recorded job count is ready to report only when that many
// jobs are done: a job between a foreign writer's delete and create of its
// batch ref is in no bucket, and an empty batch-processing then proves
// nothing. Removing a done job lowers the count, so the report does not
// wait for a job that is gone.
func TestReadyToReportCountsJobs(t *testing.T) {
	r := newRun(t)
	ctx := context.Background()
	b := r.acquiredBatch()
	a := r.job(b, "jid0", 5, nil)
	c := r.job(b, "jid1", 5, nil)
	two := 2
	r.ok(r.q.SetBatchStatus(ctx, b, queue.Processing, queue.BatchChange{JobCount: &two, Release: true}))
	r.pipeline(a.ID, queue.Completed, "", false)

	// The other job's ref is moved by a foreign writer: gone for a moment.
	ref := "/batches/" + b.ID + "/states/batch-processing/" + c.ID
	r.ok(r.conn.Delete(r.q.Path(ref), -1))
	got, waits, err := r.q.AcquireCompletedBatch(ctx, nil, nil)
	r.ok(err)
	if got != nil {
		t.Fatalf("batch %s acquired for its report with 1 of 2 jobs done", got.ID)
	}
	if len(waits) != 3 {
		t.Fatalf("waits %+v, want the three buckets of done jobs", waits)
	}
	r.raw(ref, "")

	removed, _, err := r.q.DeleteJob(ctx, a.ID, true)
	r.ok(err)
	if !removed {
		t.Fatal("the Completed job was not removed")
	}
	loaded, err := r.q.LoadBatch(ctx, b.ID)
	r.ok(err)
	if loaded.JobCount != 1 {
		t.Fatalf("job-count %d after removing a done job, want 1", loaded.JobCount)
	}
	r.pipeline(c.ID, queue.Completed, "", false)
	got, _, err = r.q.AcquireCompletedBatch(ctx, nil, nil)
	r.ok(err)
	if got == nil || got.ID != b.ID || got.State() != queue.Reporting {
		t.Fatalf("acquired %v for its report, want %s in Reporting", got, b.ID)
	}
}

// A batch without a count whose batch-processing folder does not exist yet
// is a batch whose jobs another library is still making: not ready, and
// the folder's appearance is what to wait for.
func TestReadyToReportWithoutCountWaitsForTheFolder(t *testing.T) {
	r := newRun(t)
	ctx := context.Background()
	b := r.processing(true)
	got, waits, err := r.q.AcquireCompletedBatch(ctx, nil, nil)
	r.ok(err)
	if got != nil {
		t.Fatalf("batch %s acquired for its report before any job exists", got.ID)
	}
	want := r.q.Path("/batches/" + b.ID + "/states/batch-processing")
	if len(waits) != 1 || waits[0].Path != want || waits[0].Present {
		t.Fatalf("waits %+v, want one on the missing %s", waits, want)
	}
}

// A Processing batch one of whose done jobs Merritt's tools delete as
// mrt-zk's Job.delete does (its state ref, its batch ref, then its nodes;
// the job-count, which mrt-zk does not know, left as it was) reports with
// the jobs it has once they are done. A job whose batch ref is missing but
// whose node is there (between a foreign delete and create of the ref) is
// still waited for. Seen with mrt-zk f113b84: such a batch never reported.
func TestProcessingBatchReportsWithoutJobsMerrittDeleted(t *testing.T) {
	r := newRun(t)
	ctx := context.Background()
	b, gone, moving := r.twoDoneJobs()
	r.mrtzkDelete(b.ID, gone.ID)

	// The other's batch ref is being moved by a foreign writer: not ready.
	ref := "/batches/" + b.ID + "/states/batch-completed/" + moving.ID
	r.ok(r.conn.Delete(r.q.Path(ref), -1))
	got, _, err := r.q.AcquireCompletedBatch(ctx, nil, nil)
	r.ok(err)
	if got != nil {
		t.Fatalf("batch %s acquired for its report while a job is between buckets", got.ID)
	}
	r.raw(ref, "")
	got, _, err = r.q.AcquireCompletedBatch(ctx, nil, nil)
	r.ok(err)
	if got == nil || got.ID != b.ID || got.State() != queue.Reporting {
		t.Fatalf("acquired %v for its report, want %s in Reporting with the job it has left", got, b.ID)
	}
}

// A batch whose batch-processing holds only refs a foreign writer left
// behind (of a job done or gone) reports. mrt-zk's default Job.load writes
// the refs of the state it read when they are missing: run on every job by
// Batch.deleteDeletedJobs while ingestq worked, it wrote back the refs of
// a job ingestq had just moved to Completed (seen with mrt-zk f113b84), and
// after a foreign delete, the ref of a job no longer there.
func TestRefsLeftInBatchProcessingDoNotHoldTheReport(t *testing.T) {
	r := newRun(t)
	b, a, _ := r.twoDoneJobs()
	r.raw("/batches/"+b.ID+"/states/batch-processing/"+a.ID, "")
	r.raw("/batches/"+b.ID+"/states/batch-processing/jid0000099999", "")
	got, _, err := r.q.AcquireCompletedBatch(context.Background(), nil, nil)
	r.ok(err)
	if got == nil || got.ID != b.ID || got.State() != queue.Reporting {
		t.Fatalf("acquired %v for its report, want %s in Reporting: its jobs are done", got, b.ID)
	}
}

// twoDoneJobs makes a Processing batch of two jobs (job-count 2), both
// Completed.
func (r *run) twoDoneJobs() (*queue.Batch, *queue.Job, *queue.Job) {
	ctx := context.Background()
	b := r.acquiredBatch()
	a, c := r.job(b, "jid0", 5, nil), r.job(b, "jid1", 5, nil)
	two := 2
	r.ok(r.q.SetBatchStatus(ctx, b, queue.Processing, queue.BatchChange{JobCount: &two, Release: true}))
	r.pipeline(a.ID, queue.Completed, "", false)
	r.pipeline(c.ID, queue.Completed, "", false)
	return b, a, c
}

// mrtzkDelete deletes a Completed job of batch bid as mrt-zk's Job.delete
// does: its state ref, its batch ref, then its nodes; the batch's
// job-count, which mrt-zk does not know, is left as it was.
func (r *run) mrtzkDelete(bid, jid string) {
	r.t.Helper()
	j, err := r.q.LoadJob(context.Background(), jid)
	r.ok(err)
	r.ok(r.conn.Delete(r.q.Path("/jobs/states/completed/"+j.Ref()), -1))
	r.ok(r.conn.Delete(r.q.Path("/batches/"+bid+"/states/batch-completed/"+jid), -1))
	kids, _, err := r.conn.Children(r.q.Path("/jobs/" + jid))
	r.ok(err)
	for _, k := range kids {
		r.ok(r.conn.Delete(r.q.Path("/jobs/"+jid+"/"+k), -1))
	}
	r.ok(r.conn.Delete(r.q.Path("/jobs/"+jid), -1))
}
