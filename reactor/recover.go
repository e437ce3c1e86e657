package reactor

import (
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor/queue"
)

// A daemon publishes a move's event after committing it, so one killed in
// between takes the event with it (decision 116). The daemon that moves the
// job next, or reports its batch, finds the move in ZooKeeper and, when the
// stream lacks its event, publishes it for the maker at once (decision
// 131). A living maker whose publish was still on its way then publishes
// the same event ID: the stream keeps the first copy, a live subscriber
// may see both.

// publishedKeep is how long a daemon remembers the moves it published.
// Past that, a move it made costs one lookup in the stream.
const publishedKeep = 10 * time.Minute

// recoverWorkers bounds the lookups a report makes at once.
const recoverWorkers = 16

// published remembers, per job and per batch, the last move this daemon
// published or found recorded (its arrival ID and state): the one move
// after which no lookup is needed. Two generations, the older dropped
// every publishedKeep, bound it.
type published struct {
	mu        sync.Mutex
	cur, prev map[string]publishedMove
	turned    time.Time
}

type publishedMove struct {
	id    string
	state queue.State
	from  queue.State     // the state the job left, in the foreign watch's memory (foreign.go)
	acked <-chan struct{} // closed once the stream has its event, or it is lost
}

// publishWait bounds how long a move waits for the record of the move
// before it: made by this daemon (awaitRecorded), or recovered (awaitAck).
const publishWait = 2 * time.Second

// awaitRecorded waits until the stream has the event of a job's or a
// batch's last move (key its id, arrivalID that move's) when this daemon
// made it, before the next move is committed: a daemon killed in between
// then takes at most one unrecorded move with it, the one the next mover
// (or a look at every batch) finds in ZooKeeper and recovers (decisions
// 131, 222). Two quick moves, both unrecorded at the kill, lost the first
// one's event. Nothing waits while NATS is away: those events are counted
// lost anyway.
func (r *Reactor) awaitRecorded(key, arrivalID string) {
	m, ok := r.published.last(key)
	if !ok || m.acked == nil || m.id != arrivalID || !r.bus.Connected() {
		return
	}
	r.awaitAck(m.acked)
}

// awaitAck waits, at most publishWait, for a recovered event's record: the
// move after it may be committed next, and a daemon killed then would take
// the recovered event with it.
func (r *Reactor) awaitAck(acked <-chan struct{}) {
	t := time.NewTimer(publishWait)
	defer t.Stop()
	select {
	case <-acked:
	case <-t.C:
	case <-r.work.Done():
	}
}

func (p *published) add(jid string, m publishedMove) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now := time.Now(); p.cur == nil || now.Sub(p.turned) > publishedKeep {
		p.prev, p.cur, p.turned = p.cur, map[string]publishedMove{}, now
	}
	p.cur[jid] = m
}

func (p *published) last(jid string) (publishedMove, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m, ok := p.cur[jid]; ok {
		return m, true
	}
	m, ok := p.prev[jid]
	return m, ok
}

// recoverArrival publishes the event of the move that brought j to its
// state (arrival, read before this daemon's own move) when the stream
// lacks it, unless this daemon published it or it is a job's creation
// (which has no event).
func (r *Reactor) recoverArrival(j *queue.Job, arrival queue.JobStatus) {
	if arrival.Status == queue.Pending {
		return
	}
	a := &queue.Job{ID: j.ID, BatchID: j.BatchID, Priority: j.Priority, Status: arrival}
	if m, ok := r.published.last(j.ID); ok && m.id == a.ArrivalID() {
		return
	}
	r.recoverEvent(a)
}

// recoverEnds does the same for the moves that ended a batch's jobs (to
// Completed or Failed) that this daemon did not publish: no daemon takes a
// job after those, so the reporter looks them up.
func (r *Reactor) recoverEnds(bid string, completed, failed []string) {
	var unsure []string
	for end, jids := range map[queue.State][]string{queue.Completed: completed, queue.Failed: failed} {
		for _, jid := range jids {
			if m, ok := r.published.last(jid); !ok || m.state != end {
				unsure = append(unsure, jid)
			}
		}
	}
	if len(unsure) == 0 {
		return
	}
	statuses, err := r.q.JobStatuses(r.work, unsure)
	if err != nil {
		r.log.Warn("reactor: cannot read the jobs' statuses; their last events are not checked", "batch", bid, "err", err)
		return
	}
	var g errgroup.Group
	g.SetLimit(recoverWorkers)
	for jid, st := range statuses {
		g.Go(func() error {
			r.recoverEvent(&queue.Job{ID: jid, BatchID: bid, Status: st})
			return nil
		})
	}
	_ = g.Wait() // recoverEvent logs its own failures
}

// recoverEvent publishes the event of the move that brought j (as read) to
// its state, unless the stream has it: as another program's when the
// status has no ingestq mark (arrivalEvent). It tells whether the stream
// has the event now (publishUnlessRecorded).
func (r *Reactor) recoverEvent(j *queue.Job) bool {
	return r.publishUnlessRecorded(r.arrivalEvent(j), j.Status.MovedAt(), "job", j.ID)
}

// publishUnlessRecorded publishes e, the recovered event of a move made at
// at (its status's MovedAt: to the millisecond where ZooKeeper's mtime
// vouches for it, so a replay puts it in order), unless the stream has it;
// false when the stream could not be asked. who names the job or batch in
// the logs.
func (r *Reactor) publishUnlessRecorded(e events.Event, at time.Time, who ...any) bool {
	e.Time = at
	ok, err := r.bus.Recorded(r.work, e)
	switch {
	case err != nil && !e.Time.IsZero() && time.Since(e.Time) < recoverBlind:
		// The stream does not answer (it elects a leader after its
		// leader's host died, whose last moves are then the ones to
		// recover): publish all the same. If the stream has the move's
		// own event, it drops this copy as a duplicate of its ID.
		r.log.Info("reactor: cannot look a move up in the stream; publishing its event in case", append(who, "state", e.To, "err", err)...)
		r.bus.Publish(e)
	case err != nil:
		r.log.Warn("reactor: cannot look a move up in the stream; its event is not checked", append(who, "state", e.To, "err", err)...)
		return false
	case !ok:
		level := slog.LevelInfo
		if e.Actor == ForeignActor {
			level = slog.LevelDebug // routine on a queue shared with another program: one a move
		}
		r.log.Log(r.work, level, "reactor: publishing the event of a move made without one", append(who, "state", e.To)...)
		r.awaitAck(r.bus.PublishAcked(e))
	}
	return true
}

// recoverBlind is how recent a move must be for its event to be published
// when the stream cannot be asked whether it has it: well inside the
// stream's two-minute duplicate window, so that a copy of an event it has
// is dropped.
const recoverBlind = 90 * time.Second

// recoverAfter is how old a batch's last move must be before a look at
// every batch checks its event: by then a living maker's publish has been
// acknowledged or given up (the bus's ack timeout). A recovered copy
// published while the maker's was on its way would reach live subscribers
// twice, and the stream might keep the copy, without the report's
// attributes.
const recoverAfter = 15 * time.Second

// recoverBatchEnds checks the events of the batches a look at every batch
// found Completed or Failed lately (between recoverAfter and publishedKeep
// ago), unless this daemon published them (recoverBatchEvent): no daemon moves a batch
// after that, so a reporter killed between its last commit and its publish
// would otherwise take that event with it for good (decision 222).
func (r *Reactor) recoverBatchEnds(batches []*queue.Batch) {
	if len(batches) == 0 || !r.bus.Connected() {
		return // asked at the next look: a lookup would wait out its timeout for each
	}
	now := time.Now()
	var g errgroup.Group
	g.SetLimit(recoverWorkers)
	for _, b := range batches {
		if !endedLately(b, now) {
			continue
		}
		g.Go(func() error {
			r.recoverBatchEvent(b)
			return nil
		})
	}
	_ = g.Wait() // recoverBatchEvent logs its own failures
}

// endedLately tells whether b moved to Completed or Failed between
// recoverAfter and publishedKeep before now: an end whose event a look at
// every batch checks.
func endedLately(b *queue.Batch, now time.Time) bool {
	if s := b.State(); s != queue.Completed && s != queue.Failed {
		return false
	}
	at, err := time.Parse(queue.TimeLayout, b.Status.LastModified)
	return err == nil && now.Sub(at) >= recoverAfter && now.Sub(at) <= publishedKeep
}

// recoverBatchEvent publishes the event of the move that brought b (as
// read) to its state, unless this daemon published it or the stream has
// it; either way it is noted, so that the next look does not ask again.
func (r *Reactor) recoverBatchEvent(b *queue.Batch) {
	id := b.ArrivalID()
	if m, ok := r.published.last(b.ID); ok && m.id == id {
		return
	}
	e := events.Event{Kind: events.KindBatch, ID: id, BatchID: b.ID, To: string(b.State()), RecoveredBy: r.cfg.Host,
		Message: b.Status.Message, Attrs: recoveredReportAttrs(b)}
	if r.publishUnlessRecorded(e, b.Status.MovedAt(), "batch", b.ID) {
		r.published.add(b.ID, publishedMove{id: id, state: b.State()})
	}
}

// recoveredReportAttrs are what a recovered report event can say of the
// report: the counts its status-report keeps, when they are all the jobs
// (a windowed batch's archived jobs are not in it: a consumer that finds
// no counts reads the batch).
func recoveredReportAttrs(b *queue.Batch) map[string]any {
	if b.Report == nil || (b.State() != queue.Completed && b.State() != queue.Failed) {
		return nil
	}
	ok, failed := len(b.Report.SuccessfulJobs), len(b.Report.FailedJobs)
	if b.JobCount >= 0 && ok+failed != b.JobCount {
		return nil
	}
	return map[string]any{"successful_count": ok, "failed_count": failed}
}
