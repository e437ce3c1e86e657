package queue_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/reactor/queue"
)

// A late admission (decision 218) sends the lock with the reads of the rest
// of the job: the job comes back whole and locked at the right version, in
// two read round trips of 2 and 9 nodes and one write.
func TestLateAdmissionAcquiresInOneWrite(t *testing.T) {
	r := newRun(t)
	b := r.processing(true)
	made := r.job(b, "jid0", 5, map[string]any{"payload_url": "http://example.org/a"})
	var seen *queue.Job
	reads0, writes0 := r.q.Requests()
	j, err := r.q.TryAcquireJob(t.Context(), queue.Pending, made.Ref(), queue.Admission{Check: func(j *queue.Job) bool { seen = j; return true }})
	r.ok(err)
	reads, writes := r.q.Requests()
	if j == nil || !j.Locked || j.BatchID != b.ID || j.Config.PayloadURL != "http://example.org/a" {
		t.Fatalf("acquired %+v, want the whole job, locked", j)
	}
	if seen != j {
		t.Fatalf("admission asked about %p, want the job returned (%p)", seen, j)
	}
	if reads-reads0 != 11 || writes-writes0 != 1 {
		t.Fatalf("%d reads and %d writes, want 11 (status and lock, then the other 9 nodes) and 1", reads-reads0, writes-writes0)
	}
	// The version it holds is the one the acquisition left: it can move on.
	r.ok(r.q.SetJobStatus(t.Context(), j, queue.Estimating, queue.JobChange{Release: true}))
}

// A job turned down is left as found: unlocked and in its state, whether
// admission is asked before the lock (early: nothing written) or after it
// (late: the lock released at once).
func TestTurnedDownJobIsLeftUnlocked(t *testing.T) {
	for _, early := range []bool{true, false} {
		r := newRun(t)
		b := r.processing(true)
		made := r.job(b, "jid0", 5, map[string]any{"payload_url": "http://example.org/a"})
		var asked string
		_, writes0 := r.q.Requests()
		j, err := r.q.TryAcquireJob(t.Context(), queue.Pending, made.Ref(), queue.Admission{
			Early: early,
			Check: func(j *queue.Job) bool { asked = j.Config.PayloadURL; return false },
		})
		r.ok(err)
		_, writes := r.q.Requests()
		if j != nil || asked != "http://example.org/a" {
			t.Fatalf("early %v: acquired %v, asked about %q; want nothing, asked about the job as read", early, j, asked)
		}
		if early && writes != writes0 {
			t.Fatalf("early: %d writes for a job turned down, want none", writes-writes0)
		}
		after, err := r.q.LoadJob(t.Context(), made.ID)
		r.ok(err)
		if after.Locked || after.State() != queue.Pending {
			t.Fatalf("early %v: job left %s, locked %v; want Pending, unlocked", early, after.State(), after.Locked)
		}
		// Another session takes it at once: nothing of the first one's is left.
		_, other := r.second()
		got, err := other.TryAcquireJob(t.Context(), queue.Pending, made.Ref(), queue.Admission{})
		r.ok(err)
		if got == nil {
			t.Fatalf("early %v: another session could not take the job turned down", early)
		}
	}
}

// A job that turns out unreadable once the lock went out with its reads is
// released again and skipped, and the rest of the folder is still taken.
func TestLateAdmissionReleasesAnUnreadableJob(t *testing.T) {
	r := newRun(t)
	good, bad := r.twoGoodOneBad(func(jid string) { r.raw("/jobs/"+jid+"/configuration", `{"payload_url": `) })
	refs, _, err := r.q.Refs(t.Context(), queue.Pending)
	r.ok(err)
	i := slices.IndexFunc(refs, func(ref string) bool { return strings.HasSuffix(ref, "-"+bad) })
	// The session's first unlock makes the session's own node: one before.
	first, err := r.q.LockJob(t.Context(), good[0])
	r.ok(err)
	r.ok(r.q.UnlockJob(t.Context(), first))
	_, writes0 := r.q.Requests()
	j, err := r.q.TryAcquireJob(t.Context(), queue.Pending, refs[i], queue.Admission{})
	_, writes := r.q.Requests()
	if j != nil || err != nil || writes-writes0 != 2 {
		t.Fatalf("unreadable job: %v, %v, %d writes; want skipped after locking and releasing it", j, err, writes-writes0)
	}
	if ok, _, err := r.conn.Exists(r.q.Path("/jobs/" + bad + "/lock")); err != nil || ok {
		t.Fatalf("unreadable job still locked (%v)", err)
	}
	// Found again by the next round, it is read, not locked: a corrupt job
	// costs reads each round, as before, never writes.
	_, writes0 = r.q.Requests()
	if j, err := r.q.TryAcquireJob(t.Context(), queue.Pending, refs[i], queue.Admission{}); j != nil || err != nil {
		t.Fatalf("unreadable job again: %v, %v; want skipped", j, err)
	}
	if _, writes = r.q.Requests(); writes != writes0 {
		t.Fatalf("%d writes for an unreadable job found again, want none", writes-writes0)
	}
	for _, want := range good {
		r.acquire(queue.Pending, want)
	}
}
