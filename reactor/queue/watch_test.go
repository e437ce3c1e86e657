package queue_test

import (
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// A wait for a node that has gone since it was read (a job's lock released,
// a job purged, a batch's folder deleted) says so at once and leaves no
// watch: an exists watch on a node that never comes back stayed on the
// ZooKeeper server, and in the client, for as long as the daemon ran.
func TestWaitsForGoneNodesLeaveNoWatch(t *testing.T) {
	r := newRun(t)
	b := r.processing(true)
	j := r.job(b, "jid0", 5, nil)
	locked, err := r.q.LockJob(t.Context(), j.ID)
	r.ok(err)
	lock := r.q.JobLockWait(t.Context(), j.ID) // read while held
	r.ok(r.q.UnlockJob(t.Context(), locked))
	bucket := queue.Wait{Path: r.q.Path("/batches/" + b.ID + "/states/" + queue.BucketProcessing), Present: true, Children: true}
	r.ok(r.q.FailJob(t.Context(), j.ID, "failed by tester", true))
	_, removed, err := r.q.DeleteJob(t.Context(), j.ID, true) // its bucket's ref with it
	r.ok(err)
	if !removed {
		t.Fatalf("job %s not purged", j.ID)
	}
	r.ok(r.conn.Delete(bucket.Path, -1)) // as a batch's removal does

	watched := func(p string) {
		t.Helper()
		w, err := zktest.Watched(zktest.Shared(t).Addr, p)
		r.ok(err)
		if w {
			t.Errorf("%s gone, and still watched", p)
		}
	}
	for _, w := range []queue.Wait{lock, bucket} {
		fired, changed, err := r.q.WatchOnce(t.Context(), w)
		r.ok(err)
		if !changed {
			t.Errorf("wait for %s: not changed, though it has gone", w.Path)
		}
		firesNow(t, fired)
		watched(w.Path)
	}
	fired, changed, err := r.q.WatchJobChange(t.Context(), j.ID, 0)
	r.ok(err)
	if !changed {
		t.Errorf("job %s purged: not changed", j.ID)
	}
	firesNow(t, fired)
	watched(r.q.Path("/jobs/" + j.ID + "/status"))
}

// firesNow fails the test unless fired has fired (a wait whose node has
// changed already gives one that has).
func firesNow(t *testing.T, fired <-chan zk.Event) {
	t.Helper()
	select {
	case <-fired:
	default:
		t.Error("the wait's channel has not fired, though its node has gone")
	}
}
