package handlers_test

import (
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/reactor/stalled"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// The line a step logs each time it waits for another holder of its object.
const objectWaitLine = "waiting for another job or program working on the object"

// A second deposit of an object finds its storage lock held by another job
// (the test's session stands in for it): the job waits at Storing, its
// message naming the lock, the job and since when, and spends none of the
// rig's two attempts (5 ms apart) through three waits (700 ms); let go,
// it stores and records the next version. It failed after its attempts.
func TestAJobWaitsForTheStorageLockAnotherJobHolds(t *testing.T) {
	t.Parallel()
	waitsForObjectLock(t, queue.Storing, "storage")
}

// The same at Recording, for the object's inventory lock.
func TestAJobWaitsForTheInventoryLockAnotherJobHolds(t *testing.T) {
	t.Parallel()
	waitsForObjectLock(t, queue.Recording, "inventory")
}

func waitsForObjectLock(t *testing.T, at queue.State, what string) {
	o := newSecondDeposit(t, "locked")
	ctx := t.Context()
	lock, unlock := o.r.q.LockStorage, o.r.q.UnlockStorage
	if what == "inventory" {
		lock, unlock = o.r.q.LockInventory, o.r.q.UnlockInventory
	}
	const holder = "jid0000000999" // another job, storing or recording the object
	if ok, err := lock(ctx, o.ark, holder); err != nil || !ok {
		t.Fatalf("the test's %s lock of %s: %v, %v", what, o.ark, ok, err)
	}

	j := o.waiting(what)
	want := "waiting for the " + what + " lock of " + o.ark + ", held by job " + holder + " on session 0x"
	if j.State() != at || !strings.HasPrefix(j.Status.Message, want) || !strings.Contains(j.Status.Message, " since ") {
		t.Errorf("job %s: %s %q, want it waiting at %s: %q… since …", j.ID, j.State(), j.Status.Message, at, want)
	}

	if ok, err := unlock(ctx, o.ark); err != nil || !ok {
		t.Fatalf("the test's unlock of %s: %v, %v", o.ark, ok, err)
	}
	o.goesOn(j)
}

// A persistent storage lock, as a Merritt storage service that stopped
// while storing leaves: the job waits at Storing, its message naming the
// lock as persistent, its ZooKeeper node and how to clear it, and it shows
// as stalled past Storing's threshold with that message; once the node is
// deleted the job goes on. It failed after its attempts saying only "locked
// by another job".
func TestAJobWaitsForAPersistentStorageLockNamingIt(t *testing.T) {
	t.Parallel()
	o := newSecondDeposit(t, "left")
	conn := zktest.Connect(t)
	node := o.r.q.Path("/locks/storage/" + queue.LockName(o.ark))
	if _, err := conn.Create(node, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}

	j := o.waiting("storage")
	for _, want := range []string{"waiting for the storage lock of " + o.ark + ", held by no session since ", "a persistent lock",
		"`zkCli.sh delete " + node + "`", "`ingestq check`"} {
		if j.State() != queue.Storing || !strings.Contains(j.Status.Message, want) {
			t.Errorf("job %s: %s %q, want it waiting at Storing, saying %q", j.ID, j.State(), j.Status.Message, want)
		}
	}
	// Between the job's read and the check of its lock a retest may hold
	// the job's lock for a moment ("lock held by host test"): a later look
	// sees the wait again.
	waitFor(t, "the job stalled past Storing's threshold with its message", func() bool {
		stalls, err := stalled.Find(t.Context(), o.r.q, []*queue.Job{j}, stalled.Thresholds{queue.Storing: time.Nanosecond}, time.Now())
		st, ok := stalls[j.ID]
		return err == nil && ok && strings.Contains(st.Reason, j.Status.Message)
	})

	if err := conn.Delete(node, -1); err != nil {
		t.Fatal(err)
	}
	o.goesOn(j)
}

// secondDeposit is a rig (the rig's two attempts, 5 ms apart) with version
// 1 of an object deposited, for a second deposit of it to meet a lock.
type secondDeposit struct {
	t       *testing.T
	r       *rig
	logs    *logtest.Buffer
	first   *queue.Job
	ark     string
	localID string
	second  object // version 2's files
}

func newSecondDeposit(t *testing.T, localID string) *secondDeposit {
	logs := &logtest.Buffer{}
	r := newRig(t, nil, withLogs(t, logs))
	one := object{"a.txt": []byte("one")}
	first := r.deposit("/"+localID+"/v1.checkm", one, "local_id", localID)
	return &secondDeposit{t: t, r: r, logs: logs, first: first, ark: r.checkStored(first, one), localID: localID,
		second: object{"a.txt": []byte("two")}}
}

// waiting submits version 2 and returns its job once its step has waited
// for the object's lock of what three times in a row (700 ms, past the
// rig's attempts), having spent no attempt.
func (o *secondDeposit) waiting(what string) *queue.Job {
	o.t.Helper()
	b := o.r.submitObject("/"+o.localID+"/v2.checkm", o.second, "local_id", o.localID)
	o.logs.WaitFor(o.t, objectWaitLine, what+" lock of "+o.ark, "retest_in=400ms")
	j := o.r.jobsOf(b.ID)["manifest"]
	if n := len(o.logs.Lines("step failed; retrying", j.ID)); n != 0 {
		o.t.Errorf("the waiting job spent %d attempts, want none", n)
	}
	return j
}

// goesOn asserts that job j, let go, stored and recorded version 2.
func (o *secondDeposit) goesOn(j *queue.Job) {
	o.t.Helper()
	j = o.r.jobsOf(o.r.waitBatch(j.BatchID, queue.Completed, queue.Failed).ID)["manifest"]
	o.r.checkStored(j, o.second)
	wantRecordedBy(o.t, o.r, o.ark, o.first.ID, j.ID)
}
