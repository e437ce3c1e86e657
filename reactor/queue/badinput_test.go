package queue_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/reactor/queue"
)

// raw writes a node as a foreign or broken writer would.
func (r *run) raw(p string, data string) {
	r.t.Helper()
	parts := strings.Split(p, "/")
	for i := 2; i < len(parts); i++ {
		_, err := r.conn.Create(r.q.Path(strings.Join(parts[:i], "/")), nil, 0, zk.WorldACL(zk.PermAll))
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			r.ok(err)
		}
	}
	_, err := r.conn.Create(r.q.Path(p), []byte(data), 0, zk.WorldACL(zk.PermAll))
	if errors.Is(err, zk.ErrNodeExists) {
		_, err = r.conn.Set(r.q.Path(p), []byte(data), -1)
	}
	r.ok(err)
}

// twoGoodOneBad makes three Pending jobs and lets spoil break the middle one.
func (r *run) twoGoodOneBad(spoil func(jid string)) (good []string, bad string) {
	b := r.processing(true)
	var ids []string
	for i := range 3 {
		j, err := r.q.CreateJob(r.t.Context(), b, queue.JobSpec{Priority: 5, Config: queue.JobConfigOf(map[string]any{"n": i})})
		r.ok(err)
		ids = append(ids, j.ID)
	}
	spoil(ids[1])
	return []string{ids[0], ids[2]}, ids[1]
}

// wantRestWorks shows the queue still lists and runs every good job.
func (r *run) wantRestWorks(good []string, problemHas string) {
	r.t.Helper()
	jobs, problems, err := r.q.ListJobs(r.t.Context(), queue.Pending)
	r.ok(err)
	if len(jobs) != len(good) {
		r.t.Fatalf("listed %d jobs, want %d", len(jobs), len(good))
	}
	if len(problems) != 1 || !strings.Contains(problems[0].Error(), problemHas) {
		r.t.Fatalf("problems %v, want one naming %q", problems, problemHas)
	}
	for _, want := range good {
		j := r.acquire(queue.Pending, want)
		r.ok(r.q.SetJobStatus(r.t.Context(), j, queue.Estimating, queue.JobChange{Release: true}))
	}
	if j, err := r.q.AcquireJob(r.t.Context(), queue.Pending); err != nil || j != nil {
		r.t.Fatalf("after the good jobs: %v %v, want none", j, err)
	}
}

func TestCorruptStatusIsSkipped(t *testing.T) {
	r := newRun(t)
	var badPath string
	good, _ := r.twoGoodOneBad(func(jid string) {
		badPath = "/jobs/" + jid + "/status"
		r.raw(badPath, `{"status": "Pending", `)
	})
	r.wantRestWorks(good, badPath+": bad JSON")
	vs, err := r.q.Check(t.Context())
	r.ok(err)
	if len(vs) != 1 || vs[0].Path != "/jobs/"+path2jid(badPath) || !strings.Contains(vs[0].Problem, "bad JSON") {
		t.Fatalf("check: %v, want the corrupt status", vs)
	}
}

func path2jid(p string) string { return strings.Split(p, "/")[2] }

func TestUnknownStateIsSkipped(t *testing.T) {
	r := newRun(t)
	var bad string
	good, _ := r.twoGoodOneBad(func(jid string) {
		bad = jid
		r.raw("/jobs/"+jid+"/status", `{"status": "Bogus", "message": ""}`)
	})
	r.wantRestWorks(good, `/jobs/`+bad+`/status: unknown job state "Bogus"`)
	_, err := r.q.LoadJob(t.Context(), bad)
	if !errors.Is(err, queue.ErrCorrupt) {
		t.Fatalf("load: %v, want ErrCorrupt", err)
	}
}

func TestPriorityOutOfRange(t *testing.T) {
	r := newRun(t)
	var bad string
	good, _ := r.twoGoodOneBad(func(jid string) {
		bad = jid
		r.raw("/jobs/"+jid+"/priority", "120")
	})
	bid := r.q.Path("")
	if j, err := r.q.LoadJob(t.Context(), good[0]); err == nil {
		bid = j.BatchID
	}
	for _, p := range []int{-1, 100} {
		_, err := r.q.CreateJob(t.Context(), &queue.Batch{ID: bid}, queue.JobSpec{Priority: p})
		if err == nil || !strings.Contains(err.Error(), "outside 0..99") {
			t.Errorf("create with priority %d: %v", p, err)
		}
	}
	r.wantRestWorks(good, "/jobs/"+bad+"/priority: priority 120 is outside 0..99")
	j, err := r.q.LoadJob(t.Context(), good[0])
	r.ok(err)
	p := 250
	if err := r.q.UpdateJob(t.Context(), j, queue.JobChange{Priority: &p}); err == nil || !strings.Contains(err.Error(), "outside 0..99") {
		t.Errorf("update to 250: %v", err)
	}
	// Nothing was created for the refused jobs.
	ids, err := r.q.JobIDs(t.Context())
	r.ok(err)
	if len(ids) != 3 {
		t.Errorf("%d job nodes, want 3", len(ids))
	}
}

func TestRefWithoutJob(t *testing.T) {
	r := newRun(t)
	good, _ := r.twoGoodOneBad(func(string) {})
	r.raw("/jobs/states/pending/00-jid0000099999", "") // sorts first
	r.raw("/jobs/states/pending/not-a-ref", "")
	vs, err := r.q.Check(t.Context())
	r.ok(err)
	if len(vs) != 2 || vs[0].Path != "/jobs/states/pending/00-jid0000099999" || vs[0].Problem != "ref without a job" ||
		vs[1].Path != "/jobs/states/pending/not-a-ref" {
		t.Fatalf("check: %v", vs)
	}
	refs, problems, err := r.q.Refs(t.Context(), queue.Pending)
	r.ok(err)
	if len(refs) != 4 || len(problems) != 1 {
		t.Fatalf("refs %v problems %v", refs, problems)
	}
	// All three real jobs still run.
	_ = good
	jobs, problems, err := r.q.ListJobs(t.Context(), queue.Pending)
	r.ok(err)
	if len(jobs) != 3 || len(problems) != 2 || problems[1].Error() != "/jobs/states/pending/00-jid0000099999: ref without a job" {
		t.Fatalf("listed %d jobs with problems %v; want 3 jobs and 2 problems", len(jobs), problems)
	}
	if _, err := r.q.Tree(t.Context(), "/jobs/jid0000099999"); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("tree of a missing node: %v, want ErrNotFound", err)
	}
	for range 3 {
		j, err := r.q.AcquireJob(t.Context(), queue.Pending)
		r.ok(err)
		if j == nil {
			t.Fatal("a real job was not acquired past the dangling ref")
		}
		r.ok(r.q.SetJobStatus(t.Context(), j, queue.Estimating, queue.JobChange{Release: true}))
	}
}

func TestCorruptBatchDoesNotStopOthers(t *testing.T) {
	r := newRun(t)
	bad, err := r.q.CreateBatch(t.Context(), queue.SubmissionOf(map[string]any{"n": 1}))
	r.ok(err)
	good, err := r.q.CreateBatch(t.Context(), queue.SubmissionOf(map[string]any{"n": 2}))
	r.ok(err)
	r.raw("/batches/"+bad.ID+"/status", "not json")
	batches, problems, err := r.q.ListBatches(t.Context())
	r.ok(err)
	if len(batches) != 1 || len(problems) != 1 || !strings.Contains(problems[0].Error(), "/batches/"+bad.ID+"/status: bad JSON") {
		t.Fatalf("listed %d, problems %v", len(batches), problems)
	}
	b, _, err := r.q.AcquirePendingBatch(context.Background(), nil)
	r.ok(err)
	if b == nil || b.ID != good.ID {
		t.Fatalf("acquired %v, want %s", b, good.ID)
	}
}

// A tree written by another library: a status without the fields ingestq
// adds, and a ref filed under another priority than the priority node says.
func TestForeignTree(t *testing.T) {
	r := newRun(t)
	b := r.processing(true)
	r.raw("/jobs/jid0000000042/bid", b.ID)
	r.raw("/jobs/jid0000000042/priority", "2")
	r.raw("/jobs/jid0000000042/configuration", `{"profile_name":"merritt_demo"}`)
	r.raw("/jobs/jid0000000042/status", `{"status":"Pending","last_modified":"2024-01-02 03:04:05 -0800"}`)
	r.raw("/jobs/states/pending/05-jid0000000042", "")
	r.raw("/batches/"+b.ID+"/states/batch-processing/jid0000000042", "")
	j := r.acquire(queue.Pending, "jid0000000042")
	if j.Profile() != "merritt_demo" || j.Priority != 2 || j.Status.LastSuccessfulStatus != nil {
		t.Fatalf("read %+v", j)
	}
	r.ok(r.q.SetJobStatus(t.Context(), j, queue.Estimating, queue.JobChange{Release: true}))
	vs, err := r.q.Check(t.Context())
	r.ok(err)
	if len(vs) != 0 {
		t.Fatalf("after the move: %v", vs)
	}
	refs, _, err := r.q.Refs(t.Context(), queue.Pending)
	r.ok(err)
	if len(refs) != 0 {
		t.Fatalf("old ref left behind: %v", refs)
	}
}

// The checker finds each kind of breach a non-atomic writer can leave.
func TestCheckFindsBreaches(t *testing.T) {
	r := newRun(t)
	b := r.processing(true)
	mk := func() string {
		j, err := r.q.CreateJob(t.Context(), b, queue.JobSpec{Priority: 5})
		r.ok(err)
		return j.ID
	}
	twoRefs, noRef, wrongBucket, noBucket := mk(), mk(), mk(), mk()
	r.raw("/jobs/states/estimating/05-"+twoRefs, "")
	r.ok(r.conn.Delete(r.q.Path("/jobs/states/pending/05-"+noRef), -1))
	r.ok(r.conn.Delete(r.q.Path("/batches/"+b.ID+"/states/batch-processing/"+wrongBucket), -1))
	r.raw("/batches/"+b.ID+"/states/batch-failed/"+wrongBucket, "")
	r.ok(r.conn.Delete(r.q.Path("/batches/"+b.ID+"/states/batch-processing/"+noBucket), -1))
	vs, err := r.q.Check(t.Context())
	r.ok(err)
	want := map[string]string{
		twoRefs:     "listed in 2 state folders",
		noRef:       "no ref in any /jobs/states folder",
		wrongBucket: "in bucket " + b.ID + "/batch-failed (want " + b.ID + "/batch-processing)",
		noBucket:    "in no bucket of its batch",
	}
	if len(vs) != len(want) {
		t.Fatalf("check found %d breaches, want %d: %v", len(vs), len(want), vs)
	}
	for _, v := range vs {
		if !strings.Contains(v.Problem, want[path2jid(v.Path+"/")]) {
			t.Errorf("%s: %q, want %q", v.Path, v.Problem, want[path2jid(v.Path+"/")])
		}
	}
}
