package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"
)

// WatchOnce sets a one-shot watch for w: on the node (it appears, goes or
// changes), and with w.Children on its children too. The channel receives
// when the watch fires. changed is true when the node already differs from
// what w says was read (there or not, its children's or, with w.Data, its
// data's version): the caller
// should look again at once rather than wait.
func (q *Queue) WatchOnce(ctx context.Context, w Wait) (fired <-chan zk.Event, changed bool, err error) {
	if w.Children {
		st, ch, err := q.zk.childrenW(ctx, w.Path)
		switch {
		case err == nil:
			return ch, !w.Present || st.Cversion != w.Cversion, nil
		case !errors.Is(err, zk.ErrNoNode):
			return nil, false, fmt.Errorf("watch %s: %w", q.rel(w.Path), err)
		}
		// Not there: wait for it to appear.
	}
	ok, st, ch, err := q.zk.existsW(ctx, w.Path)
	if err != nil {
		return nil, false, fmt.Errorf("watch %s: %w", q.rel(w.Path), err)
	}
	return ch, ok != w.Present || ok && w.Data && st.Version != w.Version, nil
}

// WatchJobChange sets a one-shot watch on job jid's status, and tells
// whether it has moved on from version (a view's StatusVersion): another
// writer changed the job (an operator's cancel, fail or delete, or a
// session that took it over). fired delivers the status's next change.
func (q *Queue) WatchJobChange(ctx context.Context, jid string, version int32) (fired <-chan zk.Event, changed bool, err error) {
	ok, st, ch, err := q.zk.existsW(ctx, q.jobPath(jid, "status"))
	if err != nil {
		return nil, false, fmt.Errorf("watch job %s: %w", jid, err)
	}
	return ch, !ok || st.Version != version, nil
}

// ReleaseOwnJobLock deletes a job's lock if this session holds it, and
// tells whether it did: for a lock whose acquisition's reply was lost and
// that no worker uses.
func (q *Queue) ReleaseOwnJobLock(ctx context.Context, jid string) (bool, error) {
	return q.releaseOwn(ctx, q.jobPath(jid, "lock"))
}

// JobLockWait is the wait for a job's lock, held elsewhere, to go.
func (q *Queue) JobLockWait(ctx context.Context, jid string) Wait {
	return Wait{Path: q.jobPath(jid, "lock"), Present: true}
}
