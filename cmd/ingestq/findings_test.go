//go:build linux

package main_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/google/uuid"

	"github.com/ingestq/ingestq/events"

	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// Faults that the tests of a single fault did not try: a batch handler
// paused past its session timeout or killed while it makes a batch's jobs,
// a batch created in several steps as mrt-zk does, and a daemon paused
// while it works jobs.

const (
	findingsJobs    = 200
	findingsTimeout = 3 * time.Second // --zk-session-timeout of these daemons
)

// sharedQueue is a test's own NATS server (its URL), a root on the shared
// ZooKeeper, the test's session on it and a recorder of every event.
func sharedQueue(t *testing.T) (url, zkAddr, root string, q *queue.Queue, rec *recorder) {
	t.Helper()
	url = startNATS(t, -1, t.TempDir()).ClientURL()
	zkAddr, root = zktest.Shared(t).Addr, zktest.Root(t)
	return url, zkAddr, root, openQueue(t, zkAddr, root), record(t, url)
}

// pacedBatch submits a pass-through batch whose jobs are made in windows of
// 10 with a pause after each (about 3 s for 200 jobs), so that a test can
// stop its batch handler midway.
func pacedBatch(t *testing.T, q *queue.Queue) string {
	t.Helper()
	b, err := q.CreateBatch(t.Context(), queue.SubmissionOf(map[string]any{"profile_name": "demo",
		"payload_url": fmt.Sprintf("passthrough:%d", findingsJobs), "create_pace": "150ms"}))
	if err != nil {
		t.Fatal(err)
	}
	return b.ID
}

// waitCreating waits until the batch's handler has made at least n jobs and
// holds the batch's lock, and returns the session that holds it.
func waitCreating(t *testing.T, q *queue.Queue, bid string, n int) int64 {
	t.Helper()
	var owner int64
	poll(t, 60*time.Second, fmt.Sprintf("batch %s's handler to make %d jobs", bid, n), func() (bool, string, error) {
		buckets, err := q.BatchJobs(t.Context(), bid)
		if err != nil {
			return false, "", err
		}
		made := 0
		for _, jids := range buckets {
			made += len(jids)
		}
		ok, st, err := connOf(q).Exists(q.Path("/batches/" + bid + "/lock"))
		if err != nil {
			return false, "", err
		}
		if ok {
			owner = st.EphemeralOwner
		}
		return ok && made >= n && made < findingsJobs, fmt.Sprintf("%d jobs made, locked %v", made, ok), nil
	})
	return owner
}

// waitTakenOver waits until a session other than old holds the batch or
// it has left Pending, and returns when that was seen.
func waitTakenOver(t *testing.T, q *queue.Queue, bid string, old int64, timeout time.Duration) time.Time {
	t.Helper()
	poll(t, timeout, "another session to take batch "+bid+" over", func() (bool, string, error) {
		ok, st, err := connOf(q).Exists(q.Path("/batches/" + bid + "/lock"))
		if err != nil {
			return false, "", err
		}
		state, err := q.BatchState(t.Context(), bid)
		if err != nil {
			return false, "", err
		}
		return (ok && st.EphemeralOwner != old) || state != queue.Pending, fmt.Sprintf("batch %s, locked %v", state, ok), nil
	})
	return time.Now()
}

// assertOneJobPerObject checks that the batch has one job per object of its
// payload and that no job node is left over outside it (a husk of a
// refused creation).
func assertOneJobPerObject(t *testing.T, q *queue.Queue, bid string, jids []string) {
	t.Helper()
	keys := map[string][]string{}
	for _, jid := range jids {
		j, err := q.LoadJob(t.Context(), jid)
		if err != nil {
			t.Fatal(err)
		}
		k, _ := j.Config.Map()["object_key"].(string)
		keys[k] = append(keys[k], jid)
	}
	for k, js := range keys {
		if len(js) > 1 {
			t.Errorf("object %q has %d jobs: %v", k, len(js), js)
		}
	}
	if len(keys) != findingsJobs {
		t.Errorf("%d objects have jobs, want %d", len(keys), findingsJobs)
	}
	all, err := q.JobIDs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	husks := 0
	for _, jid := range all {
		if slices.Contains(jids, jid) {
			continue
		}
		_, err := q.LoadJob(t.Context(), jid)
		switch {
		case errors.Is(err, queue.ErrIncomplete):
			husks++ // a sequential create whose multi() never came (decision 5)
		case err != nil:
			t.Errorf("job %s outside the batch's buckets: %v", jid, err)
		default:
			t.Errorf("job %s exists outside the batch's buckets", jid)
		}
	}
	t.Logf("%d jobs, one per object; %d empty job nodes left by creations cut short", len(jids), husks)
}

// A daemon SIGSTOPped while it makes a batch's jobs, past its session
// timeout, then resumed after another daemon has taken the batch over,
// creates nothing more: the batch ends with exactly one job per object, and
// its report lists them all.
func TestPausedBatchCreator(t *testing.T) {
	t.Parallel()
	url, zkAddr, root, q, rec := sharedQueue(t)
	extra := []string{"--zk-session-timeout", findingsTimeout.String()}
	d1 := startDaemon(t, daemonConfig{Host: "d1", ZK: zkAddr, Root: root, NATS: url, Delay: 5 * time.Millisecond, Extra: extra})

	bid := pacedBatch(t, q)
	owner := waitCreating(t, q, bid, 30)
	d1.signal(syscall.SIGSTOP)
	stoppedAt := time.Now()
	startDaemon(t, daemonConfig{Host: "d2", ZK: zkAddr, Root: root, NATS: url, Delay: 5 * time.Millisecond, Extra: extra})
	takenAt := waitTakenOver(t, q, bid, owner, 60*time.Second)
	d1.signal(syscall.SIGCONT)
	t.Logf("d1 SIGSTOPped while making the jobs; d2 took the batch over %v later; d1 resumed then",
		takenAt.Sub(stoppedAt).Round(time.Millisecond))

	waitReport(t, rec, q, bid, 120*time.Second)
	jids := assertBatchCompleted(t, q, bid, findingsJobs)
	assertOneJobPerObject(t, q, bid, jids)
	for _, what := range []string{"stopped making its jobs", "the batch stays Pending", "result abandoned"} {
		if l := d1.logLines(what); len(l) > 0 {
			t.Logf("d1 after its pause: %s", l[0])
		}
	}
}

// A batch created in separate steps, as mrt-zk does (the sequential node,
// its uuid, its submission, and only then its status), is taken as soon as
// its status appears: a daemon that looked at it half-made waits on its
// status, not for the safety rescan (10 minutes here).
func TestBatchCreatedInSteps(t *testing.T) {
	t.Parallel()
	url, zkAddr, root, q, rec := sharedQueue(t)
	startDaemon(t, daemonConfig{Host: "d1", ZK: zkAddr, Root: root, NATS: url, Extra: []string{"--rescan", "10m"}})

	conn := connOf(q)
	acl := zk.WorldACL(zk.PermAll)
	p, err := conn.Create(q.Path("/batches/bid"), nil, zk.FlagSequence, acl)
	if err != nil {
		t.Fatal(err)
	}
	bid := path.Base(p)
	id := uuid.NewString()
	sub, _ := json.Marshal(map[string]any{"batchID": id, "profile_name": "demo", "payload_url": "passthrough:5"})
	for _, step := range []struct {
		path string
		data []byte
	}{{q.Path("/batch-uuids/" + id), []byte(bid)}, {p + "/submission", sub}} {
		if _, err := conn.Create(step.path, step.data, 0, acl); err != nil {
			t.Fatal(err)
		}
	}
	statusPath := p + "/status"
	poll(t, 30*time.Second, "the daemon to watch the half-made batch's status", func() (bool, string, error) {
		ok, err := zktest.Watched(zkAddr, statusPath)
		return ok, "no watch on " + statusPath, err
	})
	status := fmt.Sprintf(`{"status":"Pending","last_modified":%q,"message":""}`, time.Now().Format(queue.TimeLayout))
	if _, err := conn.Create(statusPath, []byte(status), 0, acl); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	rec.waitFor(60*time.Second, "batch "+bid+" to leave Pending", func(evs []events.Event) bool {
		return batchEvents(evs, bid)["Processing"] > 0
	})
	t.Logf("the batch left Pending %v after its status was created (rescan: 10 min)", time.Since(created).Round(time.Millisecond))
	waitReport(t, rec, q, bid, 60*time.Second)
	assertBatchCompleted(t, q, bid, 5)
}

// A daemon SIGKILLed while it makes a batch's jobs: another daemon, which
// found the batch locked, takes it as soon as the dead session's lock goes
// (its session timeout), not at the safety rescan (10 minutes here), and
// makes only the missing jobs.
func TestBatchCreatorKilled(t *testing.T) {
	t.Parallel()
	url, zkAddr, root, q, rec := sharedQueue(t)
	extra := []string{"--zk-session-timeout", findingsTimeout.String(), "--rescan", "10m"}
	d1 := startDaemon(t, daemonConfig{Host: "d1", ZK: zkAddr, Root: root, NATS: url, Extra: extra})

	bid := pacedBatch(t, q)
	owner := waitCreating(t, q, bid, 30)
	startDaemon(t, daemonConfig{Host: "d2", ZK: zkAddr, Root: root, NATS: url, Extra: extra})
	poll(t, 30*time.Second, "d2 to watch the batch's lock", func() (bool, string, error) {
		ok, err := zktest.Watched(zkAddr, q.Path("/batches/"+bid+"/lock"))
		return ok, "no watch on the lock", err
	})
	d1.kill()
	killedAt := time.Now()
	takenAt := waitTakenOver(t, q, bid, owner, 60*time.Second)
	t.Logf("d2 took the batch %v after d1's SIGKILL (session timeout %v, rescan 10 min)",
		takenAt.Sub(killedAt).Round(time.Millisecond), findingsTimeout)

	waitReport(t, rec, q, bid, 120*time.Second)
	jids := assertBatchCompleted(t, q, bid, findingsJobs)
	assertOneJobPerObject(t, q, bid, jids)
}

// A daemon SIGSTOPped past its session timeout while it works jobs, then
// resumed: its commits in flight meet jobs that another daemon has taken
// over. Every transition is then either in the stream or counted lost
// (events_lost) by the daemon that cannot tell whether its commit landed.
func TestPausedDaemonEvents(t *testing.T) {
	t.Parallel()
	url, zkAddr, root, q, rec := sharedQueue(t)
	extra := []string{"--zk-session-timeout", findingsTimeout.String()}
	ds := []*daemon{
		startDaemon(t, daemonConfig{Host: "d1", ZK: zkAddr, Root: root, NATS: url, Delay: 20 * time.Millisecond, Extra: extra}),
		startDaemon(t, daemonConfig{Host: "d2", ZK: zkAddr, Root: root, NATS: url, Delay: 20 * time.Millisecond, Extra: extra}),
	}
	bid := createBatch(t, q, findingsJobs)
	rec.waitFor(60*time.Second, "50 job.completed events", func(evs []events.Event) bool { return countCompleted(evs, bid) >= 50 })
	held, err := locks(q)
	if err != nil {
		t.Fatal(err)
	}
	ds[0].signal(syscall.SIGSTOP)
	poll(t, 10*findingsTimeout, "d1's session to expire (its locks to go)", func() (bool, string, error) {
		now, err := locks(q)
		if err != nil {
			return false, "", err
		}
		left := 0
		for p, o := range held {
			if now[p] == o {
				left++
			}
		}
		return left == 0, fmt.Sprintf("%d locks of the paused session left", left), nil
	})
	ds[0].signal(syscall.SIGCONT)

	waitReport(t, rec, q, bid, 120*time.Second)
	jids := assertBatchCompleted(t, q, bid, findingsJobs)
	lost := 0
	for _, d := range ds {
		d.stop(15 * time.Second)
		_, l := d.stopped()
		lost += l
	}
	tl := tallyJobs(replay(t, url, bid), bid, jids)
	if len(tl.wrong) > 0 || len(tl.dups) > 0 {
		t.Errorf("job events: %d off-pipeline %v, %d duplicated %v%s",
			len(tl.wrong), first(tl.wrong), len(tl.dups), first(tl.dups), tl.describeDups())
	}
	if len(tl.missing) > lost {
		t.Errorf("%d transitions have no event (first %v) but the daemons counted only %d lost",
			len(tl.missing), first(tl.missing), lost)
	}
	t.Logf("%d transitions without an event, %d counted lost; d1 logged %d unknown outcomes",
		len(tl.missing), lost, len(ds[0].logLines("commit outcome unknown")))
}
