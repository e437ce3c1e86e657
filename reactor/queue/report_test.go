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
	r.batch()
	b, _, err := r.q.AcquirePendingBatch(ctx, nil)
	r.ok(err)
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
