package queue_test

import (
	"context"
	"testing"

	"github.com/ingestq/ingestq/reactor/queue"
)

// A daemon that knows which batches may still be Pending names them: only
// those are read (7 reads each), batches past Pending for good are told to
// it so that it can leave them out next time, and a Held batch is not
// among them (a release makes it Pending again).
func TestAcquirePendingBatchOfReadsOnlyTheNamedBatches(t *testing.T) {
	r := newRun(t)
	ctx := context.Background()
	mk := func() *queue.Batch {
		b, err := r.q.CreateBatch(ctx, queue.SubmissionOf(map[string]any{}))
		r.ok(err)
		return b
	}
	pending, started, held := mk(), mk(), mk()
	b, err := r.q.LockBatch(ctx, started.ID)
	r.ok(err)
	r.ok(r.q.SetBatchStatus(ctx, b, queue.Processing, queue.BatchChange{Release: true}))
	_, err = r.q.HoldBatch(ctx, held.ID)
	r.ok(err)

	var told []string
	tell := func(bid string) { told = append(told, bid) }
	reads0, _ := r.q.Requests()
	got, _, err := r.q.AcquirePendingBatchOf(ctx, []string{started.ID, held.ID, "not-a-batch"}, nil, tell)
	r.ok(err)
	reads, _ := r.q.Requests()
	if got != nil {
		t.Fatalf("acquired %s, a batch that is not Pending", got.ID)
	}
	if reads-reads0 != 14 {
		t.Fatalf("%d reads for two named batches, want 14 (7 each: nothing else read)", reads-reads0)
	}
	if len(told) != 1 || told[0] != started.ID {
		t.Fatalf("told %v past Pending, want only %s (the Held batch may come back)", told, started.ID)
	}
	got, _, err = r.q.AcquirePendingBatchOf(ctx, []string{started.ID, pending.ID}, nil, tell)
	r.ok(err)
	if got == nil || got.ID != pending.ID {
		t.Fatalf("acquired %v, want the Pending batch %s", got, pending.ID)
	}
}

// A batch named for its report is read with its buckets in one round of
// reads (11), and is then acquired (one write) or passed over exactly as
// when every batch is looked at.
func TestAcquireCompletedBatchNamedReadsOnce(t *testing.T) {
	r := newRun(t)
	ctx := context.Background()
	b := r.acquiredBatch()
	j := r.job(b, "jid0", 5, nil)
	one := 1
	r.ok(r.q.SetBatchStatus(ctx, b, queue.Processing, queue.BatchChange{JobCount: &one, Release: true}))

	got, _, err := r.q.AcquireCompletedBatch(ctx, []string{b.ID}, nil)
	r.ok(err)
	if got != nil {
		t.Fatalf("batch %s acquired for its report with its job still running", got.ID)
	}
	r.pipeline(j.ID, queue.Completed, "", false)
	reads0, writes0 := r.q.Requests()
	got, _, err = r.q.AcquireCompletedBatch(ctx, []string{b.ID}, nil)
	r.ok(err)
	reads, writes := r.q.Requests()
	if got == nil || got.ID != b.ID || got.State() != queue.Reporting {
		t.Fatalf("acquired %v, want %s in Reporting", got, b.ID)
	}
	if reads-reads0 != 11 || writes-writes0 != 1 {
		t.Fatalf("%d reads and %d writes to acquire a named batch, want 11 (the batch and its 4 buckets at once) and 1",
			reads-reads0, writes-writes0)
	}
}
