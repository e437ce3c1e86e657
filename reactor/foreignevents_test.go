package reactor_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch"
)

// A job Merritt's storage, inventory and notify services move on (mrt-zk:
// a status write and the ref's delete and create, separate requests, in
// either order) has each of those moves in the event stream once, though
// two daemons watch them, marked as another program's, from the state it
// left; the moves the daemons made themselves are there once each, not
// again as another program's.
func TestForeignMovesAreRecordedOnce(t *testing.T) {
	e := newEnv(t)
	live := e.outside("ingestq.job.>")
	roles := []reactor.Role{"pending", "estimating", "provisioning", "downloading", "processing", reactor.RoleIntake, reactor.RoleReporting}
	var qa *queue.Queue
	for _, host := range []string{"host-a", "host-b"} {
		e.daemon(host, func(c *reactor.Config) {
			c.Roles, c.RecordForeign = roles, true
			if qa == nil {
				qa = c.Queue
			}
		})
	}
	batches := e.outside("ingestq.batch.>")
	b := e.submit(map[string]any{"profile_name": "demo", "payload_url": "passthrough:1"})
	stored := nextEvent(e, live, func(ev events.Event) bool {
		return ev.BatchID == b.ID && ev.Kind == events.KindJob && ev.To == string(queue.Storing)
	}, "the job's move to Storing")
	jid := stored.JobID

	s := e.session()
	readsBefore, _ := qa.Requests()
	moves := []struct {
		to       queue.State
		refFirst bool
	}{{queue.Recording, false}, {queue.Notify, true}, {queue.Completed, true}}
	for _, m := range moves {
		e.mrtzkMove(s, b.ID, jid, m.to, m.refFirst)
		nextEvent(e, live, func(ev events.Event) bool { return ev.JobID == jid && ev.To == string(m.to) }, "the event of the move to "+string(m.to))
	}
	readsAfter, _ := qa.Requests()
	t.Logf("host-a: %d ZooKeeper reads over %d foreign moves", readsAfter-readsBefore, len(moves))
	if rep := e.waitBatch(batches, b.ID); rep.To != string(queue.Completed) {
		t.Fatalf("batch %s ended %s: %s", b.ID, rep.To, rep.Message)
	}

	want := []string{"Pending→Estimating", "Estimating→Provisioning", "Provisioning→Downloading", "Downloading→Processing",
		"Processing→Storing", "Storing→Recording", "Recording→Notify", "Notify→Completed"}
	for _, f := range []events.Filter{{JobID: jid}, {BatchID: b.ID}} {
		if steps := e.jobSteps(f, jid); !slices.Equal(steps, want) {
			t.Fatalf("the job's recorded moves (replay of %+v) %v, want each once: %v", f, steps, want)
		}
	}
}

// jobSteps replays f and gives job jid's moves (from→to) in the timeline's
// order, checking that the daemons' own moves are their makers' events and
// the moves to Recording, Notify and Completed another program's.
func (e *env) jobSteps(f events.Filter, jid string) []string {
	e.t.Helper()
	var got []events.Event
	err := events.Replay(e.t.Context(), e.bus.Conn(), "", f, func(ev events.Event) error {
		if ev.Kind == events.KindJob && ev.JobID == jid {
			got = append(got, ev)
		}
		return nil
	})
	mustDo(e.t, func() error { return err })
	var steps []string
	for _, ev := range events.Timeline(got) {
		steps = append(steps, ev.From+"→"+ev.To)
		foreign := ev.To == "Recording" || ev.To == "Notify" || ev.To == "Completed"
		switch {
		case foreign && (ev.Actor != reactor.ForeignActor || ev.Attrs["foreign"] != true || ev.RecoveredBy == ""):
			e.t.Errorf("the foreign move to %s: actor %q, attrs %v, recorded by %q; want %q, foreign, a daemon's name", ev.To, ev.Actor, ev.Attrs, ev.RecoveredBy, reactor.ForeignActor)
		case !foreign && (ev.Actor != "" || ev.Host == "" || ev.RecoveredBy != ""):
			e.t.Errorf("the daemons' own move to %s: actor %q, host %q, recovered by %q; want its maker's event", ev.To, ev.Actor, ev.Host, ev.RecoveredBy)
		}
	}
	return steps
}

// mrtzkMove moves job jid of batch bid to state to as mrt-zk's
// Job.setStatus does: the status rewritten over a copy of the old one (its
// other keys, ingestq's included, kept), the state ref deleted and made
// again in the new folder, and at a done state the batch ref moved (delete,
// create), each a request of its own; the status first or (refFirst) last.
func (e *env) mrtzkMove(s *zkwatch.Session, bid, jid string, to queue.State, refFirst bool) {
	e.t.Helper()
	c := s.Conn
	statusPath := e.q.Path("/jobs/" + jid + "/status")
	data, _, err := c.Get(statusPath)
	mustDo(e.t, func() error { return err })
	var st map[string]any
	mustDo(e.t, func() error { return json.Unmarshal(data, &st) })
	from := queue.State(st["status"].(string))
	st["status"], st["last_successful_status"], st["message"] = to, from, ""
	st["last_modified"] = time.Now().Format(queue.TimeLayout)
	status, err := json.Marshal(st)
	mustDo(e.t, func() error { return err })
	writeStatus := func() error { _, err := c.Set(statusPath, status, -1); return err }
	create := func(p string) error {
		_, err := c.Create(e.q.Path(p), nil, 0, zk.WorldACL(zk.PermAll))
		if errors.Is(err, zk.ErrNodeExists) && p == "/batches/"+bid+"/states/batch-completed" {
			return nil
		}
		return err
	}
	ref := "05-" + jid
	moveRefs := func() error {
		if err := c.Delete(e.q.Path("/jobs/states/"+from.Folder()+"/"+ref), -1); err != nil {
			return err
		}
		if err := create("/jobs/states/" + to.Folder() + "/" + ref); err != nil {
			return err
		}
		if queue.Bucket(to) == queue.Bucket(from) {
			return nil
		}
		if err := c.Delete(e.q.Path("/batches/"+bid+"/states/"+queue.Bucket(from)+"/"+jid), -1); err != nil {
			return err
		}
		if err := create("/batches/" + bid + "/states/" + queue.Bucket(to)); err != nil {
			return err
		}
		return create("/batches/" + bid + "/states/" + queue.Bucket(to) + "/" + jid)
	}
	if refFirst {
		mustDo(e.t, moveRefs)
		mustDo(e.t, writeStatus)
		return
	}
	mustDo(e.t, writeStatus)
	mustDo(e.t, moveRefs)
}

// A daemon working every state reads no job for the foreign watch after
// its own moves: a pass-through batch costs it about the ZooKeeper reads it
// makes without the watch (the runs' spread is about a read for every
// three jobs). Before, each folder it works read the job whose ref was new
// there unless the daemon's last move of the job was there (it had moved
// on by the listing): 1.9 reads a job more here, 1.2 to 3.5 in the
// throughput benchmark.
func TestOwnMovesCostNoForeignReads(t *testing.T) {
	const jobs = 100
	reads := func(foreign bool) uint64 {
		e := newEnv(t)
		var q *queue.Queue
		e.daemon("host-a", func(c *reactor.Config) { c.RecordForeign, q = foreign, c.Queue })
		done := e.outside("ingestq.batch.completed.*")
		r0, _ := q.Requests()
		b := e.submit(map[string]any{"profile_name": "demo", "payload_url": fmt.Sprintf("passthrough:%d", jobs)})
		nextEvent(e, done, func(ev events.Event) bool { return ev.BatchID == b.ID }, "the batch's completion")
		r1, _ := q.Requests()
		return r1 - r0
	}
	off, on := reads(false), reads(true)
	t.Logf("reads for %d jobs: %d without the foreign watch, %d with", jobs, off, on)
	// One run in nine (of 9 under a loaded machine) read about a job more
	// (516 against 415), not yet explained; the defect read two and more
	// (638 against 395, 684 against 438).
	if slack := uint64(jobs * 3 / 2); on > off+slack {
		t.Errorf("%d jobs: %d ZooKeeper reads with the foreign watch, %d without; want at most %d more", jobs, on, off, slack)
	}
}
