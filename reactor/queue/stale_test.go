package queue_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/ingestq/ingestq/reactor/queue"
)

// A session whose job was moved on by another gets ErrStale and writes
// nothing; its own lock is released.
func TestStaleViewWritesNothing(t *testing.T) {
	r := newRun(t)
	b := r.processing(true)
	created, err := r.q.CreateJob(t.Context(), b, queue.JobSpec{Priority: 5})
	r.ok(err)
	_, qa := r.second()
	mine, err := qa.AcquireJob(t.Context(), queue.Pending)
	r.ok(err)
	if mine == nil || mine.ID != created.ID {
		t.Fatalf("acquired %v", mine)
	}
	// An operator fails the job while session A works on it.
	r.ok(r.q.FailJob(t.Context(), mine.ID, "stopped by the operator", true))
	before, err := r.q.Tree(t.Context(), "")
	r.ok(err)

	err = qa.SetJobStatus(t.Context(), mine, queue.Estimating, queue.JobChange{Release: true})
	var se *queue.StaleError
	if !errors.Is(err, queue.ErrStale) || !errors.As(err, &se) || se.Path != "/jobs/"+mine.ID+"/status" {
		t.Fatalf("commit of a stale view: %v, want a StaleError on its status", err)
	}
	after, err := r.q.Tree(t.Context(), "")
	r.ok(err)
	// The one change allowed: A released its own lock.
	var lockless []queue.Entry
	for _, e := range before {
		if e.Path != "/jobs/"+mine.ID+"/lock" {
			lockless = append(lockless, e)
		}
	}
	if !reflect.DeepEqual(lockless, after) {
		t.Fatalf("the stale commit changed the tree:\nbefore %v\nafter  %v", before, after)
	}
	j, err := r.q.LoadJob(t.Context(), mine.ID)
	r.ok(err)
	if j.State() != queue.Failed || j.Status.Message != "stopped by the operator" || j.Locked {
		t.Fatalf("job is %s %q locked=%v", j.State(), j.Status.Message, j.Locked)
	}
}

// A session closed mid-step loses its lock; another takes the job in the
// same state; the first session's view, used again from a new session (as
// after an expiry), is stale.
func TestClosedSessionLosesItsJobs(t *testing.T) {
	r := newRun(t)
	b := r.processing(true)
	created, err := r.q.CreateJob(t.Context(), b, queue.JobSpec{Priority: 5})
	r.ok(err)
	connA, qa := r.second()
	jA, err := qa.AcquireJob(t.Context(), queue.Pending)
	r.ok(err)
	if jA == nil {
		t.Fatal("A acquired nothing")
	}
	if j, err := r.q.AcquireJob(t.Context(), queue.Pending); err != nil || j != nil {
		t.Fatalf("B acquired %v while A holds it (%v)", j, err)
	}
	r.closeAndWait(connA, "/jobs/"+created.ID+"/lock")

	_, qb := r.second()
	jB, err := qb.AcquireJob(t.Context(), queue.Pending)
	r.ok(err)
	if jB == nil || jB.ID != created.ID || jB.State() != queue.Pending {
		t.Fatalf("B acquired %v, want %s in Pending", jB, created.ID)
	}
	// A comes back with a new session and its old view: fenced off even
	// before B has moved the job, because B's acquisition moved the version.
	_, qa2 := r.second()
	if err := qa2.SetJobStatus(t.Context(), jA, queue.Estimating, queue.JobChange{}); !errors.Is(err, queue.ErrStale) {
		t.Fatalf("A's old view committed: %v", err)
	}
	r.ok(qb.SetJobStatus(t.Context(), jB, queue.Estimating, queue.JobChange{Release: true}))
	j, err := r.q.LoadJob(t.Context(), created.ID)
	r.ok(err)
	if j.State() != queue.Estimating || j.Locked || *j.Status.LastSuccessfulStatus != queue.Pending {
		t.Fatalf("job %s locked=%v lss=%v", j.State(), j.Locked, *j.Status.LastSuccessfulStatus)
	}
	vs, err := r.q.Check(t.Context())
	r.ok(err)
	if len(vs) != 0 {
		t.Fatal(vs)
	}
}

// Admin actions refuse what does not apply, saying why, and change nothing.
func TestAdminRefusals(t *testing.T) {
	r := newRun(t)
	b := r.processing(true)
	j, err := r.q.CreateJob(t.Context(), b, queue.JobSpec{Priority: 5})
	r.ok(err)
	cases := []struct {
		what string
		err  error
		want error
	}{
		{"requeue a Pending job", second(r.q.RequeueJob(t.Context(), j.ID, "")), queue.ErrRefused},
		{"delete a Processing batch", r.q.DeleteBatch(t.Context(), b.ID), queue.ErrRefused},
		{"report a Processing batch", second(r.q.ReportBatch(t.Context(), b.ID)), queue.ErrRefused},
		{"hold a Processing batch", second(r.q.HoldBatch(t.Context(), b.ID)), queue.ErrRefused},
		{"hold a missing job", second(r.q.HoldJob(t.Context(), "jid0000099999")), queue.ErrNotFound},
	}
	for _, c := range cases {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.what, c.err, c.want)
		}
	}
	// Releasing a job that is not held is not an error: nothing changes.
	if changed, err := r.q.ReleaseJob(t.Context(), j.ID); err != nil || changed {
		t.Errorf("release a Pending job: changed %v, %v; want nothing done, no error", changed, err)
	}
	held, err := r.q.LockJob(t.Context(), j.ID)
	r.ok(err)
	if _, err := r.q.HoldJob(t.Context(), j.ID); !errors.Is(err, queue.ErrLocked) {
		t.Errorf("hold a locked job: %v, want ErrLocked", err)
	}
	r.ok(r.q.UnlockJob(t.Context(), held))
	if changed, err := r.q.HoldJob(t.Context(), j.ID); err != nil || !changed {
		t.Fatalf("hold a Pending job: changed %v, %v", changed, err)
	}
	if changed, err := r.q.HoldJob(t.Context(), j.ID); err != nil || changed {
		t.Errorf("hold a Held job again: changed %v, %v; want nothing done, no error", changed, err)
	}
	if _, _, err := r.q.DeleteJob(t.Context(), j.ID, false); err != nil {
		t.Fatalf("delete a Held job: %v", err)
	}
	got, err := r.q.LoadJob(t.Context(), j.ID)
	r.ok(err)
	if got.State() != queue.Deleted {
		t.Fatalf("deleted Held job is %s", got.State())
	}
	vs, err := r.q.Check(t.Context())
	r.ok(err)
	if len(vs) != 0 {
		t.Fatal(vs)
	}
}

func second[T any](_ T, err error) error { return err }

// A batch handler whose batch was taken over (its session paused past its
// timeout, then resumed) creates no job: the creation is fenced by the
// batch's version, which the new owner's acquisition moved on. Nothing of
// the stale creation stays, not even the empty jid node.
func TestStaleBatchViewCreatesNoJob(t *testing.T) {
	r := newRun(t)
	mine := r.acquiredBatch()
	_, err := r.q.CreateJob(t.Context(), mine, queue.JobSpec{Priority: 5})
	r.ok(err)
	// Its lock goes (as with an expired session); another session takes
	// the batch over.
	r.ok(r.q.UnlockBatch(t.Context(), mine))
	_, qb := r.second()
	theirs, _, err := qb.AcquirePendingBatch(context.Background(), nil)
	r.ok(err)
	if theirs == nil || theirs.ID != mine.ID {
		t.Fatalf("the second session acquired %v, want %s", theirs, mine.ID)
	}
	before, err := r.q.Tree(t.Context(), "")
	r.ok(err)
	_, err = r.q.CreateJob(t.Context(), mine, queue.JobSpec{Priority: 5})
	if !errors.Is(err, queue.ErrStale) {
		t.Fatalf("a job created through the stale view: %v, want ErrStale", err)
	}
	after, err := r.q.Tree(t.Context(), "")
	r.ok(err)
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("the stale creation changed the tree:\nbefore %v\nafter  %v", before, after)
	}
	// The owner's view still creates.
	if _, err := qb.CreateJob(t.Context(), theirs, queue.JobSpec{Priority: 5}); err != nil {
		t.Fatalf("the new owner's creation: %v", err)
	}
}

// A session whose storage lock went with it (closed here; expired after a
// pause in life) no longer holds it once another session has taken it, and
// its unlock leaves the other's lock in place.
func TestStorageLockOfAnEndedSession(t *testing.T) {
	r := newRun(t)
	const ark = "ark:/99999/fk4paused"
	connA, qa := r.second()
	ok, err := qa.LockStorage(t.Context(), ark, "")
	r.ok(err)
	if !ok {
		t.Fatal("the first lock was refused")
	}
	if held, err := qa.HoldsStorage(t.Context(), ark); err != nil || !held {
		t.Fatalf("the locking session: HoldsStorage = %v, %v; want true", held, err)
	}
	if held, err := r.q.HoldsStorage(t.Context(), ark); err != nil || held {
		t.Fatalf("another session: HoldsStorage = %v, %v; want false", held, err)
	}
	if freed, err := r.q.UnlockStorage(t.Context(), ark); err != nil || freed {
		t.Fatalf("another session's unlock: %v, %v; want false, and the lock kept", freed, err)
	}
	if held, err := qa.HoldsStorage(t.Context(), ark); err != nil || !held {
		t.Fatalf("after another session's unlock the locking session holds it: %v, %v; want true", held, err)
	}

	// A's lock goes with its session; B takes it; A, back with a new
	// session under the same Queue's name, neither holds nor frees it.
	r.closeAndWait(connA, "/locks/storage/"+queue.LockName(ark))
	ok, err = r.q.LockStorage(t.Context(), ark, "")
	r.ok(err)
	if !ok {
		t.Fatal("the lock of an ended session was not free")
	}
	_, qa2 := r.second()
	if held, err := qa2.HoldsStorage(t.Context(), ark); err != nil || held {
		t.Fatalf("a session that did not take the lock: HoldsStorage = %v, %v; want false", held, err)
	}
	if freed, err := qa2.UnlockStorage(t.Context(), ark); err != nil || freed {
		t.Fatalf("a session that did not take the lock unlocked it: %v, %v", freed, err)
	}
	if held, err := r.q.HoldsStorage(t.Context(), ark); err != nil || !held {
		t.Fatalf("the holder lost its lock: %v, %v", held, err)
	}
	if freed, err := r.q.UnlockStorage(t.Context(), ark); err != nil || !freed {
		t.Fatalf("the holder's unlock: %v, %v; want true", freed, err)
	}
}

// A batch's move tried again after its first try got no answer (Retried),
// whose batch another writer moved first, is stale and known not to have
// landed, as a job's is (TestRetriedChangeRecognisesItsLandedTry): the
// reactor abandons it rather than count its event lost.
func TestRetriedBatchMoveOvertakenIsKnownNotLanded(t *testing.T) {
	r := newRun(t)
	ctx := t.Context()
	b := r.acquiredBatch()
	view := *b // as read before the first try
	none := 0
	move := queue.BatchChange{JobCount: &none, Release: true, At: r.q.Now()}
	other := move
	other.Message = "another writer's"
	r.ok(r.q.SetBatchStatus(ctx, b, queue.Processing, other))
	move.Retried = true
	if err := r.q.SetBatchStatus(ctx, &view, queue.Processing, move); !errors.Is(err, queue.ErrStale) || queue.MaybeApplied(err) {
		t.Fatalf("the move tried again: %v (maybe applied %v); want a stale view, not maybe applied", err, queue.MaybeApplied(err))
	}
}

// A change tried again after an earlier call's try got no answer (Retried)
// is recognised by its own bytes when that try had landed: the fence it
// now fails (the status moved on, by that very try) is its success. A
// change that is not marked so is stale. One marked so whose fence another
// writer moved first is stale, known not to have landed: the version it
// would have made holds the other's bytes. Only when the status has moved
// past that version (the try landed, then another writer moved the job on)
// is its outcome said unknown.
func TestRetriedChangeRecognisesItsLandedTry(t *testing.T) {
	for _, tc := range []struct {
		name             string
		retried, foreign bool
		after            bool  // another writer moves the job on after the first try landed
		wantErr          error // nil: the try is recognised as landed
		maybe            bool
	}{
		{"retried", true, false, false, nil, false},
		{"not marked", false, false, false, queue.ErrStale, false},
		{"another writer", true, true, false, queue.ErrStale, false},
		{"landed, then another writer", true, false, true, queue.ErrStale, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRun(t)
			b := r.processing(true)
			_, err := r.q.CreateJob(t.Context(), b, queue.JobSpec{Priority: 5})
			r.ok(err)
			j, err := r.q.AcquireJob(t.Context(), queue.Pending)
			r.ok(err)
			view := *j // as read before the first try
			c := queue.JobChange{Release: true, At: r.q.Now()}
			if tc.foreign {
				c2 := c
				c2.Message = "another writer's"
				r.ok(r.q.SetJobStatus(t.Context(), j, queue.Estimating, c2))
			} else {
				r.ok(r.q.SetJobStatus(t.Context(), j, queue.Estimating, c)) // lands; say its reply was lost
			}
			if tc.after {
				r.ok(r.q.UpdateJob(t.Context(), j, queue.JobChange{Message: "another writer's note"}))
			}
			c.Retried = tc.retried
			err = r.q.SetJobStatus(t.Context(), &view, queue.Estimating, c)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) || queue.MaybeApplied(err) != tc.maybe {
				t.Fatalf("the second try: %v (maybe applied %v); want %v, maybe applied %v", err, queue.MaybeApplied(err), tc.wantErr, tc.maybe)
			}
			if err == nil && view.State() != queue.Estimating {
				t.Fatalf("the view after a recognised try is %s, want Estimating", view.State())
			}
		})
	}
}

// A kept-lock move whose reply was lost, tried again after the job's lock
// went (its session expired) and another daemon took the job and moved it
// on: the status is past the version the move would have made, so its
// bytes tell nothing, but its holder names that version as the one its
// acquisition made, and ZooKeeper makes a version once: the move never
// landed. Before, it was of unknown outcome (MaybeApplied), and the
// reactor counted its event lost. A move that did land, then the other
// daemon's acquisition and move, is still unknown.
func TestRetriedMoveOvertakenAndMovedOnIsKnownNotLanded(t *testing.T) {
	for _, landed := range []bool{false, true} {
		t.Run(fmt.Sprint("landed: ", landed), func(t *testing.T) {
			r := newRun(t)
			ctx := t.Context()
			_, qa, qb := r.hostsAB()
			j := r.job(r.processing(true), "jid0", 5, nil)
			got, err := qa.TryAcquireJob(ctx, queue.Pending, j.Ref(), queue.Admission{})
			if err != nil || got == nil {
				t.Fatalf("a's acquisition: %+v %v, want the job", got, err)
			}
			view := *got                        // as read before the first try
			c := queue.JobChange{At: r.q.Now()} // keeps the lock: a runs Estimating too
			in := queue.Pending
			if landed {
				r.ok(qa.SetJobStatus(ctx, got, queue.Estimating, c)) // lands; say its reply was lost
				in = queue.Estimating
			}
			r.ok(r.conn.Delete(r.q.Path("/jobs/"+j.ID+"/lock"), -1)) // a's session expired
			taken, err := qb.TryAcquireJob(ctx, in, j.Ref(), queue.Admission{})
			if err != nil || taken == nil {
				t.Fatalf("b's acquisition in %s: %+v %v, want the job", in, taken, err)
			}
			next := map[queue.State]queue.State{queue.Pending: queue.Estimating, queue.Estimating: queue.Provisioning}[in]
			r.ok(qb.SetJobStatus(ctx, taken, next, queue.JobChange{})) // b moves it on, keeping the lock
			c.Retried = true
			err = qa.SetJobStatus(ctx, &view, queue.Estimating, c)
			if !errors.Is(err, queue.ErrStale) || queue.MaybeApplied(err) != landed {
				t.Fatalf("a's move tried again: %v (maybe applied %v); want stale, maybe applied %v", err, queue.MaybeApplied(err), landed)
			}
		})
	}
}
