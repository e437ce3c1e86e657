package queue_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/reactor/queue"
)

// later is a second view of r's queue whose clock is 11 minutes ahead:
// what r's test made is then older than cleanup's 10 minutes. opts are
// applied after its own (a logger of the test's replaces testLogger).
func (r *run) later(opts ...queue.Option) *queue.Queue {
	q, err := queue.New(r.conn, r.root, append([]queue.Option{queue.WithLogger(testLogger(r.t)),
		queue.WithClock(func() time.Time { return time.Now().Add(11 * time.Minute) })}, opts...)...)
	r.ok(err)
	return q
}

func (r *run) there(p string) bool {
	r.t.Helper()
	ok, _, err := r.conn.Exists(r.q.Path(p))
	r.ok(err)
	return ok
}

// What mrt-zk's Job.load writes back when it races ingestq's moves (a
// Completed job's storing and batch-processing refs), and a ref written
// back for a job Merritt then deleted: cleanup keeps them while they are
// younger than 10 minutes, lists them in a dry run, then removes them and
// nothing else, and check passes.
func TestCleanupRemovesLeftRefs(t *testing.T) {
	r := newRun(t)
	ctx := context.Background()
	b, a, c := r.twoDoneJobs()
	leftState := "/jobs/states/storing/" + a.Ref()
	leftBucket := "/batches/" + b.ID + "/states/batch-processing/" + a.ID
	r.raw(leftState, "")
	r.raw(leftBucket, "")
	r.mrtzkDelete(b.ID, c.ID)
	goneState := "/jobs/states/completed/" + c.Ref()
	goneBucket := "/batches/" + b.ID + "/states/batch-completed/" + c.ID
	r.raw(goneState, "")
	r.raw(goneBucket, "")
	if v, _, err := r.q.CheckAll(ctx, queue.CheckOptions{}); err != nil || len(v) == 0 {
		t.Fatalf("check before cleanup: %v, %v; want the left refs reported", v, err)
	}
	left := []string{goneBucket, leftBucket, goneState, leftState}
	slices.Sort(left)
	kept := []string{"/jobs/states/completed/" + a.Ref(), "/batches/" + b.ID + "/states/batch-completed/" + a.ID}
	allThere := func(when string) {
		t.Helper()
		for _, p := range append(slices.Clone(left), kept...) {
			if !r.there(p) {
				t.Fatalf("%s: %s is gone", when, p)
			}
		}
	}

	res, err := r.q.CleanupWith(ctx, queue.CleanupOptions{})
	r.ok(err)
	if len(res.LeftRefs) != 0 || res.LeftYoung != 4 {
		t.Errorf("cleanup of refs left just now: removed %v, kept %d; want none removed, 4 kept", res.LeftRefs, res.LeftYoung)
	}
	allThere("after a cleanup of young refs")

	q := r.later()
	res, err = q.CleanupWith(ctx, queue.CleanupOptions{DryRun: true})
	r.ok(err)
	allThere("after a dry run")
	var paths []string
	for _, l := range res.LeftRefs {
		paths = append(paths, l.Path)
	}
	if !slices.Equal(paths, left) {
		t.Errorf("dry run lists %v, want %v", paths, left)
	}

	res, err = q.CleanupWith(ctx, queue.CleanupOptions{})
	r.ok(err)
	if len(res.Problems) > 0 {
		t.Errorf("cleanup's problems: %v", res.Problems)
	}
	why := map[string]string{}
	for _, l := range res.LeftRefs {
		why[l.Path] = l.Why
	}
	want := map[string]string{
		leftState:  "job " + a.ID + " is Completed; its ref is in completed/",
		leftBucket: "job " + a.ID + " is Completed; its ref is in batch-completed/",
		goneState:  "job " + c.ID + " no longer exists",
		goneBucket: "job " + c.ID + " no longer exists",
	}
	for p, w := range want {
		if why[p] != w {
			t.Errorf("removed %s because %q, want %q", p, why[p], w)
		}
		if r.there(p) {
			t.Errorf("%s is still there after cleanup", p)
		}
	}
	for _, p := range kept {
		if !r.there(p) {
			t.Errorf("cleanup removed %s, the job's own ref", p)
		}
	}
	if v, _, err := r.q.CheckAll(ctx, queue.CheckOptions{}); err != nil || len(v) > 0 {
		t.Errorf("check after cleanup: %v, %v; want nothing", v, err)
	}
}

// A left ref's removal is fenced: a job whose status is written after the
// ref was found (a move by a foreign writer), or that is locked (a step
// or a move of ingestq under way), keeps it, and nothing is written.
func TestLeftRefRemovalIsFenced(t *testing.T) {
	r := newRun(t)
	ctx := context.Background()
	_, a, _ := r.twoDoneJobs()
	leftState := "/jobs/states/storing/" + a.Ref()
	r.raw(leftState, "")
	q := r.later()
	found := func() queue.LeftRef {
		t.Helper()
		res, err := q.CleanupWith(ctx, queue.CleanupOptions{DryRun: true})
		r.ok(err)
		if len(res.LeftRefs) != 1 || res.LeftRefs[0].Path != leftState {
			t.Fatalf("dry run found %v, want %s", res.LeftRefs, leftState)
		}
		return res.LeftRefs[0]
	}
	status := r.q.Path("/jobs/" + a.ID + "/status")

	l := found()
	data, _, err := r.conn.Get(status)
	r.ok(err)
	_, err = r.conn.Set(status, data, -1) // as mrt-zk's setStatus writes it
	r.ok(err)
	err = q.RemoveLeftRef(ctx, l)
	if !errors.Is(err, queue.ErrStale) || !strings.Contains(err.Error(), "left ref "+leftState+" not removed") || !strings.Contains(err.Error(), "job "+a.ID+" moved") {
		t.Errorf("removal after the job's status was written: %v, want a stale view naming the ref and the job", err)
	}
	if !r.there(leftState) {
		t.Fatalf("the ref went although the job moved")
	}

	l = found()
	lock := r.q.Path("/jobs/" + a.ID + "/lock")
	_, err = r.conn.Create(lock, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	r.ok(err)
	if err := q.RemoveLeftRef(ctx, l); !errors.Is(err, queue.ErrLocked) || !strings.Contains(err.Error(), "job "+a.ID+" is locked") {
		t.Errorf("removal while the job is locked: %v, want locked", err)
	}
	if !r.there(leftState) {
		t.Fatalf("the ref went although the job is locked")
	}
	r.ok(r.conn.Delete(lock, -1))
	r.ok(q.RemoveLeftRef(ctx, l))
	if r.there(leftState) || r.there("/jobs/"+a.ID+"/lock") {
		t.Errorf("after the removal: ref there %v, lock there %v; want neither", r.there(leftState), r.there("/jobs/"+a.ID+"/lock"))
	}
}
