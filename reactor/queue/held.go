package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/internal/backoff"
)

// The locks this Queue's views hold, batches' and admins' jobs', shared by
// both kinds: an item's turn (one acquisition here reads and locks it at a
// time), its mark (held: the view holding its lock), and the release of a
// lock of this session that no view here holds (an orphan).

// turn waits until no other acquisition of this Queue is looking at batch
// or job id (a job's: an admin's lock, a releaser), and claims it until
// done is called. A look waits rather than passing the batch over: the one
// under way may be for other states (the intake's, for Pending, finding it
// Processing), and would leave the batch unread by the look its wake-up
// was for.
func (q *Queue) turn(ctx context.Context, id string) (done func(), err error) {
	mine := make(chan struct{})
	for {
		other, busy := q.turns.LoadOrStore(id, mine)
		if !busy {
			return func() { q.turns.Delete(id); close(mine) }, nil
		}
		q.log.Debug("queue: another acquisition here is looking at the batch or job; waiting for its turn", "id", id)
		select {
		case <-other.(chan struct{}):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// holds tells whether a view of this Queue holds the lock of batch (or,
// an admin's view, job) id.
func (q *Queue) holds(id string) bool {
	_, ok := q.held.Load(id)
	return ok
}

// releaseOrphan lets go of the lock of the kind id, this session's while no
// view here holds the item: an acquisition whose commit landed although
// its caller saw an error (a reply lost that applied could not confirm,
// then maxOutages or the context's end), or an admin's unlock that failed.
// Left, the lock would stay as long as the session, and every look, here
// and on every host, would wait on it. Only a caller in the item's turn
// calls it: no other acquisition here is then between its commit and its
// mark. made is releaseOwn's (nil: any lock of this session). A job's lock
// is left on a Queue whose session takes jobs as a worker: it may be a
// worker's, which the reactor's claims alone tell (releaseOrphanJob). It
// tells whether the lock is gone.
func (q *Queue) releaseOrphan(ctx context.Context, kind, id string, made *int64) (bool, error) {
	if kind == "job" && q.takesJobs.Load() {
		q.log.Warn("queue: an admin's job lock on a worker's session is left to the reactor's release of orphans", "job", id)
		return false, nil
	}
	released, err := q.releaseOwn(ctx, q.lockPath(kind, id), made)
	if released {
		q.log.Warn("queue: released a lock this session held but no worker used", kind, id)
	}
	return released, err
}

// releaseOrphanLater is releaseOrphan of the kind id, in the item's turn
// and unless a view here holds it, tried until ZooKeeper answers: for an
// admin's lock (lockToLoad) that failed after its create may have landed
// (its reply lost and not confirmed before maxOutages or the request's
// end, or the lock's release after a failed load unanswered), and for an
// admin's unlock that failed (unlockAdmin). No look on an admin's session
// releases an orphan (the API's Queue acquires only batches, in
// StopFeeding; the reactor watches a job's as another session's), and
// every host waited on it until the daemon restarted. A newer admin lock
// here marks its view in the turn; a lock made after the first one found
// (the first's delete landed, its reply lost) is left (made). It stops
// once the Queue is closed (WithClosed; the lock goes with the session),
// or its session is no longer the lock's (an expired session's locks went
// with it). Without WithClosed, only a request in flight at the close
// tells (ErrClosing): a closed connection answers every later request
// ErrConnectionClosed, as a broken one does.
func (q *Queue) releaseOrphanLater(kind, id string) {
	session := q.zk.conn.SessionID()
	var made int64
	for try := 1; ; try++ {
		var err error
		if done, terr := q.turn(context.Background(), id); terr == nil { // no context: it never ends
			if !q.holds(id) {
				_, err = q.releaseOrphan(context.Background(), kind, id, &made)
			}
			done()
		}
		if !Transient(err) || errors.Is(err, zk.ErrClosing) || q.closed() || q.zk.conn.SessionID() != session {
			if err != nil {
				q.log.Warn("queue: could not release a lock an admin's failed lock or unlock may have left", kind, id, "err", err)
			}
			return
		}
		if try == 1 {
			q.log.Info("queue: an admin's failed lock or unlock may have left its lock; released once ZooKeeper answers", kind, id, "err", err)
		}
		backoff.Sleep(context.Background(), backoff.Delay(50*time.Millisecond, 2*time.Second, try))
	}
}

// lockToLoad takes the lock of the kind id (a job, a batch) for an admin
// action, then loads what it guards, and marks that view held (held), in
// the item's turn; the lock is let go again when the load fails. It reads
// no lock first: run it on a session no worker uses (decision 226): else,
// a reply lost, the admin or the worker takes the other's lock for its own
// (applied knows the session). Failing for another reason than ErrLocked
// or ErrNotFound (ZooKeeper unanswering), it may have left a lock of its
// own, released later (releaseOrphanLater).
func lockToLoad[T any](ctx context.Context, q *Queue, kind, id string, load func(context.Context, string) (T, error)) (T, error) {
	var none T
	done, err := q.turn(ctx, id)
	if err != nil {
		return none, err
	}
	defer done()
	p := q.lockPath(kind, id)
	ok, err := q.tryLock(ctx, p, "")
	switch {
	case errors.Is(err, ErrNotFound):
		return none, notFound(kind, id)
	case err != nil:
		go q.releaseOrphanLater(kind, id) // after this turn: done is deferred
		return none, err
	case !ok:
		return none, fmt.Errorf("%s %s: %w", kind, id, ErrLocked)
	}
	v, err := load(ctx, id)
	if err != nil {
		if rerr := q.releaseOwnLock(ctx, p); rerr != nil {
			go q.releaseOrphanLater(kind, id)
		}
		return none, err
	}
	q.held.Store(id, v) // in the turn: no releaser here sees the lock unmarked
	return v, nil
}

// unlockHeld releases the lock of the kind id, which this session must
// hold (owner) through view, the one made names (releaseOwn), and unmarks
// view. It releases nothing while another view here is marked as the
// holder: view's lock went (a move that landed unconfirmed, an expired
// session) and an acquisition here took the item since, so the lock
// there, the session's, is that view's. It takes no turn: an acquisition
// between its commit and its mark is not seen.
func (q *Queue) unlockHeld(ctx context.Context, kind, id string, view any, owner bool, made *int64) error {
	if !owner {
		return fmt.Errorf("%s %s: this session does not hold its lock", kind, id)
	}
	if held, ok := q.held.Load(id); ok && held != view {
		q.log.Info("queue: the lock went from this view and another view here holds it; left", kind, id)
		return nil
	}
	if _, err := q.releaseOwn(ctx, q.lockPath(kind, id), made); err != nil {
		return err
	}
	q.held.CompareAndDelete(id, view) // after the delete: else a look here could take the lock for an orphan
	return nil
}

// lockPath is the lock node of the kind ("batch", "job") id.
func (q *Queue) lockPath(kind, id string) string {
	if kind == "job" {
		return q.jobPath(id, "lock")
	}
	return q.batchPath(id, "lock")
}
