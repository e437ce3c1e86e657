package queue_test

import (
	"testing"

	"github.com/ingestq/ingestq/reactor/queue"
)

// Cancelling a Held job or a Pending batch passes the missing edge in one
// write: the status node changes once, and the Pending folder never holds
// the job's ref, so neither a foreign reader nor a daemon sees it waiting.
func TestCancelPassesThroughInOneWrite(t *testing.T) {
	r := newRun(t)
	b := r.processing(true)
	j := r.job(b, "jid0", 5, nil)
	_, err := r.q.HoldJob(t.Context(), j.ID)
	r.ok(err)
	version := func(p string) (data, children int32) {
		_, st, err := r.conn.Get(r.q.Path(p))
		r.ok(err)
		return st.Version, st.Cversion
	}
	status, _ := version("/jobs/" + j.ID + "/status")
	_, pending := version("/jobs/states/" + queue.Pending.Folder())

	state, cancelled, err := r.q.CancelJob(t.Context(), j.ID, "cancelled by tester")
	r.ok(err)
	if state != queue.Held || !cancelled {
		t.Fatalf("CancelJob: was %s, cancelled %v", state, cancelled)
	}
	got, err := r.q.LoadJob(t.Context(), j.ID)
	r.ok(err)
	if got.State() != queue.Failed || got.Status.Message != "cancelled by tester" || got.Locked {
		t.Fatalf("job after cancel: %s %q locked=%v", got.State(), got.Status.Message, got.Locked)
	}
	if s, _ := version("/jobs/" + j.ID + "/status"); s != status+1 {
		t.Errorf("status written %d times, want once", s-status)
	}
	if _, p := version("/jobs/states/" + queue.Pending.Folder()); p != pending {
		t.Errorf("the Pending folder's children changed %d times during the cancel", p-pending)
	}

	nb, err := r.q.CreateBatch(t.Context(), queue.SubmissionOf(map[string]any{"batchID": "bid-uuid-2"}))
	r.ok(err)
	bstatus, _ := version("/batches/" + nb.ID + "/status")
	changed, err := r.q.CancelPendingBatch(t.Context(), nb.ID, "cancelled by tester")
	r.ok(err)
	gb, err := r.q.LoadBatch(t.Context(), nb.ID)
	r.ok(err)
	if !changed || gb.State() != queue.Deleted || gb.Status.Message != "cancelled by tester" {
		t.Fatalf("batch after cancel: changed %v, %s %q", changed, gb.State(), gb.Status.Message)
	}
	if s, _ := version("/batches/" + nb.ID + "/status"); s != bstatus+1 {
		t.Errorf("batch status written %d times, want once", s-bstatus)
	}
}
