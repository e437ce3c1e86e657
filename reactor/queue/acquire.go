package queue

// A job's acquisition: a daemon taking a job it found in a state folder
// (locked and fenced in one multi()), and an operator's lock for an admin
// action.

import (
	"context"
	"errors"
	"fmt"
)

// AcquireJob locks the first job listed in state s (lowest priority number,
// then oldest) that no one holds, and returns it. It returns nil when there
// is none. Each candidate is read, then locked in one multi() that also
// rewrites its status unchanged at the version read: the lock is taken only
// if the job has not moved since, and the status version moves on, so a
// session that held the job before and lost its lock can no longer commit.
func (q *Queue) AcquireJob(ctx context.Context, s State) (*Job, error) {
	refs, problems, err := q.Refs(ctx, s)
	if err != nil {
		return nil, err
	}
	for _, p := range problems {
		q.log.Warn("queue: skipping", "err", p)
	}
	for _, ref := range refs {
		j, err := q.TryAcquireJob(ctx, s, ref, Admission{})
		if errors.Is(err, ErrLocked) {
			continue
		}
		if j != nil || err != nil {
			return j, err
		}
	}
	return nil, nil
}

// Admission is whether a daemon takes a job it has found. Check, when not
// nil, is asked about the job as read; it returns false to leave the job.
// Early asks it before anything is written, for a job whose content may
// make it another daemon's (its files on another host, its batch not
// started). Otherwise the lock goes out with the reads of the rest of the
// job, one round trip sooner, and a job Check turns down is released at
// once, as mrt-zk's own acquisition releases a job it locked and then
// found not to be its (decision 218).
type Admission struct {
	Check func(*Job) bool
	Early bool
	// Unreadable, when not nil, is told of a job that cannot be read (its
	// nodes corrupt or gone; logged, naming the node), with the wait for a
	// change of its status, which may mend it.
	Unreadable func(Wait)
}

func (a Admission) admits(j *Job) bool { return a.Check == nil || a.Check(j) }

// TryAcquireJob acquires the job of one ref in state s, as AcquireJob does.
// It returns ErrLocked when another session holds the job, and nil, nil
// when the job has moved on or cannot be read (which is logged with its
// path), or when admit turns it down.
func (q *Queue) TryAcquireJob(ctx context.Context, s State, ref string, admit Admission) (*Job, error) {
	_, jid, ok := parseRef(ref)
	if !ok {
		return nil, nil
	}
	h, moved, err := q.movedOrLocked(ctx, s, jid)
	if moved || err != nil {
		return nil, err
	}
	known := map[string]read{"status": h.status, "lock": h.lock}
	if !admit.Early && h.sound && !q.unreadable.has(unreadableKey(jid, h.status.stat.Version)) {
		return q.lockReading(ctx, s, ref, jid, h, known, admit)
	}
	j, err := q.jobAfter(ctx, jid, known)
	if !q.acquirable(s, ref, j, err) {
		q.tellUnreadable(admit, jid, h.status, false, err)
		return nil, nil
	}
	j.ref = ref // as listed: a foreign tree may file it under another priority
	j, err = q.AcquireView(ctx, j, admit.Check)
	if errors.Is(err, ErrStale) {
		return nil, nil
	}
	return j, err
}

// unreadableKey names a job found unreadable at a status version.
func unreadableKey(jid string, version int32) string { return fmt.Sprint(jid, "@", version) }

// lockReading is TryAcquireJob's late admission (decision 218): the lock,
// fenced on the status as read (h), with the reads of the rest (known
// holds what h read). The reads are vouched for by the status read before
// them, and the fence fails the lock if the job moved since.
func (q *Queue) lockReading(ctx context.Context, s State, ref, jid string, h head, known map[string]read, admit Admission) (*Job, error) {
	var j *Job
	var readErr error
	read := make(chan struct{})
	go func() {
		defer close(read)
		j, readErr = q.jobAfter(ctx, jid, known)
	}()
	held, made, err := q.lockFencedJob(ctx, jid, h.st, h.status.data, h.status.stat.Version)
	<-read
	switch {
	case errors.Is(err, ErrStale):
		return nil, nil
	case err != nil:
		return nil, err
	case !q.acquirable(s, ref, j, readErr) || !admit.admits(j):
		if readErr != nil { // the next round reads it before it locks it, at the version the fence left
			q.unreadable.saw(unreadableKey(jid, h.status.stat.Version+1))
			q.tellUnreadable(admit, jid, h.status, true, readErr)
		}
		if err := q.releaseOwnLock(ctx, q.jobPath(jid, "lock")); err != nil {
			q.log.Warn("queue: a job turned down is still locked by this session", "job", jid, "err", err)
		}
		return nil, nil
	}
	j.ref = ref
	j.taken(h.status.stat.Version+1, made, held)
	return j, nil
}

// holder is this daemon as a job's holder; nil in a Queue that registered
// no host (a CLI's), whose acquisitions leave the status as it is.
func (q *Queue) holder() *JobHolder {
	name := q.host.Load()
	if name == nil {
		return nil
	}
	return &JobHolder{Host: *name, Session: q.zk.conn.SessionID()}
}

// lockFenced is an acquisition's multi(): the lock at lock, and over the
// status at status (read at version as data) with this daemon as its
// holder (the status withHolder encodes), or data unchanged (a Queue with
// no host, or withHolder nil: another tool's item). It returns the holder
// the status then names (named when unchanged) and the lock's zxid
// (commitLanded).
func (q *Queue) lockFenced(ctx context.Context, lock, status string, data []byte, version int32, named *JobHolder,
	withHolder func(*JobHolder) []byte) (held *JobHolder, made int64, err error) {
	held = named
	if h := q.holder(); h != nil && withHolder != nil {
		h.Version = version + 1
		held, data = h, withHolder(h)
	}
	made, err = q.commitLanded(ctx, []op{lockOp(lock), fenceSet(status, data, version)}, false)
	return held, made, err
}

// lockFencedJob is lockFenced of job jid, whose status st was read at
// version as data.
func (q *Queue) lockFencedJob(ctx context.Context, jid string, st JobStatus, data []byte, version int32) (held *JobHolder, made int64, err error) {
	q.takesJobs.Store(true)
	return q.lockFenced(ctx, q.jobPath(jid, "lock"), q.jobPath(jid, "status"), data, version, st.Holder,
		func(by *JobHolder) []byte { st.Holder = by; return mustJSON(st) })
}

// keptHolder is the holder a move writes: the one the taking acquisition
// wrote (held), when the move keeps the lock this daemon's view took; none
// for a move that releases it, or an operator's (a Queue with no host).
// The session that took the lock, not this Queue's now (another after an
// expiry, 0 while it reconnects), so a try made again writes the first
// try's bytes.
func (q *Queue) keptHolder(keeps bool, held *JobHolder) *JobHolder {
	if keeps && q.host.Load() != nil {
		return held
	}
	return nil
}

// takenFrom is the holder a status named before an acquisition (was),
// when another than the one it names now (held): that daemon, or this
// host's earlier session, took the item and did not move it on.
func takenFrom(was, held *JobHolder) *JobHolder {
	if was != nil && held != nil && !was.same(*held) {
		return was
	}
	return nil
}

// taken marks j acquired by this session (lockFenced): its status now at
// version and naming held, its lock made at made.
func (j *Job) taken(version int32, made int64, held *JobHolder) {
	j.version, j.owner, j.Locked, j.lockMade = version, true, true, made
	j.TakenFrom = takenFrom(j.Status.Holder, held)
	j.Status.Holder = held
}

// acquirable tells whether a job read for an acquisition in state s from
// ref can be taken; it logs a job that cannot be read. err is what reading
// it gave; a job locked by another session is left to the acquisition's
// lock to find.
func (q *Queue) acquirable(s State, ref string, j *Job, err error) bool {
	switch {
	case errors.Is(err, ErrNotFound):
		q.log.Warn("queue: skipping ref without a job", "ref", q.rel(q.refPath(s, ref)))
		return false
	case err != nil:
		q.log.Warn("queue: skipping job", "ref", q.rel(q.refPath(s, ref)), "err", err)
		return false
	}
	return j.State() == s // else moved on since the folder was listed
}

// tellUnreadable tells admit of a job that reading it found corrupt or
// gone (err; a failed read says nothing of the job), with the wait for its
// status, as read (fenced: at the version the lock's fence left), to change.
func (q *Queue) tellUnreadable(admit Admission, jid string, status read, fenced bool, err error) {
	if admit.Unreadable == nil || !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNotFound) {
		return
	}
	w := Wait{Path: q.jobPath(jid, "status")}
	if status.err == nil {
		w.Present, w.Data, w.Version = true, true, status.stat.Version
		if fenced {
			w.Version++
		}
	}
	admit.Unreadable(w)
}

// head is a job's status and lock, read before the rest of it.
type head struct {
	status, lock read
	st           JobStatus // the status decoded, when sound
	sound        bool      // the status was there and could be decoded
}

// movedOrLocked reads only a job's status and lock (two reads, where the
// whole job is eleven): a ref from a listing is often of a job another
// daemon has moved on or holds. moved is true when the job is no longer in
// state s; err is ErrLocked when another session holds it. Anything else
// (gone, unreadable) is left to jobAfter to say, which reads the rest of
// the job after this status.
func (q *Queue) movedOrLocked(ctx context.Context, s State, jid string) (h head, moved bool, err error) {
	r := q.getAll(ctx, q.jobPath(jid, "status"), q.jobPath(jid, "lock"))
	h = head{status: r[0], lock: r[1]}
	if r[0].err != nil {
		return h, false, nil
	}
	st, err := decodeJobStatus(q.rel(q.jobPath(jid, "status")), r[0].data)
	switch {
	case err != nil:
		return h, false, nil
	case st.Status != s:
		return h, true, nil
	case r[1].err == nil:
		return h, false, fmt.Errorf("job %s: %w", jid, ErrLocked)
	}
	h.st, h.sound = st, true
	return h, false, nil
}

// Owned tells whether this view holds the job's lock: it acquired the job,
// and no write through it has since found the job changed (which lets
// the lock go).
func (j *Job) Owned() bool { return j.owner }

// StatusVersion is the version of the status node this view was read at,
// or last wrote: a change by anyone else moves it on.
func (j *Job) StatusVersion() int32 { return j.version }

// Handoff is a copy of a job this session has just moved (and released),
// for acquiring it in its new state without reading it again (AcquireView).
func (j *Job) Handoff() *Job {
	c := *j
	c.owner, c.Locked = false, false
	return &c
}

// AcquireView acquires a job from a view this session holds (Handoff)
// without reading it: the lock and the fence on the view's status version
// in one multi(). It returns ErrStale when the job changed since the view
// (the caller reads it), ErrLocked when another session holds it, and
// nil, nil when admit turns it down.
func (q *Queue) AcquireView(ctx context.Context, view *Job, admit func(*Job) bool) (*Job, error) {
	if admit != nil && !admit(view) {
		return nil, nil
	}
	held, made, err := q.lockFencedJob(ctx, view.ID, view.Status, mustJSON(view.Status), view.version)
	if err != nil {
		return nil, err
	}
	view.taken(view.version+1, made, held) // a new lock
	return view, nil
}

// LockJob takes a job's lock for an admin action, or fails with ErrLocked
// (lockToLoad).
func (q *Queue) LockJob(ctx context.Context, jid string) (*Job, error) { return q.lockJob(ctx, jid) }

func (q *Queue) lockJob(ctx context.Context, jid string) (*Job, error) {
	if !validName(jid, "jid") {
		return nil, fmt.Errorf("%q is not a job id (want jid followed by digits)", jid)
	}
	j, err := lockToLoad(ctx, q, "job", jid, q.LoadJob)
	if err != nil {
		return nil, err
	}
	j.owner, j.Locked = true, true
	return j, nil
}

// UnlockJob releases a lock this session took (unlockHeld).
func (q *Queue) UnlockJob(ctx context.Context, j *Job) error {
	if err := q.unlockHeld(ctx, "job", j.ID, j, j.owner, &j.lockMade); err != nil {
		return err
	}
	j.owner, j.Locked = false, false
	return nil
}
