package queue_test

import (
	"testing"

	"github.com/ingestq/ingestq/reactor/queue"
)

// A daemon's acquisition names it in the job's status (holder), kept by a
// move that keeps the lock and dropped by one that releases it; the next
// daemon to acquire a job its holder let go without moving it learns that
// holder (TakenFrom), and one acquiring a job moved on learns none. A
// queue of no registered host (a CLI's) leaves the status as it is.
func TestAcquisitionNamesTheJobsHolder(t *testing.T) {
	r := newRun(t)
	ctx := t.Context()
	connA, qa := r.second()
	_, qb := r.second()
	r.ok(qa.RegisterHost(ctx, "a", nil))
	r.ok(qb.RegisterHost(ctx, "b", nil))
	b := r.processing(true)
	j := r.job(b, "jid0", 5, nil)
	a := queue.JobHolder{Host: "a", Session: connA.SessionID()}
	holder := func(s queue.State) *queue.JobHolder {
		t.Helper()
		got, err := r.q.LoadJob(ctx, j.ID)
		r.ok(err)
		if got.State() != s {
			t.Fatalf("job in %s, want %s", got.State(), s)
		}
		return got.Status.Holder
	}

	got, err := qa.TryAcquireJob(ctx, queue.Pending, j.Ref(), queue.Admission{})
	if err != nil || got == nil || got.TakenFrom != nil {
		t.Fatalf("a's acquisition in Pending: %+v %v, want the job, taken from none", got, err)
	}
	if h := holder(queue.Pending); h == nil || *h != a {
		t.Fatalf("holder %+v after a's acquisition, want %+v", h, a)
	}
	r.ok(qa.SetJobStatus(ctx, got, queue.Estimating, queue.JobChange{})) // kept: a runs Estimating too
	if h := holder(queue.Estimating); h == nil || *h != a {
		t.Fatalf("holder %+v after a's move that kept the lock, want %+v", h, a)
	}
	r.ok(qa.UnlockJob(ctx, got)) // let go without a move (a step's wait)
	got, err = qb.TryAcquireJob(ctx, queue.Estimating, j.Ref(), queue.Admission{})
	if err != nil || got == nil || got.TakenFrom == nil || *got.TakenFrom != a {
		t.Fatalf("b's acquisition in Estimating: %+v %v, want the job, taken from %+v", got, err, a)
	}
	r.ok(qb.SetJobStatus(ctx, got, queue.Provisioning, queue.JobChange{Release: true}))
	if h := holder(queue.Provisioning); h != nil {
		t.Fatalf("holder %+v after b's move that released the lock, want none", h)
	}
	got, err = qa.TryAcquireJob(ctx, queue.Provisioning, j.Ref(), queue.Admission{})
	if err != nil || got == nil || got.TakenFrom != nil {
		t.Fatalf("a's acquisition in Provisioning: %+v %v, want the job, taken from none", got, err)
	}
	r.ok(qa.UnlockJob(ctx, got))
	got, err = r.q.TryAcquireJob(ctx, queue.Provisioning, j.Ref(), queue.Admission{})
	if err != nil || got == nil || got.TakenFrom != nil {
		t.Fatalf("the CLI's acquisition: %+v %v, want the job, taken from none", got, err)
	}
	if h := holder(queue.Provisioning); h == nil || *h != a {
		t.Fatalf("holder %+v after the CLI's acquisition, want a's still (%+v)", h, a)
	}
}
