package reactor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/internal/backoff"
	"github.com/ingestq/ingestq/reactor/queue"
)

// pendingBatchStep takes a Pending batch and makes its jobs: Held when its
// collection is held; else the batch handler runs (with retries) and the
// batch moves to Processing. A batch whose payload cannot be read moves to
// Processing with the reason in its message and no jobs, so it reports at
// once, as Failed.
func (r *Reactor) pendingBatchStep(ctx context.Context) (bool, error) {
	if r.holds.queueHeld() {
		return false, nil
	}
	b, waits, err := r.acquirePendingBatch(ctx)
	if err != nil || b == nil {
		r.wakeOn(waits, sigPending)
		return false, err
	}
	r.deferredBatches.release(b.ID) // its time came, if it waited
	if r.holds.collectionHeld(ctx, b.Profile()) {
		r.moveBatch(b, queue.Held, queue.BatchChange{}, nil)
		return true, nil
	}
	var jobs int
	var note string
	// ZooKeeper out of reach leaves the batch Pending (below), to be taken
	// again under a lock, rather than waiting with one the outage may take.
	// Why it is tried again is in its message meanwhile, as a job's is.
	retrying := func(msg string) error { return r.noteBatch(ctx, b, msg, nil) }
	ok, err := r.withRetries(ctx, "batch handler", b.ID, false, retrying, func() (err error) {
		objs, err := r.cfg.Batches.Objects(ctx, b)
		if err != nil {
			return err
		}
		if n, ok := r.cfg.Batches.(Noter); ok {
			note = n.Note(b, objs)
		}
		jobs, err = r.makeJobs(ctx, b, objs)
		return err
	})
	var later *laterError
	switch {
	case errors.Is(err, queue.ErrStale):
		r.log.Warn("reactor: batch taken over by another session; stopped making its jobs", "batch", b.ID, "err", err)
		r.takeGates(b.ID, nil)
		r.unlockBatch(b)
		return true, nil
	case !ok:
		r.takeGates(b.ID, nil)
		r.unlockBatch(b)
		return true, nil
	case errors.As(err, &later):
		r.deferBatch(ctx, b, later)
		return true, nil
	case queue.Unreachable(err):
		// Not the payload's fault: the batch stays Pending, and is taken
		// again once ZooKeeper answers (by this daemon or another).
		r.log.Warn("reactor: ZooKeeper unreachable while making the batch's jobs; the batch stays Pending", "batch", b.ID, "err", err)
		r.takeGates(b.ID, nil)
		r.unlockBatch(b)
		return true, nil
	}
	c := queue.BatchChange{JobCount: &jobs, Message: note}
	if err != nil {
		c.Message = fmt.Sprintf("payload: %v", err)
		c.JobCount = r.countJobs(b.ID) // the jobs made before the failure
	}
	if !r.moveBatch(b, queue.Processing, c, nil) {
		r.takeGates(b.ID, nil)
	} else {
		// Started, then the gates let go with their views: the Pending
		// pool acquires them without a read and admits them at once. Let
		// go before the move, a gate was taken from the folder's listing,
		// read, and deferred while its batch still looked Pending.
		r.batchStarted(b.ID)
		var hand func(*queue.Job)
		if p, ok := r.pools[sigJob(queue.Pending)].(*jobPool); ok {
			hand = func(j *queue.Job) { p.arrived(j.Handoff()) }
		}
		r.takeGates(b.ID, hand)
		if windowed, _ := r.feeds.known(b.ID); windowed {
			r.signal(sigFeed, b.ID) // its next window may be made at once
		}
		// A batch with no job left in batch-processing reports now: its
		// folder may never appear, so no watch would fire.
		r.signal(sigReport, b.ID)
	}
	return true, nil
}

// deferBatch lets go of batch b, which its handler asked to try again
// later: it stays Pending (and acquired, as mrt-zk's batch handler leaves
// a batch it is making), unlocked, with why as its message and the
// deferral in its status, so every daemon passes over it until then
// (batchDeferred), an operator may act on it meanwhile, and a host that
// stops or dies leaves it to another. This daemon's worker goes on to
// other batches.
func (r *Reactor) deferBatch(ctx context.Context, b *queue.Batch, later *laterError) {
	if err := r.noteBatch(ctx, b, later.why, &queue.Deferral{Until: later.until, Host: r.cfg.Host}); err != nil {
		r.log.Warn("reactor: why the batch waits not written into its status", "batch", b.ID, "err", err)
	}
	r.takeGates(b.ID, nil)
	r.unlockBatch(b)
	r.passOverBatch(b.ID, time.Until(later.until))
}

// batchDeferred tells whether Pending batch b is deferred still, by the
// daemon that said so in its status (deferralLeft); it is then passed over
// here until then.
func (r *Reactor) batchDeferred(b *queue.Batch) bool {
	left := r.deferralLeft(b.Status.Deferred)
	if left <= 0 {
		return false
	}
	r.passOverBatch(b.ID, left)
	return true
}

// passOverBatch has the Pending pool pass over batch bid, unread, for d,
// then look again.
func (r *Reactor) passOverBatch(bid string, d time.Duration) {
	r.deferredBatches.release(bid) // one entry a batch
	r.deferredBatches.addFor(bid, bid, time.Now().Add(d))
	r.waits.after(d, func() { r.wake(sigPending) })
}

// takeGates forgets the gate jobs this daemon's batch handler made for
// batch bid (ensureJobs), which the Pending pool passed over until now,
// each given to hand first (if not nil); it wakes that pool, which may take
// them from here on.
func (r *Reactor) takeGates(bid string, hand func(*queue.Job)) {
	if v, ok := r.gates.LoadAndDelete(bid); ok && hand != nil {
		for _, j := range *v.(*[]*queue.Job) {
			hand(j)
		}
	}
	found := false
	r.gated.Range(func(jid, of any) bool { // with a gate named whose creation failed
		if of == bid {
			r.gated.Delete(jid)
			found = true
		}
		return true
	})
	if found {
		r.wake(sigJob(queue.Pending))
	}
}

// acquirePendingBatch takes a Pending batch, reading only the batches not
// yet seen past Pending, nor deferred here still: with many batches in the
// queue, a new one costs the reading of itself, not of every batch. Read
// and passed over, 100 deferred batches cost 700 reads at each
// acquisition, and each deferral's timer starts one.
func (r *Reactor) acquirePendingBatch(ctx context.Context) (*queue.Batch, []queue.Wait, error) {
	var ids []string // nil until the watch has listed /batches: all
	if l := r.batches.Load(); l != nil {
		ids = make([]string, 0, len(*l))
		for _, bid := range *l {
			if _, done := r.pastPending.Load(bid); !done && !r.deferredBatches.skip(bid) {
				ids = append(ids, bid)
			}
		}
	}
	admit := func(b *queue.Batch) bool {
		// skip again: ids nil reads them all
		return !r.deferredBatches.skip(b.ID) && !r.batchDeferred(b) && r.takesBatch(b)
	}
	return r.q.AcquirePendingBatchOf(ctx, ids, admit, func(bid string) { r.pastPending.Store(bid, true) })
}

// takesBatch tells whether this daemon's pipeline works the batch's
// payload (nil: every batch).
func (r *Reactor) takesBatch(b *queue.Batch) bool {
	sel, ok := r.cfg.Batches.(Selective)
	if !ok {
		return true
	}
	return sel.Takes(b.Submission.PayloadURL)
}

// countJobs counts a batch's jobs in its buckets, or nil when they cannot
// be listed. A job that moved on between two buckets' listings (its jobs
// run while the batch is made, decision 189) is in both: it counts once.
func (r *Reactor) countJobs(bid string) *int {
	buckets, err := r.q.BatchJobs(r.work, bid)
	if err != nil {
		return nil
	}
	n := len(queue.JobSet(buckets))
	return &n
}

// reportStep takes a batch that is ready to report (every job done), reports
// it, and records the report with the batch's final state.
func (r *Reactor) reportStep(ctx context.Context) (bool, error) {
	ids, ok := r.nextReport()
	if !ok {
		return false, nil
	}
	var ended []*queue.Batch // a look at every batch: the ones that ended lately
	var passed func(*queue.Batch)
	if ids == nil {
		passed = func(b *queue.Batch) { ended = append(ended, b) }
	}
	b, waits, err := r.q.AcquireCompletedBatch(ctx, ids, passed)
	acquired := time.Now() // when the move to Reporting landed, the time of its event
	r.doneReport(ids, b != nil)
	r.recoverBatchEnds(ended)
	if err != nil {
		r.retryReport(ids)
		return false, err
	}
	if b == nil {
		r.wakeOn(waits, sigReport)
		return true, nil // not ready (or taken): look at the next one
	}
	switch {
	case b.Arrival.Status == queue.Reporting:
		r.recoverBatchEvent(b) // taken over: its move to Reporting was a stopped reporter's
	case b.State() == queue.Reporting:
		r.recoverBatchEvent(&queue.Batch{ID: b.ID, Status: b.Arrival}) // the intake's move, before this one
		r.publishBatch(b, b.Arrival.Status, acquired, nil)
	}
	rep, stored, err := r.buildReport(b)
	if err != nil {
		r.log.Warn("reactor: cannot read the batch's jobs; report retried later", "batch", b.ID, "err", err)
		r.unlockBatch(b)
		return true, nil
	}
	r.recoverEnds(b.ID, stored.SuccessfulJobs, stored.FailedJobs) // archived jobs had theirs checked live
	to := queue.Completed
	if rep.Failed() {
		to = queue.Failed
	}
	rep.Stored, rep.Failure, rep.Sent = stored, failedCount(rep, rep.Message), map[string]bool{}
	rep.Summary = rep.Failure
	if rep.Note != "" {
		rep.Summary = strings.TrimPrefix(rep.Failure+"; "+rep.Note, "; ")
	}
	msg := rep.Summary
	ok, err = r.withRetries(ctx, "reporter", b.ID, true, nil, func() error { return r.cfg.Reporter.Report(ctx, b, rep) })
	if !ok {
		r.unlockBatch(b)
		return true, nil
	}
	if err != nil {
		// The batch's state stays what its jobs made it: Merritt's readers
		// take Failed for failed deposits (decision 33, revised).
		msg = strings.TrimPrefix(msg+"; "+undelivered(b, to, err), "; ")
	}
	r.awaitRecorded(b.ID, b.ArrivalID()) // a kill after the next move loses no more than that move's event
	if r.moveBatch(b, to, queue.BatchChange{Message: msg, Report: &stored}, reportAttrs(rep)) && to == queue.Failed {
		r.wakeOn([]queue.Wait{r.q.BatchStatusWait(b)}, sigReport) // asked to report again
	}
	return true, nil
}

// undelivered is a batch's message when its report could not be
// delivered: the error, that the report is kept, and, for a Failed batch,
// how to send it again (a Completed batch cannot report again).
func undelivered(b *queue.Batch, to queue.State, err error) string {
	s := fmt.Sprintf("report not delivered: %v; the report is kept: `ingestq show %s` (or GET /api/v1/batches/%s) gives it", err, b.ID, b.ID)
	if to == queue.Completed {
		return s + "; every job completed: only the report's delivery failed"
	}
	return s + fmt.Sprintf("; `ingestq report %s` (or POST /api/v1/batches/%s/report) sends it again", b.ID, b.ID)
}

// eventListMax bounds each list in a report event: a 100,000-object
// batch's lists would pass NATS's 1 MB message limit. The counts are always
// there; a consumer that finds a list cut short (lists_cut) reads the batch.
const eventListMax = 1000

// reportAttrs are a report event's attributes.
func reportAttrs(rep Report) map[string]any {
	ok, failed := rep.SuccessfulJobs[:min(len(rep.SuccessfulJobs), eventListMax)], rep.FailedJobs[:min(len(rep.FailedJobs), eventListMax)]
	a := map[string]any{"successful_count": len(rep.SuccessfulJobs), "failed_count": len(rep.FailedJobs), "update": rep.Update,
		"successful_jobs": ok, "failed_jobs": failed, "objects": objectsOf(rep, ok), "failed_objects": objectsOf(rep, failed)}
	if len(rep.SuccessfulJobs) > eventListMax || len(rep.FailedJobs) > eventListMax {
		a["lists_cut"] = true
	}
	failures := map[string]string{}
	for _, jid := range failed {
		failures[jid] = rep.Messages[jid]
	}
	a["failures"] = failures
	return a
}

// objectsOf gives the object (ARK, local ids) of each of jids that has one.
func objectsOf(rep Report, jids []string) map[string]*queue.Identifiers {
	objects := map[string]*queue.Identifiers{}
	for _, jid := range jids {
		if id, ok := rep.Objects[jid]; ok {
			objects[jid] = id
		}
	}
	return objects
}

// withRetries runs the fn of a batch's step or an access request's (id)
// until it succeeds, fails fatally or runs out of attempts (then its last
// error is returned), waiting with backoff between tries. With waitQueue,
// an error that is ZooKeeper out of reach spends no attempt: fn runs again
// once the session is back, as a job's step does. note (nil for none)
// writes why fn is tried again before each wait, in a job's words
// (retryingMessage); a stale view it meets ends the tries with that
// error: the item is no longer this worker's. ok is false when ctx ended
// first: the step is to be left for later.
func (r *Reactor) withRetries(ctx context.Context, what, id string, waitQueue bool, note func(msg string) error, fn func() error) (ok bool, err error) {
	for attempt := 1; ; attempt++ {
		err = fn()
		switch {
		case err == nil:
			return true, nil
		case ctx.Err() != nil:
			return false, err
		case waitQueue && queue.Unreachable(err):
			attempt--
			if !r.awaitQueue(ctx, err, "step", what, "id", id) {
				return false, err
			}
			continue
		case IsFatal(err) || errors.Is(err, queue.ErrStale) || errors.As(err, new(*laterError)) || attempt >= r.cfg.Attempts:
			return true, err
		}
		if note != nil {
			if werr := note(retryingMessage(attempt, r.cfg.Attempts, err)); errors.Is(werr, queue.ErrStale) {
				return true, werr
			}
		}
		wait := backoff.Delay(r.cfg.Backoff, time.Minute, attempt)
		r.log.Warn("reactor: "+what+" failed; retrying", "id", id, "attempt", attempt, "in", wait, "err", err)
		if !backoff.Sleep(ctx, wait) {
			return false, err
		}
	}
}

// buildReport lists the batch's completed and failed jobs, with the failed
// jobs' messages, and gives the status-report to store: the same lists, but
// for a windowed batch's archived jobs, which the report gives and the
// status-report leaves out (a node holds 1 MB; its archive keeps them).
func (r *Reactor) buildReport(b *queue.Batch) (Report, queue.StatusReport, error) {
	buckets, err := r.q.BatchJobs(r.work, b.ID)
	if err != nil {
		return Report{}, queue.StatusReport{}, err
	}
	stored := queue.StatusReport{
		LastModified:   r.q.Now().Format(queue.TimeLayout),
		SuccessfulJobs: nonNil(buckets["batch-completed"]),
		FailedJobs:     nonNil(buckets["batch-failed"]),
	}
	rep := Report{
		StatusReport: stored,
		Messages:     map[string]string{},
		Update:       b.State() == queue.UpdateReporting,
		Message:      b.Status.Message,
	}
	if strings.HasPrefix(rep.Message, queue.NotePrefix) {
		rep.Note, rep.Message = rep.Message, ""
	}
	reported := *b
	reported.Report = &stored
	var archivedNotes queue.ArchivedNotes
	if rep.SuccessfulJobs, rep.Objects, archivedNotes, err = r.q.Successes(r.work, &reported); err != nil {
		return Report{}, queue.StatusReport{}, err
	}
	rep.SuccessfulJobs = nonNil(rep.SuccessfulJobs)
	if f, err := r.q.LoadFeed(r.work, b.ID); err == nil && f != nil && f.Stopped != "" {
		rep.Message = strings.TrimPrefix(rep.Message+"; the batch stopped making jobs: "+f.Stopped, "; ")
	}
	hadJobs := b.JobCount > 0 || b.Report != nil && len(b.Report.SuccessfulJobs)+len(b.Report.FailedJobs) > 0
	if hadJobs && len(rep.SuccessfulJobs) == 0 && len(rep.FailedJobs) == 0 && len(buckets["batch-deleted"]) == 0 && rep.Message == "" {
		// Every job was removed (delete --purge): nothing of the batch was
		// ingested, and a Completed batch of no jobs would say it was
		// (decision 248). One that never had jobs (a foreign writer's; an
		// empty payload of ours fails at intake) reports as it is.
		rep.Message = "no job left to report: every job of the batch was removed (deleted with purge)"
	}
	for _, jid := range rep.FailedJobs {
		j, err := r.q.LoadJob(r.work, jid)
		if err != nil {
			rep.Messages[jid] = err.Error()
			continue
		}
		rep.Messages[jid] = j.Status.Message
		if j.Identifiers != nil {
			rep.Objects[jid] = j.Identifiers
		}
	}
	if rep.Notes, rep.NotesLeftOut, err = r.jobNotes(stored, rep.Messages, archivedNotes); err != nil {
		return Report{}, queue.StatusReport{}, err
	}
	reportDetail(&stored, rep)
	return rep, stored, nil
}

// jobNotes gives the note of each job of the report that has one, in jid
// order within statusDetailBudget, and how many more there are: a failed
// job's from its message, a live completed job's (stored names it) read
// from its status, an archived one's as its batch's archive keeps it.
func (r *Reactor) jobNotes(stored queue.StatusReport, failures map[string]string, archived queue.ArchivedNotes) (map[string]string, int, error) {
	statuses, err := r.q.JobStatuses(r.work, stored.SuccessfulJobs)
	if err != nil {
		return nil, 0, err
	}
	notes := map[string]string{}
	maps.Copy(notes, archived.Given)
	for jid, st := range statuses {
		if note := queue.Note(st.Message); note != "" {
			notes[jid] = note
		}
	}
	for jid, msg := range failures {
		if note := queue.Note(msg); note != "" {
			notes[jid] = note
		}
	}
	given, leftOut := budgeted(slices.Sorted(maps.Keys(notes)), func(jid string) (string, bool) { return notes[jid], true })
	return given, leftOut + archived.LeftOut, nil
}

// statusDetailBudget bounds each of a status-report's maps of ingestq's own
// (objects, failures), in bytes of JSON: with the jid lists, the node stays
// well under ZooKeeper's 1 MB. reasonMax cuts one failure's reason.
const (
	statusDetailBudget = 256 << 10
	reasonMax          = 1000
)

// reportDetail puts into a status-report what the report's event gives: the
// object (ARK, local ids) of each job it names and the reason of each
// failed job, in jid order until each map's budget is spent; the jobs left
// out are counted.
func reportDetail(stored *queue.StatusReport, rep Report) {
	object := func(jid string) (*queue.Identifiers, bool) {
		id, ok := rep.Objects[jid]
		return id, ok
	}
	stored.Identified, stored.ObjectsLeftOut = budgeted(stored.SuccessfulJobs, object)
	stored.FailedObjects, stored.FailedObjectsLeftOut = budgeted(stored.FailedJobs, object)
	stored.Failures, stored.FailuresLeftOut = budgeted(stored.FailedJobs, func(jid string) (string, bool) {
		reason := rep.Messages[jid]
		if len(reason) > reasonMax {
			reason = strings.ToValidUTF8(reason[:reasonMax], "") + "…"
		}
		return reason, true
	})
}

// budgeted maps each of jids that value gives to its value, in order until
// statusDetailBudget bytes of JSON are spent, and counts the ones left out
// then; the map is nil when it holds none.
func budgeted[V any](jids []string, value func(jid string) (V, bool)) (m map[string]V, leftOut int) {
	spent := 0
	for _, jid := range jids {
		v, ok := value(jid)
		if !ok {
			continue
		}
		data, _ := json.Marshal(v)
		if spent += len(jid) + len(data) + 4; spent > statusDetailBudget {
			leftOut++
			continue
		}
		if m == nil {
			m = map[string]V{}
		}
		m[jid] = v
	}
	return m, leftOut
}

// CancelledPrefix starts the message of a job an operator cancelled, before
// who did: the batch's report counts the cancelled jobs by it.
const CancelledPrefix = "cancelled by "

// failedCount puts how many of a batch's jobs failed before msg, its
// message: "3 of 4 jobs failed", then how many were cancelled and by whom
// (": 2 cancelled by alice, 1 failed on its own"), as a cancelled batch is
// otherwise told from a failed one only job by job. A batch none of whose
// jobs failed keeps msg as it is.
func failedCount(rep Report, msg string) string {
	failed := len(rep.FailedJobs)
	if failed == 0 {
		return msg
	}
	total, noun := failed+len(rep.SuccessfulJobs), "jobs"
	if total == 1 {
		noun = "job"
	}
	s := fmt.Sprintf("%d of %d %s failed", failed, total, noun)
	byWho := map[string]int{}
	for _, jid := range rep.FailedJobs {
		if who, ok := strings.CutPrefix(rep.Messages[jid], CancelledPrefix); ok {
			byWho[who]++
		}
	}
	var parts []string
	for _, who := range slices.Sorted(maps.Keys(byWho)) {
		parts = append(parts, fmt.Sprintf("%d %s%s", byWho[who], CancelledPrefix, who))
		failed -= byWho[who]
	}
	if len(parts) > 0 && failed > 0 {
		own := "their"
		if failed == 1 {
			own = "its"
		}
		parts = append(parts, fmt.Sprintf("%d failed on %s own", failed, own))
	}
	if len(parts) > 0 {
		s += ": " + strings.Join(parts, ", ")
	}
	return strings.TrimSuffix(s+"; "+msg, "; ")
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// moveBatch commits a batch's transition, releasing its lock, and publishes
// it; it reports whether the commit happened.
func (r *Reactor) moveBatch(b *queue.Batch, to queue.State, c queue.BatchChange, attrs map[string]any) bool {
	from := b.State()
	c.Release, c.At = true, r.q.Now() // one stamp for every try: a landed try is known by its bytes
	err := r.retryMove(func(retried bool) error {
		c.Retried = retried
		return r.q.SetBatchStatus(r.work, b, to, c)
	})
	switch {
	case queue.MaybeApplied(err):
		r.log.Warn("reactor: batch commit outcome unknown (its reply was lost, then the batch moved on); its event is counted lost",
			"batch", b.ID, "from", from, "to", to, "err", err)
		r.bus.Lost(err)
		r.cfg.Observer.Moved("batch", from, Unknown)
		return false
	case errors.Is(err, queue.ErrStale):
		r.resultAbandoned("batch", b.ID, from, err)
		return false
	case queue.OutcomeUnknown(err):
		// As for a job's move: the next mover reads where the batch is,
		// and publishes this move's event if it landed.
		r.log.Warn("reactor: batch commit outcome unknown (ZooKeeper did not answer before the daemon stopped); if it landed, the batch's next mover publishes its event",
			"batch", b.ID, "from", from, "to", to, "err", err)
		r.cfg.Observer.Moved("batch", from, Unknown)
		r.unlockBatch(b)
		return false
	case err != nil:
		r.log.Error("reactor: batch commit failed; left in its state", "batch", b.ID, "from", from, "to", to, "err", err)
		r.cfg.Observer.Moved("batch", from, NotCommitted)
		r.unlockBatch(b)
		return false
	}
	r.cfg.Observer.Moved("batch", from, to.Folder())
	r.publishBatch(b, from, time.Now(), attrs)
	r.logBatchEnd(b)
	return true
}

// publishBatch publishes the event of b's move from "from", which landed
// at "at", under the move's arrival ID (decision 222), and notes it as
// published.
func (r *Reactor) publishBatch(b *queue.Batch, from queue.State, at time.Time, attrs map[string]any) {
	id := b.ArrivalID()
	acked := r.bus.PublishAcked(events.Event{Kind: events.KindBatch, ID: id, BatchID: b.ID, Time: at.UTC(), From: string(from), To: string(b.State()),
		Message: b.Status.Message, Attrs: attrs})
	r.published.add(b.ID, publishedMove{id: id, state: b.State(), acked: acked})
}

// noteBatch writes msg into batch b's message (queue.NoteBatch). Not
// written, the intake goes on: only a stale view is returned as such.
func (r *Reactor) noteBatch(ctx context.Context, b *queue.Batch, msg string, deferred *queue.Deferral) error {
	err := r.q.NoteBatch(ctx, b, msg, deferred)
	if err != nil && !errors.Is(err, queue.ErrStale) {
		r.log.Debug("reactor: why the batch's intake is retried not written into its status", "batch", b.ID, "err", err)
	}
	return err
}

func (r *Reactor) unlockBatch(b *queue.Batch) {
	if err := r.retry(func() error { return r.q.UnlockBatch(r.work, b) }); err != nil {
		r.log.Warn("reactor: unlock failed (the lock goes with the session)", "batch", b.ID, "err", err)
	}
}
