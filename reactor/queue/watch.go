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
// should look again at once rather than wait. A node read there and gone
// since gets no watch (gone fires at once): an exists watch on it would
// stay on the server and in the client until the node came back, which a
// released lock or a removed job or batch never does.
func (q *Queue) WatchOnce(ctx context.Context, w Wait) (fired <-chan zk.Event, changed bool, err error) {
	if w.Children {
		st, ch, err := q.zk.childrenW(ctx, w.Path)
		switch {
		case err == nil:
			return ch, !w.Present || st.Cversion != w.Cversion, nil
		case !errors.Is(err, zk.ErrNoNode):
			return nil, false, fmt.Errorf("watch %s: %w", q.rel(w.Path), err)
		case w.Present:
			return gone(), true, nil
		}
		// Not there: wait for it to appear.
	}
	if w.Present {
		st, ch, err := q.zk.getW(ctx, w.Path)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			return gone(), true, nil
		case err != nil:
			return nil, false, fmt.Errorf("watch %s: %w", q.rel(w.Path), err)
		}
		return ch, w.Data && st.Version != w.Version, nil
	}
	ok, _, ch, err := q.zk.existsW(ctx, w.Path)
	if err != nil {
		return nil, false, fmt.Errorf("watch %s: %w", q.rel(w.Path), err)
	}
	return ch, ok, nil
}

// WatchJobChange sets a one-shot watch on job jid's status, and tells
// whether it has moved on from version (a view's StatusVersion): another
// writer changed the job (an operator's cancel, fail or delete, or a
// session that took it over). fired delivers the status's next change; a
// job removed gets no watch, as in WatchOnce.
func (q *Queue) WatchJobChange(ctx context.Context, jid string, version int32) (fired <-chan zk.Event, changed bool, err error) {
	return q.WatchOnce(ctx, Wait{Path: q.jobPath(jid, "status"), Present: true, Data: true, Version: version})
}

// gone is the channel of a wait whose node has gone: it has fired.
func gone() <-chan zk.Event {
	ch := make(chan zk.Event)
	close(ch)
	return ch
}

// ReleaseOwnJobLock deletes a job's lock if this session holds it, and
// tells whether it did: for a lock whose acquisition's reply was lost and
// that no worker uses.
func (q *Queue) ReleaseOwnJobLock(ctx context.Context, jid string) (bool, error) {
	return q.releaseOwn(ctx, q.jobPath(jid, "lock"), nil)
}

// JobLockWait is the wait for a job's lock, held elsewhere, to go.
func (q *Queue) JobLockWait(ctx context.Context, jid string) Wait {
	return Wait{Path: q.jobPath(jid, "lock"), Present: true}
}
