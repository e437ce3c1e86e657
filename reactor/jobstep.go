package reactor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/internal/backoff"
	"github.com/ingestq/ingestq/reactor/queue"
)

func (r *Reactor) newJobPool(s queue.State, workers int) *jobPool {
	return &jobPool{
		name: string(s), state: s, workers: workers, log: r.log,
		wake: make(wakeup, 1), refs: make(chan string),
		list: func() ([]string, error) {
			refs, problems, err := r.q.Refs(r.work, s)
			for _, p := range problems {
				r.log.Warn("reactor: skipping", "err", p)
			}
			return refs, err
		},
		skip: func(ref string) bool {
			if c, busy := r.working.Load(jidOf(ref)); busy {
				r.passOver(s, jidOf(ref), c.(*claim))
				return true
			}
			if _, gate := r.gated.Load(jidOf(ref)); gate {
				return true
			}
			return r.holds.queueHeld() || r.outages.paused(s) || r.waiting[s].skip(jidOf(ref))
		},
		try: func(ctx context.Context, ref string) { r.tryJob(ctx, s, ref) },
		run: func(ctx context.Context, j *queue.Job) {
			if c, ok := r.working.Load(j.ID); ok {
				defer r.dropClaim(j.ID, c.(*claim)) // unless a move dropped or passed it on
			}
			r.runJob(ctx, s, j)
		},
		direct: make(chan *queue.Job),
	}
}

// claim marks a job a worker here is on (Reactor.working).
type claim struct {
	passedOver atomic.Bool // a pool's dispatcher skipped the job meanwhile
}

func jidOf(ref string) string {
	_, jid, _ := strings.Cut(ref, "-")
	return jid
}

// tryJob acquires a ref's job and runs its step.
func (r *Reactor) tryJob(ctx context.Context, s queue.State, ref string) {
	// Claimed before acquiring: wakeOnUnlock must never take a lock a worker
	// here is getting for an orphan.
	jid := jidOf(ref)
	held := false
	defer func() { // after the claim is dropped (defers run last-in first-out)
		if held {
			r.wakeOnUnlock(s, ref)
		}
	}()
	c := new(claim)
	if other, busy := r.working.LoadOrStore(jid, c); busy {
		// Another worker here holds it (the round saw no claim a moment
		// ago): woken when that claim ends, as the round would be.
		r.passOver(s, jid, other.(*claim))
		return
	}
	defer r.dropClaim(jid, c) // unless move dropped it at the commit
	j, err := r.acquire(ctx, s, ref)
	switch {
	case errors.Is(err, queue.ErrLocked):
		held = true
		return
	case err != nil:
		r.log.Warn("reactor: acquire failed", "state", s, "ref", ref, "err", err)
		return
	case j == nil:
		return
	}
	r.tookOver(s, j)
	if s == queue.Pending {
		r.startJob(j)
	} else {
		r.runJob(ctx, s, j)
	}
}

// acquire takes ref's job in state s: from this daemon's hand-off without
// reading it, or, when there is none or the job changed since, read.
func (r *Reactor) acquire(ctx context.Context, s queue.State, ref string) (*queue.Job, error) {
	admit := func(j *queue.Job) bool { return r.admit(s, j) }
	if p, ok := r.pools[sigJob(s)].(*jobPool); ok {
		if view := p.taken(ref); view != nil {
			j, err := r.q.AcquireView(ctx, view, admit)
			if !errors.Is(err, queue.ErrStale) {
				return j, err
			}
		}
	}
	unreadable := func(w queue.Wait) { r.passOverUnreadable(s, jidOf(ref), w) }
	return r.q.TryAcquireJob(ctx, s, ref, queue.Admission{Check: admit, Early: r.admitsEarly(s), Unreadable: unreadable})
}

// passOverUnreadable has state s's pool pass over a job that cannot be read
// until its status changes (w) or the rescan: a round read it and logged it
// again each time, and a round passing over one a worker was reading woke
// every pool (dropClaim), so a few broken refs kept the pools reading them
// thousands of times a second after any activity.
func (r *Reactor) passOverUnreadable(s queue.State, jid string, w queue.Wait) {
	key := "unreadable " + jid
	r.waiting[s].release(key) // the pass before, its time up: one entry a job
	r.passOverUntil(s, jid, key, w)
}

// passOverUntil has state s's pool pass over job jid until w's node
// changes, which releases every job deferred for the same key (what they
// wait for), or the rescan at the latest (a watch that could not be set).
func (r *Reactor) passOverUntil(s queue.State, jid, key string, w queue.Wait) {
	r.waiting[s].addFor(jid, key, time.Now().Add(r.cfg.Rescan))
	r.waits.on(r.work, w, sigJob(s), func() {
		if r.waiting[s].release(key) > 0 {
			r.wake(sigJob(s))
		}
	})
}

// admitsEarly tells whether a job in state s must be admitted before it is
// locked, because its content may make it another's to take: its files on
// another host (states past Downloading), its batch not started (Pending),
// its payload another pipeline's (decision 44: left untouched). Elsewhere
// the lock goes out with the reads of the job (decision 218).
func (r *Reactor) admitsEarly(s queue.State) bool {
	_, selective := r.cfg.Batches.(Selective)
	return s == queue.Pending || NeedsFiles(s) || selective
}

// passOver marks a claim as having made state s's pool pass jid over, so
// that the claim's end wakes the pools. Should the claim have ended while
// it was marked, its dropper may have looked before the mark: the pool is
// woken here instead.
func (r *Reactor) passOver(s queue.State, jid string, c *claim) {
	c.passedOver.Store(true)
	if now, ok := r.working.Load(jid); !ok || now != c {
		r.wake(sigJob(s))
	}
}

// dropClaim ends a worker's claim c on jid, if it still holds. A pool that
// listed the job while the claim held (its commit done, the claim not yet
// dropped) passed it over, and no folder will change again to wake that
// pool: it is woken now.
func (r *Reactor) dropClaim(jid string, c *claim) {
	if !r.working.CompareAndDelete(jid, c) {
		return
	}
	if c.passedOver.Load() {
		for _, st := range JobStates {
			r.wake(sigJob(st))
		}
	}
}

// wakeOnUnlock watches the lock of a job another session holds: when that
// session ends its step or dies, the lock goes, the folder does not change,
// and this watch is what wakes the pool to take the job. Until then the
// pool passes over the job's ref instead of reading it again each round
// (another daemon's job, mostly on its way to its next state).
func (r *Reactor) wakeOnUnlock(s queue.State, ref string) {
	jid := jidOf(ref)
	released, err := r.releaseOrphanJob(jid)
	if err != nil {
		// The lock stays: the next wake-up or rescan tries again.
		r.log.Warn("reactor: could not release an orphaned lock of this session; will retry", "job", jid, "err", err)
	}
	if released {
		r.log.Warn("reactor: released a lock this session held but no worker used", "job", jid)
		r.pools[sigJob(s)].Wake()
		return
	}
	p := r.pools[sigJob(s)].(*jobPool)
	p.left(ref)
	r.waits.on(r.work, r.q.JobLockWait(r.work, jid), sigJob(s), func() {
		p.gone.Delete(ref)
		p.Wake()
	})
}

// releaseOrphanJob releases job jid's lock when it is this session's and
// no worker here holds the job: an acquisition whose reply was lost and
// could not be confirmed. (Only the reactor takes job locks on its
// session: `serve` gives the API's and the dashboard's operator actions a
// session of their own.) It claims the job meanwhile, as tryJob does
// before acquiring: checked unclaimed and then released, two releases of
// one orphan, one after the other, took the lock a worker here acquired
// between them for the orphan, and the job's step ran unlocked.
func (r *Reactor) releaseOrphanJob(jid string) (bool, error) {
	c := new(claim)
	if _, busy := r.working.LoadOrStore(jid, c); busy {
		return false, nil
	}
	defer r.dropClaim(jid, c)
	return r.q.ReleaseOwnJobLock(r.work, jid)
}

// admit tells whether an acquired-to-be job may start its step now. A
// Pending job waits while its batch is Pending (its batch handler is still
// making the batch's jobs): a job that finished meanwhile could empty
// batch-processing before the last job exists, which a reporter takes for
// a finished batch. Its batch's move to Processing releases it. The jobs
// this daemon's batch handler made after the first of its run (which
// waits, and so keeps batch-processing from emptying) start at once
// (decision 189).
func (r *Reactor) admit(s queue.State, j *queue.Job) bool {
	if sel, ok := r.cfg.Batches.(Selective); ok {
		if !sel.Takes(j.Config.PayloadURL) {
			// Another pipeline's job: not ours to run. Passed over until
			// the rescan, so that the pool does not read it every round.
			r.waiting[s].add(j.ID, time.Now().Add(r.cfg.Rescan))
			return false
		}
	}
	if r.deferred(s, j) || r.heldElsewhere(s, j) {
		return false
	}
	if s != queue.Pending {
		return true
	}
	if _, ok := r.started.Load(j.BatchID); ok {
		return true
	}
	if _, ok := r.early.LoadAndDelete(j.ID); ok {
		return true // made by this daemon's batch handler after the batch's gate job
	}
	st, err := r.q.BatchState(r.work, j.BatchID)
	if err == nil && st == queue.Pending {
		r.waiting[queue.Pending].addFor(j.ID, j.BatchID, time.Now().Add(r.cfg.Rescan))
		// The batch may have started between the read and the deferral:
		// batchStarted marks it started before it releases, so either it
		// released this job or the mark is seen here.
		if _, ok := r.started.Load(j.BatchID); !ok {
			return false
		}
		r.waiting[queue.Pending].release(j.BatchID)
	}
	if err == nil {
		r.started.Store(j.BatchID, true) // a batch never goes back to Pending once it has jobs
	}
	return true // an unreadable batch does not hold its jobs back
}

// deferralGrace is how long after a deferral's end (queue.Deferral) a
// daemon other than the one that deferred the job waits before it takes
// it: that one's timer fires at the end, and its working folder holds the
// job's files downloaded so far.
const deferralGrace = 2 * time.Second

// deferred tells whether j's step in s is deferred still, by a daemon that
// said so in its status (a wait for a depositor's busy server); it is then
// passed over here until then (deferralLeft). A Result.Wait defers the job
// on its own daemon only: the others took it at once, each asking the busy
// server again, as many times a wait as there were daemons.
func (r *Reactor) deferred(s queue.State, j *queue.Job) bool {
	wait := r.deferralLeft(j.Status.Deferred)
	if wait <= 0 {
		return false
	}
	r.passOverJob(s, j.ID, wait)
	return true
}

// passOverJob has state s's pool pass over job jid, unread, for d, then
// look again; passOverBatch is the Pending batches'.
func (r *Reactor) passOverJob(s queue.State, jid string, d time.Duration) {
	r.waiting[s].add(jid, time.Now().Add(d))
	r.waits.after(d, r.pools[sigJob(s)].Wake)
}

// deferralLeft is how long deferral d (nil: none) holds here still, a
// minute at most (another host's clock may be ahead of this one's); 0
// once it is over. Past its end, a daemon other than the one that
// deferred waits deferralGrace more.
func (r *Reactor) deferralLeft(d *queue.Deferral) time.Duration {
	if d == nil {
		return 0
	}
	until := d.Until
	if d.Host != r.cfg.Host {
		until = until.Add(deferralGrace)
	}
	return min(time.Until(until), time.Minute)
}

// startEarly hands a job that this daemon's batch handler has just made,
// not the first of its run (the gate, decision 189), to the Pending pool:
// it may start while its batch is Pending, acquired from the hand-off
// without being read.
func (r *Reactor) startEarly(j *queue.Job) {
	r.early.Store(j.ID, true)
	if p, ok := r.pools[sigJob(queue.Pending)].(*jobPool); ok {
		p.arrived(j.Handoff())
		p.Wake()
	}
}

// batchStarted releases the Pending jobs that waited for their batch to
// leave Pending, and wakes the Pending pool.
func (r *Reactor) batchStarted(bid string) {
	r.started.Store(bid, true)
	r.pastPending.Store(bid, true)
	if r.waiting[queue.Pending].release(bid) > 0 {
		r.wake(sigJob(queue.Pending))
	}
}

// startJob moves an acquired Pending job on: to Held when its collection is
// held, else to Estimating.
func (r *Reactor) startJob(j *queue.Job) {
	to := queue.Estimating
	if r.holds.collectionHeld(r.work, j.Profile()) {
		to = queue.Held
	}
	r.move(j, to, queue.JobChange{}, nil)
}

// runJob runs state s's handler on an acquired job, retrying a retryable
// error with backoff while it keeps the lock, and commits the outcome.
func (r *Reactor) runJob(ctx context.Context, s queue.State, j *queue.Job) {
	h := r.cfg.Jobs[s]
	ctx, g := r.guardJob(ctx, j)
	defer g.stop()
	step := NewStep(j, func(ctx context.Context, c queue.JobChange) error {
		return g.write(func() error { return r.q.UpdateJob(ctx, j, c) })
	})
	step.obs = r.cfg.Observer
	defer r.stepBegan(j.ID, step)()
	attempts := cmp.Or(r.cfg.StateAttempts[s], r.cfg.Attempts)
	for attempt := 1; ; attempt++ {
		began := time.Now()
		res, err := h.Handle(ctx, step)
		ran := func(result StepResult) { r.cfg.Observer.StepRan(s, result, time.Since(began)) }
		switch {
		case err == nil && res.Wait > 0:
			ran(StepWait)
			r.waiting[s].add(j.ID, time.Now().Add(res.Wait))
			r.unlock(j)
			r.waits.after(res.Wait, r.pools[sigJob(s)].Wake)
			return
		case err == nil:
			ran(StepDone)
			r.outages.answered(step.backEnds())
			next, _ := queue.JobMachine.Success(s)
			r.move(j, next, res.Change, res.Attrs)
			return
		case jobChanged(ctx):
			ran(StepAbandoned)
			r.abandon(j, s, context.Cause(ctx), err)
			return
		case ctx.Err() != nil:
			// Shutdown cancelled the step: leave the job where it is, for
			// this daemon's next run or another daemon.
			ran(StepCancelled)
			r.log.Info("reactor: step cancelled by shutdown; job left in its state", "job", j.ID, "state", s)
			r.unlock(j)
			return
		case errors.Is(err, queue.ErrStale):
			ran(StepAbandoned)
			r.abandon(j, s, err, nil)
			return
		case IsUnavailable(err):
			ran(StepWait)
			r.waitForBackEnd(ctx, s, j, g, err)
			return
		case queue.Unreachable(err):
			ran(StepWait)
			attempt--
			if r.awaitQueue(ctx, err, "job", j.ID, "state", s) {
				continue
			}
			r.stopped(ctx, j, s, attempt, err)
			return
		case IsFatal(err):
			ran(StepFailed)
			r.move(j, queue.Failed, queue.JobChange{Message: fmt.Sprintf("%s: %v", s, err)}, nil)
			return
		case attempt >= attempts:
			ran(StepFailed)
			r.move(j, queue.Failed, queue.JobChange{
				Message: fmt.Sprintf("%s failed after %d attempts: %v", s, attempt, err)}, nil)
			return
		}
		// Why the step is tried again, where `ingestq ls jobs --stalled` and
		// `show` find it (the next transition replaces it). Not written, the
		// retry goes on; the fenced write also tells whether the job is still
		// this worker's. ZooKeeper away is waited out above, not noted.
		msg := retryingMessage(attempt, attempts, err)
		werr := g.write(func() error { return r.note(ctx, j, msg) })
		if errors.Is(werr, queue.ErrStale) {
			ran(StepAbandoned)
			r.abandon(j, s, werr, err)
			return
		}
		ran(StepRetry)
		wait := backoff.Delay(r.cfg.Backoff, time.Minute, attempt)
		if werr == nil {
			// Also the job's progress event, as a wait's message is
			// (handlers' sayWhyItWaits): a depositor following the job's
			// events hears why it stands still, not only a reader of its status.
			r.bus.Publish(events.Event{Kind: events.KindProgress, BatchID: j.BatchID, JobID: j.ID, To: string(s), Message: msg,
				Attrs: map[string]any{"waiting": true, "next_try": time.Now().Add(wait).UTC().Format(time.RFC3339)}})
		}
		r.log.Warn("reactor: step failed; retrying", "job", j.ID, "state", s, "attempt", attempt, "in", wait, "err", err)
		if !r.pause(ctx, wait) {
			r.stopped(ctx, j, s, attempt, err)
			return
		}
	}
}

// stopped ends a step whose wait for its next run was cut short: by its
// job changing under it, or by the daemon stopping. The next attempt is
// then for whoever takes the job next, here after a restart or on another
// host, not for the grace period, which would spend the attempts.
func (r *Reactor) stopped(ctx context.Context, j *queue.Job, s queue.State, attempt int, err error) {
	if jobChanged(ctx) {
		r.abandon(j, s, context.Cause(ctx), err)
		return
	}
	r.log.Info("reactor: stopping; the job is left in its state for its next attempt", "job", j.ID, "state", s, "attempt", attempt)
	r.unlock(j)
}

// move commits a job's transition, releasing its lock, and publishes it. A
// stale view is abandoned: another session owns the job now. While
// ZooKeeper cannot be reached the commit is retried, so a server restart
// never leaves a job locked by this (surviving) session.
//
// When this daemon can run the next step at once (next), the lock is kept
// instead, and the job goes to a waiting worker of that state without the
// write that would acquire it again (decision 211). To any reader the tree
// is then what it would be a moment later anyway: the job in its new
// state, locked by the daemon working it.
func (r *Reactor) move(j *queue.Job, to queue.State, c queue.JobChange, attrs map[string]any) {
	from, arrival, ref := j.State(), j.Status, j.Ref()
	r.awaitRecorded(j.ID, j.ArrivalID())
	// The move into from first: a daemon killed right after this commit
	// then takes no earlier move's event with it (decision 350).
	r.recoverArrival(j, arrival)
	next := r.nextHere(j, to, c)
	c.Release, c.At = next == nil, r.q.Now() // one stamp for every try: a landed try is known by its bytes
	defer r.ownMove(j.ID, to)()
	err := r.retryMove(func(retried bool) error {
		c.Retried = retried
		return r.q.SetJobStatus(r.work, j, to, c)
	})
	switch {
	case queue.MaybeApplied(err):
		// Our commit may have landed before the reply was lost, and the
		// job moved on past it since: the stream may lack this transition.
		// (A job whose next version is another's change, as after a
		// take-over, is known not moved by us: a plain stale view.)
		r.log.Warn("reactor: commit outcome unknown (its reply was lost, then the job moved on); its event is counted lost",
			"job", j.ID, "from", from, "to", to, "err", err)
		if next != nil {
			r.releaseKept(j.ID)
		}
		r.bus.Lost(err)
		r.cfg.Observer.Moved("job", from, Unknown)
		return
	case errors.Is(err, queue.ErrStale):
		r.resultAbandoned("job", j.ID, from, err)
		return
	case queue.OutcomeUnknown(err):
		// Given up at shutdown with ZooKeeper silent: the commit may have
		// landed. Whoever moves the job next reads where it is, and
		// publishes this move's event if it did (recoverArrival).
		r.log.Warn("reactor: commit outcome unknown (ZooKeeper did not answer before the daemon stopped); if it landed, the job's next mover publishes its event",
			"job", j.ID, "from", from, "to", to, "err", err)
		r.cfg.Observer.Moved("job", from, Unknown)
		r.releaseKept(j.ID) // this session's lock, whether the move took it along or not
		return
	case err != nil:
		r.log.Error("reactor: commit failed; job left in its state", "job", j.ID, "from", from, "to", to, "err", err)
		r.cfg.Observer.Moved("job", from, NotCommitted)
		r.unlock(j)
		return
	}
	committed := time.Now() // the event's time: when the move landed, not when it is published
	r.outages.up(j.ID)      // its step ended with an answer: a back end it waited for is back
	r.cfg.Observer.Moved("job", from, to.Folder())
	prio, id := j.Priority, j.ArrivalID()
	// Published and noted before the next pool may take the job: its worker
	// checks that this move's event is published (recoverArrival), and this
	// daemon's next move of the job waits for its record (awaitRecorded).
	acked := r.bus.PublishAcked(events.Event{Kind: events.KindJob, ID: id, BatchID: j.BatchID, JobID: j.ID, Time: committed.UTC(),
		From: string(from), To: string(to), Priority: &prio, Message: j.Status.Message, Attrs: attrs}) // with the job's note (queue.KeepNote)
	r.published.add(j.ID, publishedMove{id: id, state: to, acked: acked})
	if p, ok := r.pools[sigJob(from)].(*jobPool); ok {
		p.left(ref)
	}
	if queue.Bucket(from) == queue.BucketProcessing && queue.Bucket(to) != queue.BucketProcessing {
		r.jobLeft(j.BatchID)
	}
	r.logJobEnd(j, from)
	// Last: a job handed on is the next worker's from then on.
	if next != nil && r.handOn(next, j) {
		return
	}
	if next != nil {
		r.unlock(j) // the worker was taken meanwhile: the job waits its turn
	}
	// The job is no longer this worker's: when this daemon works the next
	// state too, its pool may take the job now, without waiting for the
	// folder's watch to report it.
	if c, ok := r.working.Load(j.ID); ok {
		r.dropClaim(j.ID, c.(*claim))
	}
	if p, ok := r.pools[sigJob(to)].(*jobPool); ok {
		p.arrived(j.Handoff())
		p.Wake()
	}
}

// resultAbandoned logs and counts a move of a job or batch (kind, id) that
// is known not to have landed: the item changed since this daemon read it
// (err, the stale view; not queue.MaybeApplied). When another session has
// locked the item since, this daemon's lock went with its session, expired
// while the step ran (a pause, a stall, ZooKeeper away past the session
// timeout), and that session took the item over: the line names who. The
// read is for those words only; the fence decided.
func (r *Reactor) resultAbandoned(kind, id string, from queue.State, err error) {
	if who := r.takenOverBy(kind, id); who != "" {
		r.log.Info("reactor: result abandoned: this daemon's session expired while the step ran and "+who+" took the "+kind+" over",
			kind, id, "state", from, "err", err)
	} else {
		r.log.Info("reactor: "+kind+" moved by another session; result abandoned", kind, id, "state", from, "err", err)
	}
	r.cfg.Observer.Moved(kind, from, Abandoned)
}

// takenOverBy names who holds job or batch id (kind) when a session other
// than this daemon's has it locked (queue.Holder's words); "" when it is
// not locked, is locked by this session, or cannot be read.
func (r *Reactor) takenOverBy(kind, id string) string {
	var locked bool
	var session int64
	switch kind {
	case "job":
		j, err := r.q.LoadJob(r.work, id)
		if err != nil {
			return ""
		}
		locked, session = j.Locked, j.LockSession
	case "batch":
		b, err := r.q.LoadBatch(r.work, id)
		if err != nil {
			return ""
		}
		locked, session = b.Locked, b.LockSession
	}
	if !locked || session == r.cfg.Session.Conn.SessionID() {
		return ""
	}
	return r.q.SessionHolder(r.work, session)
}

// nextHere is the pool of state to when this daemon may run the job's step
// in it at once: a worker of that state is waiting, nothing holds the job
// back (a held queue, a deferral), and its files are here. nil otherwise:
// the move releases the lock and the job takes its turn.
func (r *Reactor) nextHere(j *queue.Job, to queue.State, c queue.JobChange) *jobPool {
	p, ok := r.pools[sigJob(to)].(*jobPool)
	if !ok || to == queue.Pending || p.idle.Load() == 0 || r.holds.queueHeld() || r.outages.paused(to) || r.waiting[to].skip(j.ID) {
		return nil
	}
	cfg := j.Config
	if c.Config != nil {
		cfg = *c.Config
	}
	if h := cfg.WorkingHost; h != "" && h != r.cfg.Host && NeedsFiles(to) {
		return nil
	}
	if sel, ok := r.cfg.Batches.(Selective); ok && !sel.Takes(cfg.PayloadURL) {
		return nil
	}
	return p
}

// handOn gives a job moved with its lock kept to a waiting worker of p,
// the worker's claim in place of this one's (a dispatcher that passed the
// job over is still woken when the claim ends). false: no worker waits.
func (r *Reactor) handOn(p *jobPool, j *queue.Job) bool {
	c := new(claim)
	old, had := r.working.Swap(j.ID, c)
	if had {
		c.passedOver.Store(old.(*claim).passedOver.Load())
	}
	if p.hand(j) {
		return true
	}
	if had {
		r.working.Store(j.ID, old)
	} else {
		r.working.Delete(j.ID)
	}
	return false
}

// releaseKept lets go of the lock a move meant to keep, when the move's
// outcome is unknown: the job may have moved on without this daemon.
func (r *Reactor) releaseKept(jid string) {
	if _, err := r.q.ReleaseOwnJobLock(r.work, jid); err != nil {
		r.log.Warn("reactor: could not release a job's lock after an unknown commit (it goes with the session)", "job", jid, "err", err)
	}
}

// waitForBackEnd leaves a job whose step found a back end out in its
// state, its attempts unspent, until the back end's next try (decision
// 252). The job's status message says what it waits for.
func (r *Reactor) waitForBackEnd(ctx context.Context, s queue.State, j *queue.Job, g *guard, err error) {
	until, alone := r.outages.down(s, j.Ref(), err, r.cfg.Backoff) // deferred until then, or the outage's end (waitForBackEndUntil)
	d := time.Until(until)
	msg := fmt.Sprintf("%s: %v", WaitingPrefix, err)
	if alone {
		msg += " (it answers other jobs' steps: this job alone waits)"
	}
	r.log.Warn("reactor: a back end is out; the job waits for its next try", "state", s, "job", j.ID, "next_try_in", d.Round(time.Millisecond), "alone", alone, "err", err)
	werr := g.write(func() error { return r.note(ctx, j, msg) })
	if errors.Is(werr, queue.ErrStale) {
		r.outages.gone(j.ID) // an operator's or another session's now: it waits here no more
		r.abandon(j, s, werr, err)
		return
	}
	r.unlock(j)
	r.waits.after(d, r.pools[sigJob(s)].Wake)
}

// waitForBackEndUntil has state s's pool pass over job jid until t, a
// back end's next try; a zero t, the back end is back: the pool may take
// the job at once.
func (r *Reactor) waitForBackEndUntil(s queue.State, jid string, t time.Time) {
	r.waiting[s].add(jid, t)
	if t.IsZero() {
		r.wake(sigJob(s))
	}
}

// note writes msg into j's status message, fenced: ErrStale when the job
// is no longer this worker's.
func (r *Reactor) note(ctx context.Context, j *queue.Job, msg string) error {
	werr := r.q.UpdateJob(ctx, j, queue.JobChange{Message: msg})
	if werr != nil && !errors.Is(werr, queue.ErrStale) {
		r.log.Debug("reactor: the step's reason not written into the job's status", "job", j.ID, "err", werr)
	}
	return werr
}

// abandon drops a step whose job changed under it (err, the stale write's
// error; stepErr, the step's own when it failed first): an operator failed or
// cancelled it, or this session lost it and another took it over. Running
// the step again would work on a job that is no longer this worker's, so
// it stops here. The fenced write that found the change let go of this
// worker's lock (queue.UpdateJob); any other stale error leaves the lock
// to unlock, which refuses a lock this view does not own.
func (r *Reactor) abandon(j *queue.Job, s queue.State, err, stepErr error) {
	args := []any{"job", j.ID, "state", s, "err", err}
	if stepErr != nil {
		args = append(args, "step_err", stepErr) // what the step met, likely the change itself (a lock gone)
	}
	r.log.Info("reactor: job changed under its step (an operator or another session); step abandoned", args...)
	r.cfg.Observer.Moved("job", s, Abandoned)
	if j.Owned() {
		r.unlock(j)
	}
}

func (r *Reactor) unlock(j *queue.Job) {
	if err := r.retry(func() error { return r.q.UnlockJob(r.work, j) }); err != nil {
		r.log.Warn("reactor: unlock failed (the lock goes with the session)", "job", j.ID, "err", err)
	}
}

// retry runs a ZooKeeper write until it succeeds, fails for a reason other
// than an unreachable server, or the work context ends. It outlives the
// acquire context (a write under way at shutdown should still land, within
// the grace period); once the grace period is over it gives up, and the
// job stays locked by this session until the session is closed at exit,
// then in its state for the next daemon.
func (r *Reactor) retry(write func() error) error {
	for try := 1; ; try++ {
		err := write()
		if !queue.Transient(err) || r.cfg.Session.Closed() {
			return err
		}
		wait := backoff.Delay(50*time.Millisecond, 2*time.Second, try)
		r.log.Debug("reactor: ZooKeeper unreachable; retrying the write", "in", wait, "err", err) // the session logs the outage once
		if !backoff.Sleep(r.work, wait) {
			r.log.Warn("reactor: shutting down; the write is given up, its item stays where it was", "err", err)
			return err
		}
	}
}

// pause waits d before a step's next attempt. It reports false when the
// step's context ends first (its job changed under it, or the grace
// period ended) or the daemon stops.
func (r *Reactor) pause(ctx context.Context, d time.Duration) bool {
	ctx, done := r.untilStop(ctx)
	defer done()
	return backoff.Sleep(ctx, d)
}

// untilStop is ctx, ended also when the daemon stops; done releases it.
func (r *Reactor) untilStop(ctx context.Context) (_ context.Context, done func()) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(r.stopping, cancel)
	return ctx, func() { stop(); cancel() }
}

// awaitQueue waits for the ZooKeeper session that a step (named by args)
// found out of reach (err), and then --backoff more (the client may not
// know yet that its connection broke). ZooKeeper is the queue itself: its
// outage (a server's restart) is no fault of the job, batch or request,
// and spends none of its attempts. It reports false when ctx ends or the
// daemon stops first.
func (r *Reactor) awaitQueue(ctx context.Context, err error, args ...any) bool {
	r.log.Warn("reactor: ZooKeeper is out of reach; the step runs again once it is back, its attempt unspent", append(args, "err", err)...)
	ctx, done := r.untilStop(ctx)
	defer done()
	return r.cfg.Session.WaitState(ctx, zk.StateHasSession) == nil && backoff.Sleep(ctx, r.cfg.Backoff)
}

// retryMove is retry for a move (of a job, a batch, a request): every try
// after one that got no answer is told so (retried), and then checks
// whether that try landed before taking a failed fence for another
// session's change (decision 228). Each try writes the same bytes (one
// stamp, set by the caller), by which a landed one is known.
func (r *Reactor) retryMove(try func(retried bool) error) error {
	retried := false
	return r.retry(func() error {
		err := try(retried)
		retried = retried || queue.Transient(err)
		return err
	})
}

// lastFew is how many jobs a batch-processing folder may have held at its
// last listing for a job leaving it to be worth a report try: the listing
// may lag a few moves behind, and a try that finds jobs left costs one
// batch read.
const lastFew = 4

// jobLeft hands a batch whose job this daemon has just moved out of
// batch-processing to the report pool at once, when that job may have been
// the last: the pool then checks, as for a watch's news, without waiting
// for the folder's watch to report it empty. The watch stays the proof for
// every other case (a lagging listing, a foreign writer's move).
func (r *Reactor) jobLeft(bid string) {
	if n, ok := r.inProcessing.Load(bid); ok && n.(int) <= lastFew {
		r.queueReport(bid)
		r.wake(sigReport)
	}
}
