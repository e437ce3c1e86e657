package reactor

import (
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Moves another program makes (Merritt's services, through mrt-zk) publish
// no event. With Config.RecordForeign a daemon watches every job state
// folder but Pending, reads the status of each job whose ref appears in one
// (not after its own move there), and publishes the event of a move that
// was not ingestq's (decision "foreign moves"): the status's arrival ID is
// the event's ID, so that the copies the other daemons publish within the
// stream's duplicate window are dropped, and one looked up first
// (Bus.Recorded) is never published again after it. An ingestq move writes
// its own arrival ID into the status (JobStatus.Move); mrt-zk copies that
// key into its next status unchanged, where it names another move.

// ForeignActor is the actor of a move's event that another program made.
const ForeignActor = "another program"

// foreignMoves is what the watch of every job state folder keeps: each
// folder's last listing (to tell a rescan's new refs), and the last state
// each job was seen in (an event's "from").
type foreignMoves struct {
	mu     sync.Mutex
	listed map[queue.State][]string
	moving map[string]queue.State // jid → where this daemon's move in flight takes it
	seen   published
}

// ownMove notes that this daemon is moving job jid to state to, until the
// returned func is called (once the move is in published): a listing that
// shows the ref first reads nothing.
func (r *Reactor) ownMove(jid string, to queue.State) func() {
	if !r.cfg.RecordForeign {
		return func() {}
	}
	r.foreign.mu.Lock()
	r.foreign.moving[jid] = to
	r.foreign.mu.Unlock()
	return func() {
		r.foreign.mu.Lock()
		if r.foreign.moving[jid] == to { // not the next move's, the job handed on here
			delete(r.foreign.moving, jid)
		}
		r.foreign.mu.Unlock()
	}
}

// watchForeign watches the job state folders this daemon works in no role
// (its own are watched already), but Pending: what enters it is a new job
// (no move) or a job put back by an operator, which no one publishes
// either when ingestq's operator does it by hand (decision 131 leaves it).
func (r *Reactor) watchForeign() {
	if !r.cfg.RecordForeign {
		return
	}
	for _, s := range queue.JobMachine.States {
		if s != queue.Pending && !r.owns(JobRole(s)) {
			r.watcher.Watch(r.q.Path("/jobs/states/" + s.Folder()))
		}
	}
}

// foreignListed looks at the refs new in state s's folder since its last
// listing (none at the first: those moves were made before this daemon
// started, and were recorded, if at all, by the daemons running then). In
// a folder this daemon works, and after its own move in flight, it only
// notes where the job is (for "from"), reading nothing: a move there is
// recorded by whoever takes the job next (recoverArrival), as before the
// foreign watch. Reading each ref there cost a read per move in a hurry
// (the job moved on before its listing) and per move another daemon made,
// in the folder's watch, before its next listing (decision N1).
func (r *Reactor) foreignListed(s queue.State, refs []string) {
	if !r.cfg.RecordForeign || s == queue.Pending {
		return
	}
	r.foreign.mu.Lock()
	prev, known := r.foreign.listed[s]
	r.foreign.listed[s] = refs
	r.foreign.mu.Unlock()
	if !known {
		return
	}
	for _, ref := range refs {
		if _, ok := slices.BinarySearch(prev, ref); ok {
			continue
		}
		_, jid, _ := strings.Cut(ref, "-")
		r.foreign.mu.Lock()
		to, moving := r.foreign.moving[jid]
		r.foreign.mu.Unlock()
		switch m, ok := r.published.last(jid); {
		case ok && m.state == s:
			r.foreign.seen.add(jid, m) // this daemon's own move there: nothing to read
		case r.owns(JobRole(s)) || (moving && to == s):
			if last, _ := r.foreign.seen.last(jid); last.state != s { // a ref made again under a new priority is no move
				r.foreign.seen.add(jid, publishedMove{state: s, from: last.state})
			}
		default:
			r.foreignRef(s, ref)
		}
	}
}

// foreignRef reads the job whose ref appeared in state s's folder and
// records the move its status names. A status that still names the move
// before, one that this daemon has seen already (mrt-zk writes the ref and
// the status in separate requests, in either order), is watched until it
// changes.
func (r *Reactor) foreignRef(s queue.State, ref string) {
	j, version, err := r.q.JobArrival(r.work, ref)
	switch {
	case errors.Is(err, queue.ErrNotFound):
		return // deleted since
	case err != nil:
		r.log.Warn("reactor: cannot read a job found in a state folder; a move by another program may go unrecorded", "ref", ref, "state", s, "err", err)
		return
	}
	if j.State() != s && queue.JobMachine.Check(j.ID, j.State(), s) == nil {
		// Not a ref mrt-zk's Job.load wrote back in a state the job left
		// (no edge leads there from its status's): its move's status write
		// is still to come.
		if last, ok := r.foreign.seen.last(j.ID); ok && seenArrival(last, j) {
			wt := queue.Wait{Path: r.q.Path("/jobs/" + j.ID + "/status"), Present: true, Data: true, Version: version}
			r.waits.on(r.work, wt, "foreign", func() { r.foreignRef(s, ref) })
			return
		}
	}
	r.foreignArrival(j)
}

// foreignArrival notes the move that brought j (as read) to its state, and
// publishes its event when another program made it.
func (r *Reactor) foreignArrival(j *queue.Job) {
	id := j.ArrivalID()
	if before, ok := r.foreign.seen.last(j.ID); ok && before.id == id {
		return // seen already (a ref moved back and forth by a foreign reload)
	}
	r.foreign.seen.add(j.ID, publishedMove{id: id, state: j.State(), from: r.cameFrom(j)})
	if j.MovedByIngestq() || (j.State() == queue.Pending && j.Status.LastSuccessfulStatus == nil) {
		return // its maker publishes it (or the next mover recovers it); a creation is no move
	}
	if m, ok := r.published.last(j.ID); ok && m.id == id {
		return
	}
	if !r.bus.Connected() {
		// A lookup would wait out its timeout in the folder's watch, the
		// owned folders' pools behind it: the other daemons record it.
		r.log.Debug("reactor: NATS away; another program's move not recorded here", "job", j.ID, "state", j.State())
		return
	}
	if r.recoverEvent(j) {
		r.published.add(j.ID, publishedMove{id: id, state: j.State()})
	}
}

// cameFrom is the state j (as read) left for its state, as far as this
// daemon knows: the one it last saw the job in, else the status's
// last_successful_status, which mrt-zk and ingestq set to the state left on
// every move but to Failed, Deleted and Held; "" when neither says.
func (r *Reactor) cameFrom(j *queue.Job) queue.State {
	if m, ok := r.foreign.seen.last(j.ID); ok {
		if seenArrival(m, j) {
			return m.from
		}
		return m.state
	}
	if lss := j.Status.LastSuccessfulStatus; lss != nil && !stopOrHeld(j.State()) {
		return *lss
	}
	return ""
}

// seenArrival tells whether m, the foreign watch's note of a job, is of
// the move that brought j (as read) to its state: by its ID, or, noted
// from a listing of a folder this daemon works (no ID), by its state.
func seenArrival(m publishedMove, j *queue.Job) bool {
	return m.id == j.ArrivalID() || (m.id == "" && m.state == j.State())
}

func stopOrHeld(s queue.State) bool {
	return s == queue.Failed || s == queue.Deleted || s == queue.Held
}

// arrivalEvent is the event of the move that brought j (as read) to its
// state, published by this daemon for a maker that did not (RecoveredBy):
// another program (no ingestq mark in the status: Actor says so, the
// status's message is the mover's, and From is cameFrom), or an ingestq
// daemon that stopped before publishing it (no From: decision 131).
func (r *Reactor) arrivalEvent(j *queue.Job) events.Event {
	e := events.Event{Kind: events.KindJob, ID: j.ArrivalID(), BatchID: j.BatchID, JobID: j.ID,
		To: string(j.State()), RecoveredBy: r.cfg.Host}
	if j.Priority != 0 {
		e.Priority = &j.Priority
	}
	if j.MovedByIngestq() {
		e.Message = "recovered by " + r.cfg.Host + ": the move had no event when this host looked (its maker stopped before publishing it, or was slow to)"
		return e
	}
	e.From, e.Actor, e.Message, e.Attrs = string(r.cameFrom(j)), ForeignActor, j.Status.Message, map[string]any{"foreign": true}
	return e
}
