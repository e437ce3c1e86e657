package queue_test

import (
	"slices"
	"testing"

	"github.com/ingestq/ingestq/reactor/queue"
)

// The first job made in a batch commits in one multi(): the batch's
// missing bucket folders are read first and made with the job, where a
// guess that they were there cost a failed multi() (decision 212). A
// folder the queue has seen, then removed behind its back, is made again
// by the recovery, and the job lands in it.
func TestFirstJobOfABatchInOneCommit(t *testing.T) {
	r := newRun(t)
	b := r.processing(false)
	_, w0 := r.q.Requests()
	first := r.job(b, "jid0", 5, nil)
	_, w1 := r.q.Requests()
	if w1-w0 != 2 {
		t.Fatalf("%d writes to make a batch's first job, want 2 (its sequential node, then one multi())", w1-w0)
	}
	r.job(b, "jid1", 5, nil)
	_, w2 := r.q.Requests()
	if w2-w1 != 2 {
		t.Fatalf("%d writes to make a batch's second job, want 2", w2-w1)
	}

	// Behind the queue's back: the bucket emptied and removed.
	bucket := r.root + "/batches/" + b.ID + "/states/" + queue.Bucket(queue.Pending)
	kids, _, err := r.conn.Children(bucket)
	r.ok(err)
	for _, k := range kids {
		r.ok(r.conn.Delete(bucket+"/"+k, -1))
	}
	r.ok(r.conn.Delete(bucket, -1))
	third := r.job(b, "jid2", 5, nil)
	kids, _, err = r.conn.Children(bucket)
	r.ok(err)
	if !slices.Contains(kids, third.ID) || slices.Contains(kids, first.ID) {
		t.Fatalf("bucket %s holds %v, want the new job %s alone", bucket, kids, third.ID)
	}
}
