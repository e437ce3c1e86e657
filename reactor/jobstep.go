package reactor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor/queue"
)

func (r *Reactor) newJobPool(s queue.State, workers int) *jobPool {
	return &jobPool{
		name: string(s), workers: workers, log: r.log,
		wake: make(wakeup, 1), refs: make(chan string),
		list: func() ([]string, error) {
			refs, problems, err := r.q.Refs(s)
			for _, p := range problems {
				r.log.Warn("reactor: skipping", "err", p)
			}
			return refs, err
		},
		skip: func(ref string) bool {
			_, busy := r.working.Load(jidOf(ref))
			return busy || r.held.Load() || r.waiting[s].skip(jidOf(ref))
		},
		try: func(ctx context.Context, ref string) { r.tryJob(ctx, s, ref) },
	}
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
			r.wakeOnUnlock(s, jid)
		}
	}()
	if _, busy := r.working.LoadOrStore(jid, true); busy {
		return
	}
	defer r.working.Delete(jid)
	j, err := r.q.TryAcquireJob(s, ref)
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
	if s == queue.Pending {
		r.startJob(j)
	} else {
		r.runJob(ctx, s, j)
	}
}

// wakeOnUnlock watches the lock of a job another session holds: when that
// session ends its step or dies, the lock goes, the folder does not change,
// and this watch is what wakes the pool to take the job.
func (r *Reactor) wakeOnUnlock(s queue.State, jid string) {
	p := r.q.Path("/jobs/" + jid + "/lock")
	conn := r.cfg.Session.Conn
	// With a watch already set, only look: an orphaned lock of this session
	// must still be found, or that watch would wait for ever.
	_, watching := r.lockWait.LoadOrStore(p, true)
	var (
		ok  bool
		st  *zk.Stat
		ch  <-chan zk.Event
		err error
	)
	if watching {
		ok, st, err = conn.Exists(p)
	} else {
		ok, st, ch, err = conn.ExistsW(p)
	}
	if err != nil || !ok {
		if !watching {
			r.lockWait.Delete(p)
		}
		if err == nil {
			r.pools[sigJob(s)].Wake() // gone already
		}
		return
	}
	if _, busy := r.working.Load(jid); !busy && st.EphemeralOwner == conn.SessionID() {
		// This session's lock, yet no worker here holds the job: an
		// acquisition whose reply was lost and could not be confirmed.
		r.log.Warn("reactor: releasing a lock this session holds but no worker uses", "job", jid)
		if err := conn.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			// The lock stays: the next wake-up or rescan tries again.
			r.log.Warn("reactor: could not release the orphaned lock; will retry", "job", jid, "err", err)
			if !watching {
				r.lockWait.Delete(p)
			}
			return
		}
		// The watch fires, and wakes the pool.
	}
	if watching {
		return
	}
	go func() {
		<-ch
		r.lockWait.Delete(p)
		r.pools[sigJob(s)].Wake()
	}()
}

// startJob moves an acquired Pending job on: to Held when its collection is
// held, else to Estimating.
func (r *Reactor) startJob(j *queue.Job) {
	to := queue.Estimating
	if r.collectionHeld(j.Profile()) {
		to = queue.Held
	}
	r.move(j, to, queue.JobChange{}, nil)
}

// runJob runs state s's handler on an acquired job, retrying a retryable
// error with backoff while it keeps the lock, and commits the outcome.
func (r *Reactor) runJob(ctx context.Context, s queue.State, j *queue.Job) {
	h := r.cfg.Jobs[s]
	for attempt := 1; ; attempt++ {
		res, err := h.Handle(ctx, j)
		switch {
		case err == nil && res.Wait > 0:
			r.waiting[s].add(j.ID, time.Now().Add(res.Wait))
			r.unlock(j)
			time.AfterFunc(res.Wait, r.pools[sigJob(s)].Wake)
			return
		case err == nil:
			next, _ := queue.JobMachine.Success(s)
			r.move(j, next, res.Change, res.Attrs)
			return
		case ctx.Err() != nil:
			// Shutdown cancelled the step: leave the job where it is, for
			// this daemon's next run or another daemon.
			r.log.Info("reactor: step cancelled by shutdown; job left in its state", "job", j.ID, "state", s)
			r.unlock(j)
			return
		case IsFatal(err):
			r.move(j, queue.Failed, queue.JobChange{Message: fmt.Sprintf("%s: %v", s, err)}, nil)
			return
		case attempt >= cmpOr(r.cfg.StateAttempts[s], r.cfg.Attempts):
			r.move(j, queue.Failed, queue.JobChange{
				Message: fmt.Sprintf("%s failed after %d attempts: %v", s, attempt, err)}, nil)
			return
		}
		wait := backoff(r.cfg.Backoff, attempt)
		r.log.Warn("reactor: step failed; retrying", "job", j.ID, "state", s, "attempt", attempt, "in", wait, "err", err)
		if !sleep(ctx, wait) {
			r.unlock(j)
			return
		}
	}
}

// move commits a job's transition, releasing its lock, and publishes it. A
// stale view is abandoned: another session owns the job now. While
// ZooKeeper cannot be reached the commit is retried, so a server restart
// never leaves a job locked by this (surviving) session.
func (r *Reactor) move(j *queue.Job, to queue.State, c queue.JobChange, attrs map[string]any) {
	from := j.State()
	c.Release = true
	err := r.retry(func() error { return r.q.SetJobStatus(j, to, c) })
	switch {
	case errors.Is(err, queue.ErrStale):
		r.log.Info("reactor: job moved by another session; result abandoned", "job", j.ID, "state", from, "err", err)
		return
	case err != nil:
		r.log.Error("reactor: commit failed; job left in its state", "job", j.ID, "from", from, "to", to, "err", err)
		r.unlock(j)
		return
	}
	prio := j.Priority
	r.bus.Publish(events.Event{Kind: events.KindJob, BatchID: j.BatchID, JobID: j.ID,
		From: string(from), To: string(to), Priority: &prio, Message: c.Message, Attrs: attrs})
}

func (r *Reactor) unlock(j *queue.Job) {
	if err := r.retry(func() error { return r.q.UnlockJob(j) }); err != nil {
		r.log.Warn("reactor: unlock failed (the lock goes with the session)", "job", j.ID, "err", err)
	}
}

// retry runs a ZooKeeper write until it succeeds, fails for a reason other
// than an unreachable server, or the session is closed. It does not follow
// the work context: a write under way at shutdown should still land.
func (r *Reactor) retry(write func() error) error {
	wait := 50 * time.Millisecond
	for {
		err := write()
		if !queue.Transient(err) || r.cfg.Session.Closed() {
			return err
		}
		r.log.Warn("reactor: ZooKeeper unreachable; retrying the write", "in", wait, "err", err)
		time.Sleep(wait) // back-off between attempts while ZooKeeper is away
		wait = min(wait*2, 2*time.Second)
	}
}

// backoff is base doubled per attempt, at most a minute.
func backoff(base time.Duration, attempt int) time.Duration {
	d := base << (attempt - 1)
	if d > time.Minute || d <= 0 {
		return time.Minute
	}
	return d
}

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
