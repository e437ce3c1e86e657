package queue_test

import (
	"testing"
	"time"

	"github.com/ingestq/ingestq/reactor/queue"
)

// What the metrics and the stalled-work check read cheaply: each job's
// profile (ingestq's name or Merritt's; none for a job without a
// configuration, nothing for a job gone), when each ref was made, and who
// holds a job's lock since when, matched to the holder's host node.
func TestScanHelpers(t *testing.T) {
	r := newRun(t)
	ctx := t.Context()
	b := r.processing(true)
	ours := r.job(b, "ours", 5, map[string]any{"profile_name": "demo"})
	theirs := r.job(b, "theirs", 5, map[string]any{"profile": "merritt_demo"})
	bare := r.job(b, "bare", 5, map[string]any{})
	r.ok(r.conn.Delete(r.q.Path("/jobs/"+bare.ID+"/configuration"), -1))

	profiles, err := r.q.JobProfiles(ctx, []string{ours.ID, theirs.ID, bare.ID, "jid9999999999"})
	r.ok(err)
	want := map[string]string{ours.ID: "demo", theirs.ID: "merritt_demo", bare.ID: ""}
	if len(profiles) != len(want) {
		t.Fatalf("JobProfiles = %v, want %v (no entry for a job that is not there)", profiles, want)
	}
	for jid, p := range want {
		if got, ok := profiles[jid]; !ok || got != p {
			t.Errorf("profile of %s = %q (listed %v), want %q", jid, got, ok, p)
		}
	}

	before := time.Now().Add(-time.Minute) // ZooKeeper's clock, on this machine
	refs, _, err := r.q.Refs(ctx, queue.Pending)
	r.ok(err)
	times, err := r.q.RefTimes(ctx, queue.Pending, append(refs, "05-jid9999999999"))
	r.ok(err)
	if len(times) != 3 {
		t.Fatalf("RefTimes = %v, want the 3 refs there", times)
	}
	for ref, at := range times {
		if at.Before(before) || at.After(time.Now().Add(time.Minute)) {
			t.Errorf("ref %s made at %v, want about now", ref, at)
		}
	}

	_, q2 := r.second()
	r.ok(q2.RegisterHost(ctx, "h2", []byte(`{"name":"h2"}`)))
	locked, err := q2.LockJob(ctx, ours.ID)
	r.ok(err)
	j, err := r.q.LoadJob(ctx, ours.ID)
	r.ok(err)
	hosts, err := r.q.Hosts(ctx)
	r.ok(err)
	if !j.Locked || j.LockSession == 0 || len(hosts) != 1 || hosts[0].Session != j.LockSession {
		t.Fatalf("lock session %#x (locked %v), hosts %+v: want the lock's owner to be h2's session", j.LockSession, j.Locked, hosts)
	}
	if j.LockedAt.Before(before) {
		t.Errorf("locked at %v, want about now", j.LockedAt)
	}
	r.ok(q2.UnlockJob(ctx, locked))
	j, err = r.q.LoadJob(ctx, ours.ID)
	r.ok(err)
	if j.Locked || j.LockSession != 0 || !j.LockedAt.IsZero() {
		t.Errorf("unlocked job: locked %v, session %#x, at %v", j.Locked, j.LockSession, j.LockedAt)
	}
}
