package handlers_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// A job another program ends loses its working folder on this host at
// once, while the daemon runs: one a Merritt worker takes at Recording and
// completes as mrt-zk does (lock, status, the job's state ref, its batch
// ref, unlock), and one an operator deletes with mrt-zk's tools (its refs,
// then its nodes). The words of show and of the API's detail (ops.WorkGone,
// ops.Removed) then say what is there. Before, both folders stayed until
// the daemon's next start, while show said the first was removed.
func TestWorkingFolderGoesWhenAnotherProgramEndsTheJob(t *testing.T) {
	t.Parallel()
	logs := &logtest.Buffer{}
	// This daemon does not work Recording: the jobs wait there, their
	// folders in place, for the foreign worker.
	r, recording := newRigWithout(t, queue.Recording, 2, withLogs(t, logs))
	b, _ := r.submitBatch("ended", []object{{"a.txt": []byte("alpha\n")}, {"b.txt": []byte("bravo\n")}})
	jids := r.arrivals(b, recording, queue.Recording, 2)
	folder := func(jid string) string { return filepath.Join(r.data, "work", jid) }
	for _, jid := range jids {
		if _, err := os.Stat(folder(jid)); err != nil {
			t.Fatalf("job %s in Recording has no working folder here: %v", jid, err)
		}
	}

	ctx := t.Context()
	conn := zktest.Connect(t)
	path := func(p string) string { return r.q.Path(p) }
	completed, deleted := jids[0], jids[1]

	// The Merritt worker completes the first.
	j, err := r.q.LockJob(ctx, completed)
	r.ok(err)
	status := fmt.Sprintf(`{"status":"Completed","last_modified":%q,"message":"","last_successful_status":"Recording","retry_count":0}`,
		time.Now().Format(queue.TimeLayout))
	_, err = conn.Set(path("/jobs/"+completed+"/status"), []byte(status), -1)
	r.ok(err)
	r.ok(conn.Delete(path("/jobs/states/recording/"+j.Ref()), -1))
	_, err = conn.Create(path("/jobs/states/completed/"+j.Ref()), nil, 0, zk.WorldACL(zk.PermAll))
	r.ok(err)
	r.ok(conn.Delete(path("/batches/"+b.ID+"/states/batch-processing/"+completed), -1))
	if _, err := conn.Create(path("/batches/"+b.ID+"/states/batch-completed"), nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		t.Fatal(err)
	}
	_, err = conn.Create(path("/batches/"+b.ID+"/states/batch-completed/"+completed), nil, 0, zk.WorldACL(zk.PermAll))
	r.ok(err)
	r.ok(r.q.UnlockJob(ctx, j))

	// The operator deletes the second.
	g, err := r.q.LoadJob(ctx, deleted)
	r.ok(err)
	r.ok(conn.Delete(path("/jobs/states/recording/"+g.Ref()), -1))
	r.ok(conn.Delete(path("/batches/"+b.ID+"/states/batch-processing/"+deleted), -1))
	kids, _, err := conn.Children(path("/jobs/" + deleted))
	r.ok(err)
	for _, k := range kids {
		r.ok(conn.Delete(path("/jobs/"+deleted+"/"+k), -1))
	}
	r.ok(conn.Delete(path("/jobs/"+deleted), -1))

	for _, jid := range jids {
		logs.WaitFor(t, "working folder removed", "job="+jid)
		if _, err := os.Stat(folder(jid)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("job %s ended by another program: its working folder is still here (%v)", jid, err)
		}
	}
	done, err := r.q.LoadJob(ctx, completed)
	r.ok(err)
	if got := ops.Removed(done); !slices.Contains(got, "configuration.working_dir") {
		t.Errorf("the completed job's removed %q, want configuration.working_dir in it", got)
	}
	if got := ops.WorkGone(done); !strings.Contains(got, "by the daemon on test") {
		t.Errorf("show of the completed job says its working folder is %q, want it to name the daemon on test", got)
	}
}

// The folder Estimating makes on its host (the object manifest's copy)
// goes when the job ends, though another host downloaded the job and ended
// it. Before, it stayed until this daemon's next start: a walk-through's
// three hosts, all running every state, kept 8 to 20 such folders each
// after 120 jobs ("removed working folders no job needs folders=20" at
// the restart).
func TestEstimatingHostsFolderGoesWhenTheJobEndsElsewhere(t *testing.T) {
	t.Parallel()
	logs := &logtest.Buffer{}
	// This daemon estimates and provisions; the job waits in Downloading,
	// as it does for the host that takes it there.
	r, downloading := newRigWithout(t, queue.Downloading, 1, withLogs(t, logs))
	b, _ := r.submitBatch("estimated", []object{{"a.txt": []byte("alpha\n")}})
	jid := r.arrivals(b, downloading, queue.Downloading, 1)[0]
	folder := filepath.Join(r.data, "work", jid)
	if _, err := os.Stat(folder); err != nil {
		t.Fatalf("job %s in Downloading has no folder of Estimating's here: %v", jid, err)
	}
	// The host that downloads it fails it; an operator deletes it.
	ctx := t.Context()
	r.ok(r.q.FailJob(ctx, jid, "", false))
	_, _, err := r.q.DeleteJob(ctx, jid, false)
	r.ok(err)
	logs.WaitFor(t, "working folder removed", "job="+jid)
	if _, err := os.Stat(folder); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("job %s ended elsewhere: the folder Estimating made here is still here (%v)", jid, err)
	}
}

// A job whose working folder is lost after Downloading (the working disk
// replaced, a ZooKeeper restored to before Notify removed the folder) runs
// its earlier steps again on this host at its next step, as a job taken
// over from a dead host does, and completes with one version. Before, the
// step failed the job: "the object has no files" in Processing, "storage
// manifest: …" in Storing, and a requeue failed it again.
func TestLostWorkingFolderIsMadeAgain(t *testing.T) {
	t.Parallel()
	for _, state := range []queue.State{queue.Processing, queue.Storing, queue.Recording} {
		t.Run(string(state), func(t *testing.T) {
			t.Parallel()
			var lost sync.Once
			r := newRig(t, nil, beforeStep(state, func(j *queue.Job) {
				lost.Do(func() {
					if j.Config.WorkingDir == "" {
						t.Error("no working folder recorded")
					}
					if err := os.RemoveAll(j.Config.WorkingDir); err != nil {
						t.Error(err)
					}
				})
			}))
			obj := object{"a.txt": []byte("kept through a lost working folder\n")}
			j := r.deposit("/lost.checkm", obj)
			ark := r.checkStored(j, obj)
			if v, err := r.p.Primary().Latest(t.Context(), ark); err != nil || v.Number != 1 {
				t.Errorf("%s: version %d (%v); want one version", ark, v.Number, err)
			}
		})
	}
}

// A job past Processing whose storage manifest does not read, or whose
// identifiers node a foreign writer emptied, fails saying how to run
// Processing again, and doing so (its working folder removed, a requeue)
// completes it under the ARK it minted, with one version. At Notify the
// object is stored and recorded and no earlier step runs again, so the
// message says so and sends no one to a requeue: one failed the job again
// with the same words.
func TestUnusableProcessingSaysHowToRunItAgain(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		state queue.State
		says  string
		spoil func(r *rig, j *queue.Job) error
	}{
		{"storage manifest", queue.Storing, "storage manifest: ", func(_ *rig, j *queue.Job) error {
			return os.WriteFile(filepath.Join(j.Config.WorkingDir, "storage-manifest.checkm"), []byte("not a manifest\n"), 0o644)
		}},
		{"identifiers", queue.Recording, "no primary identifier past Processing: ", emptyIdentifiers},
		{"identifiers at Notify", queue.Notify, "no primary identifier at Notify: the object is stored and recorded", emptyIdentifiers},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var once sync.Once
			var r *rig
			r = newRig(t, nil, beforeStep(c.state, func(j *queue.Job) {
				once.Do(func() {
					if err := c.spoil(r, j); err != nil {
						t.Error(err)
					}
				})
			}))
			obj := object{"a.txt": []byte("processed again\n")}
			j := r.deposit("/again.checkm", obj)
			msg := j.Status.Message
			if j.State() != queue.Failed || !strings.Contains(msg, c.says) {
				t.Fatalf("job %s %q; want Failed saying %q", j.State(), msg, c.says)
			}
			advice := "to run Processing again, remove the job's working folder " + j.Config.WorkingDir + ", then `ingestq requeue " + j.ID + "`"
			if c.state == queue.Notify {
				if strings.Contains(msg, "`ingestq requeue") {
					t.Errorf("at Notify the message %q sends the operator to a requeue, which runs Notify alone", msg)
				}
				return
			}
			if !strings.Contains(msg, advice) {
				t.Fatalf("message %q does not say %q", msg, advice)
			}
			minted := r.mintedARK(j.ID)
			if err := os.RemoveAll(j.Config.WorkingDir); err != nil {
				t.Fatal(err)
			}
			r.ingestq("requeue", j.ID)
			r.ingestq("report", j.BatchID)
			if b := r.waitBatch(j.BatchID, queue.Completed, queue.Failed); b.State() != queue.Completed {
				t.Fatalf("after the advice: batch %s (%s), want Completed", b.State(), b.Status.Message)
			}
			j, err := r.q.LoadJob(t.Context(), j.ID)
			if err != nil {
				t.Fatal(err)
			}
			if ark := r.checkStored(j, obj); ark != minted {
				t.Errorf("stored as %s; want %s, the ARK the job minted", ark, minted)
			}
			if v, err := r.p.Primary().Latest(t.Context(), minted); err != nil || v.Number != 1 {
				t.Errorf("%s: version %d (%v); want one version", minted, v.Number, err)
			}
		})
	}
}

// newRigWithout is a rig (with opts) whose daemon does not work state s,
// and the jids of the jobs that arrive there (room for n), where they wait
// for another worker.
func newRigWithout(t *testing.T, s queue.State, n int, opts ...rigOption) (*rig, <-chan string) {
	t.Helper()
	r := newRig(t, nil, append(opts, func(_ *handlers.Config, rc *reactor.Config) {
		rc.Roles = slices.DeleteFunc(reactor.AllRoles(), func(x reactor.Role) bool { return x == reactor.JobRole(s) })
	})...)
	arrived := make(chan string, n)
	if _, err := r.bus.Subscribe("ingestq.job."+strings.ToLower(string(s))+".*", func(e events.Event) { arrived <- e.JobID }); err != nil {
		t.Fatal(err)
	}
	return r, arrived
}

// arrivals waits for n jobs of batch b to arrive in state s.
func (r *rig) arrivals(b *queue.Batch, arrived <-chan string, s queue.State, n int) []string {
	r.t.Helper()
	var jids []string
	for range n {
		select {
		case jid := <-arrived:
			jids = append(jids, jid)
		case <-time.After(2 * time.Minute):
			r.dump()
			r.t.Fatalf("jobs of batch %s in %s: %v, want %d", b.ID, s, jids, n)
		}
	}
	return jids
}

// emptyIdentifiers writes j's identifiers node as a foreign writer that
// lost its primary_id would, and drops them from the job the step reads.
func emptyIdentifiers(r *rig, j *queue.Job) error {
	_, err := r.qs.Conn.Set(r.q.Path("/jobs/"+j.ID+"/identifiers"), []byte(`{"primary_id":"","local_id":[]}`), -1)
	j.Identifiers = nil
	return err
}

// mintedARK is the ARK the minter's record gives job jid.
func (r *rig) mintedARK(jid string) string {
	r.t.Helper()
	ark, ok, err := r.q.Minted(r.t.Context(), jid)
	if err != nil || !ok {
		r.t.Fatalf("the minter's record of %s: %q, %t, %v; want an ARK", jid, ark, ok, err)
	}
	return ark
}
