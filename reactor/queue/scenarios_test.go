package queue_test

import (
	"context"
	"errors"
	"testing"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"

	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(zktest.WithShared(m)) }

// The 36 scenarios of mrt-zk's suite, as its README describes them.
var scenarios = map[string]scenario{
	"test_read_write_from_zk": func(r *run) {},
	"test_sequential_node_mapping": func(r *run) {
		for i, ph := range []string{"foo0", "foo1", "foo2"} {
			p, err := r.conn.Create(r.q.Path("/foo"), nil, zk.FlagSequence, zk.WorldACL(zk.PermAll))
			r.ok(err)
			r.name(ph, p[len(r.q.Path("/")):])
			_ = i
		}
	},
	"ephemeral_node_remaining": func(r *run) {
		_, err := r.conn.Create(r.q.Path("/foo"), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
		r.ok(err)
	},
	"ephemeral_node_destroyed": func(r *run) {
		conn2, _ := r.second()
		_, err := conn2.Create(r.q.Path("/foo"), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
		r.ok(err)
		r.closeAndWait(conn2, "/foo")
	},
	"create_batch": func(r *run) { r.batch() },
	"create_and_load_batch": func(r *run) {
		b := r.batch()
		got, err := r.q.LoadBatch(r.t.Context(), b.ID)
		r.ok(err)
		if got.ID != b.ID || got.UUID() != "bid-uuid" || got.State() != queue.Pending || got.Submission.Map()["foo"] != "bar" {
			r.t.Fatalf("loaded %+v", got)
		}
	},
	"load_non_existent_batch": func(r *run) {
		_, err := r.q.LoadBatch(r.t.Context(), "bid9999999999")
		if !errors.Is(err, queue.ErrNotFound) {
			r.t.Fatalf("load of a missing batch: %v, want ErrNotFound", err)
		}
	},
	"batch_with_lock_unlock": func(r *run) {
		b := r.batch()
		l, err := r.q.LockBatch(r.t.Context(), b.ID)
		r.ok(err)
		r.ok(r.q.UnlockBatch(r.t.Context(), l))
	},
	"batch_with_ephemeral_released_lock": func(r *run) {
		b := r.batch()
		conn2, q2 := r.second()
		_, err := q2.LockBatch(r.t.Context(), b.ID)
		r.ok(err)
		if _, err := r.q.LockBatch(r.t.Context(), b.ID); !errors.Is(err, queue.ErrLocked) {
			r.t.Fatalf("lock held by another session: %v, want ErrLocked", err)
		}
		r.closeAndWait(conn2, "/batches/"+b.ID+"/lock")
	},
	"batch_with_unreleased_lock": func(r *run) {
		b := r.batch()
		_, err := r.q.LockBatch(r.t.Context(), b.ID)
		r.ok(err)
	},
	"modify_batch_state": func(r *run) {
		b := r.batch()
		r.ok(r.q.SetBatchStatus(r.t.Context(), b, queue.Processing, queue.BatchChange{}))
	},
	"batch_acquire": func(r *run) {
		b0 := r.batch()
		b1, err := r.q.CreateBatch(r.t.Context(), queue.SubmissionOf(map[string]any{"foo": "bar2", "batchID": "bid-uuid2"}))
		r.ok(err)
		r.name("bid1", b1.ID)
		for _, want := range []string{b0.ID, b1.ID} {
			b, _, err := r.q.AcquirePendingBatch(context.Background(), nil)
			r.ok(err)
			if b == nil || b.ID != want {
				r.t.Fatalf("acquired %v, want %s", b, want)
			}
			r.ok(r.q.SetBatchStatus(r.t.Context(), b, queue.Processing, queue.BatchChange{}))
		}
		if b, _, err := r.q.AcquirePendingBatch(context.Background(), nil); err != nil || b != nil {
			r.t.Fatalf("third acquire: %v %v, want none", b, err)
		}
	},
	"create_job": func(r *run) {
		b := r.processing(false)
		r.job(b, "jid0", 5, map[string]any{"job": "quack"})
	},
	"create_job_state_change": func(r *run) {
		b := r.processing(false)
		j := r.job(b, "jid0", 5, map[string]any{"job": "quack"})
		r.ok(r.q.SetJobStatus(r.t.Context(), j, queue.Estimating, queue.JobChange{}))
	},
	"load_job_state_change": func(r *run) {
		b := r.processing(false)
		j := r.job(b, "jid0", 5, map[string]any{"job": "quack"})
		j, err := r.q.LoadJob(r.t.Context(), j.ID)
		r.ok(err)
		r.ok(r.q.SetJobStatus(r.t.Context(), j, queue.Estimating, queue.JobChange{}))
	},
	"acquire_pending_job": func(r *run) {
		b := r.processing(true)
		j0 := r.job(b, "jid0", 5, map[string]any{"job": "quack"})
		j := r.acquire(queue.Pending, j0.ID)
		if j2, err := r.q.AcquireJob(r.t.Context(), queue.Pending); err != nil || j2 != nil {
			r.t.Fatalf("second acquire: %v %v, want none", j2, err)
		}
		r.ok(r.q.SetJobStatus(r.t.Context(), j, queue.Estimating, queue.JobChange{}))
	},
	"acquire_lowest_priority_job": func(r *run) {
		j1 := r.threeJobs()
		j := r.acquire(queue.Pending, j1.ID)
		if j.Ref() != "02-"+j1.ID {
			r.t.Fatalf("acquired ref %s, want 02-%s", j.Ref(), j1.ID)
		}
		r.ok(r.q.SetJobStatus(r.t.Context(), j, queue.Estimating, queue.JobChange{}))
	},
	"job_happy_path":             func(r *run) { r.jobHappyPath() },
	"batch_happy_path":           func(r *run) { r.batchHappyPath() },
	"batch_failure":              func(r *run) { r.batchFailure(true) },
	"batch_recovery":             batchRecovery,
	"job_happy_path_with_delete": jobHappyPathWithDelete,
	"batch_happy_path_with_delete": func(r *run) {
		b := r.batchHappyPath()
		r.ok(r.q.DeleteBatch(r.t.Context(), b.ID))
	},
	"batch_happy_path_with_delete_completed": func(r *run) {
		b := r.batchHappyPath()
		removed, problems, err := r.q.Cleanup(r.t.Context())
		r.ok(err)
		if len(removed) != 1 || removed[0] != b.ID || len(problems) != 0 {
			r.t.Fatalf("cleanup removed %v (problems %v), want [%s]", removed, problems, b.ID)
		}
	},
	"job_create_config":                func(r *run) { r.configJob(false, false) },
	"job_create_config_ident":          func(r *run) { r.configJob(true, false) },
	"job_create_config_ident_metadata": func(r *run) { r.configJob(true, true) },
	"lock_ingest":                      func(r *run) { r.holdProtocol(queue.QueueIngest) },
	"lock_access": func(r *run) {
		r.holdProtocol(queue.QueueAccessLarge)
		r.holdProtocol(queue.QueueAccessSmall)
	},
	"lock_collection": func(r *run) {
		for _, c := range []string{"foo", "bar"} {
			ok, err := r.q.HoldCollection(r.t.Context(), c)
			r.ok(err)
			held, err := r.q.CollectionHeld(r.t.Context(), c)
			r.ok(err)
			if !ok || !held {
				r.t.Fatalf("hold collection %s: %v, held %v", c, ok, held)
			}
		}
	},
	"lock_store":     func(r *run) { r.objectLocks(r.q.LockStorage) },
	"lock_inventory": func(r *run) { r.objectLocks(r.q.LockInventory) },
	"access_happy_path": func(r *run) {
		a := r.access()
		r.ok(r.q.MoveAccess(r.t.Context(), a, queue.Completed, "", nil))
	},
	"access_happy_path_del": func(r *run) {
		a := r.access()
		r.ok(r.q.MoveAccess(r.t.Context(), a, queue.Completed, "", nil))
		r.ok(r.q.DeleteAccess(r.t.Context(), a))
	},
	"access_fail_path": func(r *run) {
		a := r.access()
		r.ok(r.q.MoveAccess(r.t.Context(), a, queue.Failed, "", nil))
		r.ok(r.q.MoveAccess(r.t.Context(), a, queue.Deleted, "", nil))
	},
	"find_batch_by_uuid": func(r *run) {
		b := r.batch()
		got, err := r.q.FindBatch(r.t.Context(), "bid-uuid")
		r.ok(err)
		if got.ID != b.ID {
			r.t.Fatalf("found %s, want %s", got.ID, b.ID)
		}
		for _, id := range []string{"no-such-uuid", "", ".", "..", "a/b", "a\x00b"} {
			if _, err := r.q.FindBatch(r.t.Context(), id); !errors.Is(err, queue.ErrNotFound) {
				r.t.Fatalf("uuid %q: %v, want ErrNotFound", id, err)
			}
		}
	},
}

// batch creates bid0 with the default submission.
func (r *run) batch() *queue.Batch {
	b, err := r.q.CreateBatch(r.t.Context(), queue.SubmissionOf(map[string]any{"foo": "bar", "batchID": "bid-uuid"}))
	r.ok(err)
	r.name("bid0", b.ID)
	return b
}

// acquiredBatch creates bid0 and acquires it: Pending, locked by r.q.
func (r *run) acquiredBatch() *queue.Batch {
	r.batch()
	b, _, err := r.q.AcquirePendingBatch(r.t.Context(), nil)
	r.ok(err)
	return b
}

// processing creates bid0, acquires it and moves it to Processing; the lock
// is released unless keep.
func (r *run) processing(release bool) *queue.Batch {
	b := r.acquiredBatch()
	r.ok(r.q.SetBatchStatus(r.t.Context(), b, queue.Processing, queue.BatchChange{Release: release}))
	return b
}

func (r *run) job(b *queue.Batch, ph string, prio int, config map[string]any) *queue.Job {
	j, err := r.q.CreateJob(r.t.Context(), b, queue.JobSpec{Priority: prio, Config: queue.JobConfigOf(config)})
	r.ok(err)
	r.name(ph, j.ID)
	return j
}

func (r *run) acquire(s queue.State, want string) *queue.Job {
	r.t.Helper()
	j, err := r.q.AcquireJob(r.t.Context(), s)
	r.ok(err)
	if j == nil || j.ID != want {
		r.t.Fatalf("acquire %s: got %v, want %s", s, j, want)
	}
	return j
}

// threeJobs makes quack1..3 and re-files the middle one at priority 2.
func (r *run) threeJobs() *queue.Job {
	b := r.processing(true)
	r.job(b, "jid0", 5, map[string]any{"job": "quack1"})
	j1 := r.job(b, "jid1", 5, map[string]any{"job": "quack2"})
	r.job(b, "jid2", 5, map[string]any{"job": "quack3"})
	two := 2
	r.ok(r.q.UpdateJob(r.t.Context(), j1, queue.JobChange{Priority: &two}))
	return j1
}

// pipeline takes a Pending job through every step to Notify, then ends
// it with last (Completed, or Failed with a message). With manifests it
// writes store at Processing and inventory at Storing.
func (r *run) pipeline(jid string, last queue.State, message string, manifests bool) {
	j := r.acquire(queue.Pending, jid)
	r.ok(r.q.SetJobStatus(r.t.Context(), j, queue.Estimating, queue.JobChange{Release: true}))
	for _, s := range []queue.State{queue.Estimating, queue.Provisioning, queue.Downloading,
		queue.Processing, queue.Storing, queue.Recording, queue.Notify} {
		j := r.acquire(s, jid)
		next, _ := queue.JobMachine.Success(s)
		c := queue.JobChange{Release: true}
		switch {
		case s == queue.Processing && manifests:
			empty := ""
			c.Store = &queue.StepManifest{ManifestURL: "http://ingest.manifest.url", Mode: "add", Delete: &empty}
		case s == queue.Storing && manifests:
			c.Inventory = &queue.StepManifest{ManifestURL: "http://storage.manifest.url", Mode: "tbd"}
		case s == queue.Notify:
			next, c.Message = last, message
		}
		r.ok(r.q.SetJobStatus(r.t.Context(), j, next, c))
	}
}

func (r *run) counts(want map[queue.State]int) {
	r.t.Helper()
	for s, n := range want {
		refs, _, err := r.q.Refs(r.t.Context(), s)
		r.ok(err)
		if len(refs) != n {
			r.t.Fatalf("%d jobs in %s, want %d", len(refs), s, n)
		}
	}
}

func (r *run) jobHappyPath() *queue.Job {
	j1 := r.threeJobs()
	r.counts(map[queue.State]int{queue.Pending: 3, queue.Completed: 0})
	r.pipeline(j1.ID, queue.Completed, "", true)
	r.counts(map[queue.State]int{queue.Pending: 2, queue.Notify: 0, queue.Completed: 1})
	return j1
}

func jobHappyPathWithDelete(r *run) {
	j1 := r.jobHappyPath()
	jobs, _, err := r.q.ListJobs(r.t.Context(), queue.Pending)
	r.ok(err)
	if _, _, err := r.q.DeleteJob(r.t.Context(), jobs[0].ID, false); !errors.Is(err, queue.ErrRefused) {
		r.t.Fatalf("delete of a Pending job: %v, want ErrRefused", err)
	}
	removed, _, err := r.q.DeleteJob(r.t.Context(), j1.ID, true) // mrt-zk's delete removes it
	r.ok(err)
	if !removed {
		r.t.Fatal("a Completed job was not removed")
	}
}

// oneJob is bid0 in Processing, unlocked, with one job of priority 2 (jid1).
func (r *run) oneJob() (*queue.Batch, *queue.Job) {
	b := r.processing(true)
	return b, r.job(b, "jid1", 2, map[string]any{"job": "quack2"})
}

func (r *run) noReport() {
	r.t.Helper()
	if b, _, err := r.q.AcquireCompletedBatch(context.Background(), nil, nil); err != nil || b != nil {
		r.t.Fatalf("batch acquirable for reporting too early: %v %v", b, err)
	}
}

func (r *run) report(want string) *queue.Batch {
	r.t.Helper()
	b, _, err := r.q.AcquireCompletedBatch(context.Background(), nil, nil)
	r.ok(err)
	if b == nil || b.ID != want {
		r.t.Fatalf("acquire for reporting: %v, want %s", b, want)
	}
	return b
}

func (r *run) batchHappyPath() *queue.Batch {
	b, j := r.oneJob()
	r.noReport()
	r.pipeline(j.ID, queue.Completed, "", false)
	rb := r.report(b.ID)
	r.ok(r.q.SetBatchStatus(r.t.Context(), rb, queue.Completed, queue.BatchChange{Release: true}))
	r.noReport()
	return b
}

func (r *run) batchFailure(deleteAll bool) (*queue.Batch, *queue.Job) {
	b, j := r.oneJob()
	r.noReport()
	r.pipeline(j.ID, queue.Failed, "Sample Failure Message", false)
	rb := r.report(b.ID)
	r.ok(r.q.SetBatchStatus(r.t.Context(), rb, queue.Failed, queue.BatchChange{Release: true}))
	if !deleteAll {
		return b, j
	}
	removed, _, err := r.q.DeleteJob(r.t.Context(), j.ID, false)
	r.ok(err)
	if removed {
		r.t.Fatal("a Failed job was removed, want it moved to Deleted")
	}
	lb, err := r.q.LockBatch(r.t.Context(), b.ID)
	r.ok(err)
	r.ok(r.q.SetBatchStatus(r.t.Context(), lb, queue.Deleted, queue.BatchChange{Release: true}))
	return b, j
}

func batchRecovery(r *run) {
	b, j := r.batchFailure(false)
	to, err := r.q.RequeueJob(r.t.Context(), j.ID, "")
	r.ok(err)
	if to != queue.Notify {
		r.t.Fatalf("requeued to %s, want Notify", to)
	}
	nj := r.acquire(queue.Notify, j.ID)
	r.ok(r.q.SetJobStatus(r.t.Context(), nj, queue.Completed, queue.JobChange{Release: true}))
	r.noReport() // a Failed batch is not reported again until an admin asks
	r.ok(second(r.q.ReportBatch(r.t.Context(), b.ID)))
	rb := r.report(b.ID)
	if rb.State() != queue.UpdateReporting {
		r.t.Fatalf("batch is %s, want UpdateReporting", rb.State())
	}
	r.ok(r.q.SetBatchStatus(r.t.Context(), rb, queue.Completed, queue.BatchChange{Release: true}))
}

func (r *run) configJob(ident, meta bool) {
	b := r.processing(true)
	spec := queue.JobSpec{Priority: queue.DefaultPriority, Config: queue.JobConfigOf(map[string]any{
		"profile_name": "a", "submitter": "b", "payload_url": "c", "payload_type": "d", "response_type": "e"})}
	if ident {
		spec.Identifiers = &queue.Identifiers{PrimaryID: "f", LocalIDs: queue.SplitLocalIDs("g;h")}
	}
	if meta {
		spec.Metadata = &queue.Metadata{Who: "i", What: "j", When: "k", Where: "l"}
	}
	j, err := r.q.CreateJob(r.t.Context(), b, spec)
	r.ok(err)
	r.name("jid0", j.ID)
}

func (r *run) holdProtocol(name string) {
	r.t.Helper()
	step := func(what string, got bool, err error, want bool) {
		r.t.Helper()
		r.ok(err)
		if got != want {
			r.t.Fatalf("%s %s: %v, want %v", what, name, got, want)
		}
	}
	ok, err := r.q.ReleaseQueue(r.t.Context(), name)
	step("release (none)", ok, err, false)
	ok, err = r.q.QueueHeld(r.t.Context(), name)
	step("held", ok, err, false)
	ok, err = r.q.HoldQueue(r.t.Context(), name)
	step("hold", ok, err, true)
	ok, err = r.q.QueueHeld(r.t.Context(), name)
	step("held", ok, err, true)
	ok, err = r.q.HoldQueue(r.t.Context(), name)
	step("hold again", ok, err, false)
	ok, err = r.q.ReleaseQueue(r.t.Context(), name)
	step("release", ok, err, true)
	ok, err = r.q.HoldQueue(r.t.Context(), name)
	step("hold", ok, err, true)
}

// objectLocks takes each lock twice, for no job: mrt-zk's lock calls name
// none, and leave the node empty (ingestq's daemon writes its job's id).
func (r *run) objectLocks(lock func(ctx context.Context, ark, jid string) (bool, error)) {
	for _, ark := range []string{"ark:/aaa/111", "ark:/bbb/222"} {
		ok, err := lock(r.t.Context(), ark, "")
		r.ok(err)
		again, err := lock(r.t.Context(), ark, "")
		r.ok(err)
		if !ok || again {
			r.t.Fatalf("lock %s: first %v, second %v; want true, false", ark, ok, again)
		}
	}
}

func (r *run) access() *queue.Access {
	a, err := r.q.CreateAccess(r.t.Context(), queue.AccessSmall, map[string]any{"token": "abc"})
	r.ok(err)
	r.name("qid0", a.ID)
	got, err := r.q.AcquireAccess(r.t.Context(), queue.AccessSmall)
	r.ok(err)
	if got == nil || got.ID != a.ID {
		r.t.Fatalf("acquire access: %v, want %s", got, a.ID)
	}
	if again, err := r.q.AcquireAccess(r.t.Context(), queue.AccessSmall); err != nil || again != nil {
		r.t.Fatalf("second acquire: %v %v, want none", again, err)
	}
	r.ok(r.q.MoveAccess(r.t.Context(), got, queue.Processing, "", nil))
	return got
}
