package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/internal/backoff"
)

// op is one request of a transaction, with what to do when it alone fails.
// ZooKeeper rolls back the whole multi(), so a recovery that rewrites the
// request list and tries again never leaves a half-written change.
type op struct {
	req any
	// fence marks the versioned write that proves the caller's view is
	// current; its failure is a stale view, never retried.
	fence bool
	// recover, when set, is asked what to do after this op failed with err:
	// ops to put in its place (none to drop it), or an error to give up with.
	recover func(ctx context.Context, err error) ([]op, error)
	// witness marks a create whose presence, with its data, proves that a
	// transaction whose reply was lost took effect.
	witness bool
}

var acl = zk.WorldACL(zk.PermAll)

func create(p string, data []byte) op {
	return op{req: &zk.CreateRequest{Path: p, Data: data, Acl: acl}}
}

func set(p string, data []byte, version int32) op {
	return op{req: &zk.SetDataRequest{Path: p, Data: data, Version: version}}
}

func del(p string) op { return op{req: &zk.DeleteRequest{Path: p, Version: -1}} }

// fenceSet writes data to p only if p is still at version.
func fenceSet(p string, data []byte, version int32) op {
	o := set(p, data, version)
	o.fence = true
	return o
}

// fenceCheck fails the transaction unless p is still at version.
func fenceCheck(p string, version int32) op {
	return op{req: &zk.CheckVersionRequest{Path: p, Version: version}, fence: true}
}

// lockOp creates an ephemeral lock; if it exists, someone else holds it.
func lockOp(p string) op {
	return op{
		req: &zk.CreateRequest{Path: p, Acl: acl, Flags: zk.FlagEphemeral},
		recover: func(_ context.Context, err error) ([]op, error) {
			if errors.Is(err, zk.ErrNodeExists) {
				return nil, ErrLocked
			}
			return nil, err
		},
	}
}

// createRef creates an empty ref; if it is already there (a foreign writer
// got there first) it is left as it is.
func createRef(p string) op {
	o := create(p, nil)
	o.recover = func(_ context.Context, err error) ([]op, error) {
		if errors.Is(err, zk.ErrNodeExists) {
			return nil, nil
		}
		return nil, err
	}
	return o
}

// createIn creates a node whose parent folders (rels, under base) may not
// exist yet. When they are missing, they are created in the same multi() as
// the node, so that no reader ever sees a new folder empty (mrt-zk's
// reporter takes an empty batch-processing for a finished batch). Folders
// this queue has not seen yet are read first, and only the missing ones go
// into the multi(): a guess that fails costs ZooKeeper a commit, the reads
// cost none. A folder seen before is taken as there; should it have gone
// since, the multi() fails and the recovery reads them then.
func (q *Queue) createIn(ctx context.Context, p string, data []byte, base string, rels ...string) []op {
	dirs := make([]string, len(rels))
	dir := base
	for i, r := range rels {
		dir += "/" + r
		dirs[i] = dir
	}
	if q.folders.has(dir) {
		return []op{q.createInFolders(p, data, base, dirs)}
	}
	missing := q.missingFolders(ctx, dirs)
	if len(missing) == 0 {
		return []op{q.createInFolders(p, data, base, dirs)}
	}
	return append(missing, q.createAfterParents(p, data, base, dirs, true))
}

// missingFolders reads dirs and returns a create for each one not there.
// All are remembered as seen, the missing ones ahead of the multi() that
// makes them, so that the next creation in the same multi() (a batch's
// object chunks) does not create them twice; should that multi() fail,
// the next creation in them fails too and reads them again. A read that
// fails counts as missing: its create, should the folder be there after
// all, is dropped by createRef's own recovery.
func (q *Queue) missingFolders(ctx context.Context, dirs []string) []op {
	var ops []op
	for i, r := range q.getAll(ctx, dirs...) {
		if r.err != nil {
			ops = append(ops, createRef(dirs[i]))
		}
		q.folders.saw(dirs[i])
	}
	return ops
}

// createInFolders is createIn's node when its folders are there, or are
// taken to be: when they are not, it reads which are missing and tries
// again with those.
func (q *Queue) createInFolders(p string, data []byte, base string, dirs []string) op {
	o := create(p, data)
	o.recover = func(ctx context.Context, err error) ([]op, error) {
		switch {
		case errors.Is(err, zk.ErrNodeExists):
			return nil, nil
		case errors.Is(err, zk.ErrNoNode):
			for _, d := range dirs {
				q.folders.forget(d)
			}
			return append(q.missingFolders(ctx, dirs), q.createAfterParents(p, data, base, dirs, true)), nil
		}
		return nil, err
	}
	return o
}

// seen remembers facts of the tree (folders seen to exist, jobs found
// unreadable), up to a bound past which it starts again: one per batch
// bucket would otherwise pile up for as long as the daemon runs. A fact
// forgotten is only read again.
type seen struct {
	mu  sync.Mutex
	set map[string]bool
}

const maxSeen = 4096

func (f *seen) has(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.set[key]
}

func (f *seen) saw(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.set == nil || len(f.set) >= maxSeen {
		f.set = map[string]bool{}
	}
	f.set[key] = true
}

func (f *seen) clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.set = nil
}

func (f *seen) forget(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.set, key)
}

// createAfterParents is createIn's node once its parents are in the same
// multi(). A NoNode then means a folder read as there went meanwhile
// (again is true: every folder is created once more), or base is gone.
func (q *Queue) createAfterParents(p string, data []byte, base string, dirs []string, again bool) op {
	o := create(p, data)
	o.recover = func(_ context.Context, err error) ([]op, error) {
		switch {
		case errors.Is(err, zk.ErrNodeExists):
			return nil, nil
		case errors.Is(err, zk.ErrNoNode) && again:
			var ops []op
			for _, d := range dirs {
				ops = append(ops, createRef(d))
			}
			return append(ops, q.createAfterParents(p, data, base, dirs, false)), nil
		case errors.Is(err, zk.ErrNoNode):
			return nil, fmt.Errorf("%s: %w", q.rel(base), ErrNotFound)
		}
		return nil, err
	}
	return o
}

// delIfThere deletes p, or nothing when p is already gone.
func delIfThere(p string) op {
	o := del(p)
	o.recover = func(_ context.Context, err error) ([]op, error) {
		if errors.Is(err, zk.ErrNoNode) {
			return nil, nil
		}
		return nil, err
	}
	return o
}

// upsert writes p whether or not it exists.
func upsert(p string, data []byte, exists bool) op {
	if exists {
		o := set(p, data, -1)
		o.recover = func(_ context.Context, err error) ([]op, error) {
			if errors.Is(err, zk.ErrNoNode) {
				return []op{create(p, data)}, nil
			}
			return nil, err
		}
		return o
	}
	o := create(p, data)
	o.recover = func(_ context.Context, err error) ([]op, error) {
		if errors.Is(err, zk.ErrNodeExists) {
			return []op{set(p, data, -1)}, nil
		}
		return nil, err
	}
	return o
}

// maxAttempts bounds the recoveries of one transaction; each recovery fixes
// one op, so this is also the most repairs a broken tree gets in one change.
const maxAttempts = 8

// maxOutages bounds the tries of one transaction through connection
// trouble (about 8 s of back-off); then the caller decides.
const maxOutages = 12

// outage is the back-off before try n+1 of a request that met connection
// trouble, while the client reconnects; false once the tries are spent,
// the queue is closed or ctx ended.
func (q *Queue) outage(ctx context.Context, n int) bool {
	if n > maxOutages || q.closed() {
		return false
	}
	return backoff.Sleep(ctx, backoff.Delay(20*time.Millisecond, time.Second, n))
}

// commit runs ops as one multi(), recovering failed ops as they ask, and
// trying again while the connection is in trouble.
func (q *Queue) commit(ctx context.Context, ops []op) error {
	_, err := q.commitLanded(ctx, ops, false)
	return err
}

// commitLanded is commit for a change whose earlier try (an earlier call)
// may have landed (maybe): a fence that fails is then checked against the
// change's own bytes first, as for a try of this call whose reply was lost.
// zxid is the transaction's (every op of a multi() has the one zxid: a
// lock it creates was made at it), from its fencing write's reply or, the
// reply lost, from the node that showed it landed (applied); 0 when
// neither tells.
func (q *Queue) commitLanded(ctx context.Context, ops []op, maybe bool) (zxid int64, err error) {
	lost := maybe // a try's reply was lost: it may have been applied
	outages := 0
	pause := func() bool { outages++; return q.outage(ctx, outages) }
	// confirm asks whether a try whose reply was lost took effect (the
	// zxid it landed at; 0, not) or is known not to have (overtaken); while
	// ZooKeeper cannot say, it asks again after a pause.
	confirm := func() (zxid int64, overtaken bool) {
		for {
			zxid, overtaken, err := q.applied(ctx, ops)
			if err == nil || !Transient(err) || !pause() {
				return zxid, overtaken
			}
		}
	}
	for repairs := 0; repairs < maxAttempts; {
		reqs := make([]any, len(ops))
		for i, o := range ops {
			reqs[i] = o.req
		}
		resp, err := q.zk.multi(ctx, reqs...)
		if err == nil {
			return madeAt(resp), nil
		}
		if Transient(err) {
			// The request may have been applied before the reply was lost;
			// if ZooKeeper cannot say yet, try again after a pause.
			if zxid, _, _ := q.applied(ctx, ops); zxid != 0 {
				return zxid, nil
			}
			lost = true
			if !pause() {
				return 0, fmt.Errorf("zookeeper multi: %w", err)
			}
			continue
		}
		if lost {
			zxid, overtaken := confirm()
			if zxid != 0 {
				return zxid, nil // an earlier try whose reply was lost had done it
			}
			lost = !overtaken // else no try landed: another writer's change took its place
		}
		i, opErr := failedOp(resp)
		if i < 0 {
			return 0, fmt.Errorf("zookeeper multi: %w", err)
		}
		o := ops[i]
		if o.fence {
			return 0, &StaleError{Path: q.rel(reqPath(o.req)), Reason: staleReason(opErr), MaybeApplied: lost}
		}
		if o.recover == nil {
			return 0, fmt.Errorf("%s %s: %w", reqVerb(o.req), q.rel(reqPath(o.req)), opErr)
		}
		repl, rerr := o.recover(ctx, opErr)
		if rerr != nil {
			return 0, fmt.Errorf("%s %s: %w", reqVerb(o.req), q.rel(reqPath(o.req)), rerr)
		}
		if len(repl) == 0 {
			q.log.Debug("queue: repaired a change", "op", reqVerb(o.req), "path", q.rel(reqPath(o.req)), "was", opErr)
		}
		ops = slices.Concat(ops[:i], repl, ops[i+1:])
		repairs++
		if len(ops) == 0 {
			return 0, nil
		}
	}
	return 0, fmt.Errorf("zookeeper multi: still failing after %d repairs", maxAttempts)
}

// madeAt is the zxid of a multi() that landed, from its first reply with
// a stat (a setData's: its mzxid), or 0.
func madeAt(resp []zk.MultiResponse) int64 {
	for _, r := range resp {
		if r.Stat != nil {
			return r.Stat.Mzxid
		}
	}
	return 0
}

// applied tells whether a transaction whose reply was lost took effect (the
// zxid it landed at, read from the node that shows it; 0, not), or why it
// cannot tell. overtaken says it is known not to have: its fencing write's
// version (the one it would have made, which ZooKeeper makes once) holds
// other bytes, another writer's, or, the node past it, the job's holder
// names that version as the one its acquisition made; so no try of it
// landed. Else a version past that one tells nothing: a try may have
// landed and been written over. A lock it creates is the proof when there is one (an
// acquisition rewrites the status unchanged, so another session's
// acquisition would look the same): there, owned by this session. Else its
// witness create (there, with our data): a node only this change makes.
// Else its fencing write (at the next version, with our data), which a
// racer writing the same bytes matches too: two minters of one counter
// both write n+1, and the one whose reply was lost took the other's for
// its own.
func (q *Queue) applied(ctx context.Context, ops []op) (zxid int64, overtaken bool, err error) {
	for _, o := range ops {
		if r, ok := o.req.(*zk.CreateRequest); ok && r.Flags&zk.FlagEphemeral != 0 {
			ok, st, err := q.zk.exists(ctx, r.Path)
			if err == nil && ok && q.zk.owns(st) {
				return st.Czxid, false, nil
			}
			return 0, false, err
		}
	}
	for _, o := range ops {
		if r, ok := o.req.(*zk.CreateRequest); ok && o.witness {
			data, st, err := q.zk.get(ctx, r.Path)
			if err == nil && bytes.Equal(data, r.Data) {
				return st.Czxid, false, nil
			}
			return 0, false, ignoreNoNode(err)
		}
	}
	for _, o := range ops {
		if r, ok := o.req.(*zk.SetDataRequest); ok && o.fence {
			data, st, err := q.zk.get(ctx, r.Path)
			switch {
			case err != nil:
				return 0, false, ignoreNoNode(err)
			case st.Version == r.Version+1 && bytes.Equal(data, r.Data):
				return st.Mzxid, false, nil
			}
			return 0, st.Version == r.Version+1 || acquiredAt(data) == r.Version+1, nil
		}
	}
	return 0, false, nil
}

// acquiredAt is the status version that the acquisition of the job's
// holder named in status data made (JobHolder.Version), or 0: a status of
// no holder, or not a job's. A job's holder moves it on under its lock,
// keeping that version, so a change fenced on the version before it is
// known not to have landed however far the holder went since.
func acquiredAt(data []byte) int32 {
	var st struct {
		Holder *JobHolder `json:"holder"`
	}
	if json.Unmarshal(data, &st) != nil || st.Holder == nil {
		return 0
	}
	return st.Holder.Version
}

// ignoreNoNode is err, except that a missing node is an answer, not an error.
func ignoreNoNode(err error) error {
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	return err
}

// Unreachable tells whether err is the ZooKeeper client's own word that
// the queue could not be reached (no server, connection closed, session
// expired or moved), as opposed to trouble with something else.
func Unreachable(err error) bool {
	for _, e := range []error{zk.ErrNoServer, zk.ErrConnectionClosed, zk.ErrSessionMoved, zk.ErrClosing, zk.ErrSessionExpired, ErrNoAnswer} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Transient tells whether a ZooKeeper error may go away by itself: the
// server is unreachable, the connection broke, or the session moved or
// expired (the client opens a new one).
func Transient(err error) bool {
	if err == nil {
		return false
	}
	for _, e := range []error{zk.ErrNoServer, zk.ErrConnectionClosed, zk.ErrSessionMoved, zk.ErrClosing,
		zk.ErrSessionExpired, ErrNoAnswer, io.EOF, io.ErrUnexpectedEOF, syscall.ECONNRESET, syscall.EPIPE, syscall.ECONNREFUSED} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne)
}

func failedOp(resp []zk.MultiResponse) (int, error) {
	for i, r := range resp {
		for _, e := range []error{zk.ErrNoNode, zk.ErrNodeExists, zk.ErrBadVersion, zk.ErrNotEmpty, zk.ErrNoChildrenForEphemerals} {
			if errors.Is(r.Error, e) {
				return i, r.Error
			}
		}
	}
	return -1, nil
}

func staleReason(err error) string {
	switch {
	case errors.Is(err, zk.ErrBadVersion):
		return "changed by another session since it was read"
	case errors.Is(err, zk.ErrNoNode):
		return "deleted by another session since it was read"
	}
	return err.Error()
}

func reqPath(r any) string {
	switch r := r.(type) {
	case *zk.CreateRequest:
		return r.Path
	case *zk.SetDataRequest:
		return r.Path
	case *zk.DeleteRequest:
		return r.Path
	case *zk.CheckVersionRequest:
		return r.Path
	}
	return "?"
}

func reqVerb(r any) string {
	switch r.(type) {
	case *zk.CreateRequest:
		return "create"
	case *zk.SetDataRequest:
		return "set"
	case *zk.DeleteRequest:
		return "delete"
	}
	return "check"
}
