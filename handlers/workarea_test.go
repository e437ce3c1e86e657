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
	r := newRig(t, nil, withLogs(t, logs), func(_ *handlers.Config, rc *reactor.Config) {
		rc.Roles = slices.DeleteFunc(reactor.AllRoles(), func(x reactor.Role) bool { return x == reactor.JobRole(queue.Recording) })
	})
	recording := make(chan string, 2)
	if _, err := r.bus.Subscribe("ingestq.job.recording.*", func(e events.Event) { recording <- e.JobID }); err != nil {
		t.Fatal(err)
	}
	b, _ := r.submitBatch("ended", []object{{"a.txt": []byte("alpha\n")}, {"b.txt": []byte("bravo\n")}})
	var jids []string
	for range 2 {
		select {
		case jid := <-recording:
			jids = append(jids, jid)
		case <-time.After(2 * time.Minute):
			r.dump()
			t.Fatalf("jobs of batch %s in Recording: %v, want 2", b.ID, jids)
		}
	}
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

// A job whose working folder is lost after Downloading (the working disk
// replaced, a ZooKeeper restored to before Notify removed the folder) runs
// its earlier steps again on this host at its next step, as a job taken
// over from a dead host does, and completes with one version. Before, the
// step failed the job: "the object has no files" in Processing, "storage
// manifest: …" in Storing, and a requeue
// failed it again.
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
