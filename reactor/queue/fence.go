package queue

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-zookeeper/zk"
)

// fenceNode is the node under sessionsDir that this Queue's session made
// for itself (sessionNode): ephemeral, so it goes when the session ends.
type fenceNode struct {
	mu   sync.Mutex
	sid  int64  // the session that made path; 0 for none yet
	path string // its node: sessionsDir/<sid>-<seq>
}

// deleteOwn deletes p, an ephemeral node of this session that st
// describes (a lock), in one multi with a check that the session's own
// node is there. go-zookeeper keeps a request that was still unsent when
// its connection broke and, with several servers, may send it on the new
// session it opens by itself after an expiry. A plain delete would then
// take the lock another session made at p since (every lock is at version
// 0); the check fails instead, since the node went with the old session.
// deleted is false when p changed or went, or the session ended.
func (q *Queue) deleteOwn(ctx context.Context, p string, st *zk.Stat) (deleted bool, err error) {
	for try := 0; try < 2; try++ {
		node, err := q.sessionNode(ctx, st.EphemeralOwner)
		if err != nil || node == "" {
			return false, err
		}
		resp, err := q.zk.deleteWhile(ctx, node, p, st.Version)
		switch i, _ := failedOp(resp); {
		case i == 0:
			// The session ended, or its node was deleted by hand: made
			// again while the session lives.
			q.fence.forget(node)
			continue
		case i > 0:
			return false, nil
		case err != nil:
			return false, err
		}
		return true, nil
	}
	return false, nil
}

// sessionNode returns the node session sid made for itself, making it on
// first use; "" when sid is not the client's session any more (it ended).
// The node's name is sequential: no request of another session, however
// late go-zookeeper sends it, can make the same path again. The path is
// sid's once the create's reply came back while sid was still the client's
// session, for go-zookeeper moves to a new session only after sid expired;
// a create that went out on a later session made a node that is not sid's,
// deleted again (one that got no answer stays with the session it reached,
// checked by none).
func (q *Queue) sessionNode(ctx context.Context, sid int64) (string, error) {
	f := &q.fence
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sid == sid && f.path != "" {
		return f.path, nil
	}
	if sid != q.zk.conn.SessionID() {
		return "", nil
	}
	var p string
	var err error
	for remade := false; ; remade = true {
		if err = q.ensureDirs(ctx, sessionsDir); err != nil {
			return "", err
		}
		p, err = q.zk.create(ctx, q.Path(fmt.Sprintf("%s/0x%x-", sessionsDir, sid)), nil, zk.FlagEphemeral|zk.FlagSequence)
		if !errors.Is(err, zk.ErrNoNode) || remade {
			break
		}
		// The folder was deleted by hand: made again now, for NoNode is no
		// transient error, and an unlock failing with it is given up.
		q.folders.forget(q.Path(sessionsDir))
	}
	if err != nil {
		return "", fmt.Errorf("create this session's node in %s: %w", sessionsDir, err)
	}
	if sid != q.zk.conn.SessionID() {
		_ = q.zk.delete(ctx, p, -1) // best effort: it goes with that session anyway
		return "", nil
	}
	f.sid, f.path = sid, p
	return p, nil
}

// forget drops path, found gone.
func (f *fenceNode) forget(path string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.path == path {
		f.sid, f.path = 0, ""
	}
}
