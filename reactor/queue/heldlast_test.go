package queue_test

import (
	"context"
	"testing"

	"github.com/ingestq/ingestq/reactor/queue"
)

// A hold and its release are no step of the job: after them the job's
// last_successful_status is what it was (null for a job that never ran a
// step), never Held, and its first step records Pending as usual.
func TestHoldAndReleaseKeepLastSuccessfulStatus(t *testing.T) {
	r := newRun(t)
	ctx := context.Background()
	b, err := r.q.CreateBatch(ctx, queue.SubmissionOf(map[string]any{"profile_name": "demo"}))
	r.ok(err)
	b, _, err = r.q.AcquirePendingBatch(ctx, func(x *queue.Batch) bool { return x.ID == b.ID })
	r.ok(err)
	j, err := r.q.CreateJob(ctx, b, queue.JobSpec{Priority: 5})
	r.ok(err)
	lss := func(when string) *queue.State {
		t.Helper()
		got, err := r.q.LoadJob(ctx, j.ID)
		r.ok(err)
		return got.Status.LastSuccessfulStatus
	}
	for _, hold := range []bool{true, false} {
		change, name := r.q.ReleaseJob, "release"
		if hold {
			change, name = r.q.HoldJob, "hold"
		}
		changed, err := change(ctx, j.ID)
		r.ok(err)
		if !changed {
			t.Fatalf("%s changed nothing", name)
		}
		if got := lss(name); got != nil {
			t.Errorf("after the %s: last_successful_status %s, want null (Held is no successful step)", name, *got)
		}
	}
	got, err := r.q.LoadJob(ctx, j.ID)
	r.ok(err)
	got, err = r.q.TryAcquireJob(ctx, queue.Pending, got.Ref(), queue.Admission{})
	r.ok(err)
	r.ok(r.q.SetJobStatus(ctx, got, queue.Estimating, queue.JobChange{Release: true}))
	if s := lss("estimating"); s == nil || *s != queue.Pending {
		t.Errorf("after Pending → Estimating: last_successful_status %v, want Pending", s)
	}
}
