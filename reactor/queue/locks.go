package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// Queue hold names under /locks/queue.
const (
	QueueIngest      = "ingest"
	QueueAccessSmall = "accessSmall"
	QueueAccessLarge = "accessLarge"
)

// Holds are persistent nodes: they outlive the session that set them and are
// lifted only by an admin action.

// HoldQueue stops new acquisitions on a queue. It reports false when the
// queue was already held.
func (q *Queue) HoldQueue(ctx context.Context, name string) (bool, error) {
	return q.createFlag(ctx, "/locks/queue/"+name)
}

// ReleaseQueue lifts a queue hold. It reports false when there was none.
func (q *Queue) ReleaseQueue(ctx context.Context, name string) (bool, error) {
	return q.deleteFlag(ctx, "/locks/queue/"+name)
}

// QueueHeld tells whether a queue is held.
func (q *Queue) QueueHeld(ctx context.Context, name string) (bool, error) {
	return q.flag(ctx, "/locks/queue/"+name)
}

// HoldCollection holds a profile's collection: daemons then send its Pending
// batches and jobs to Held instead of working on them.
func (q *Queue) HoldCollection(ctx context.Context, profile string) (bool, error) {
	if err := checkNodeName("collection", profile); err != nil {
		return false, err
	}
	return q.createFlag(ctx, "/locks/collections/"+profile)
}

// ReleaseCollection lifts a collection hold. Batches and jobs already Held
// stay Held until released one by one.
func (q *Queue) ReleaseCollection(ctx context.Context, profile string) (bool, error) {
	if err := checkNodeName("collection", profile); err != nil {
		return false, err
	}
	return q.deleteFlag(ctx, "/locks/collections/"+profile)
}

// CollectionHeld tells whether a profile's collection is held.
func (q *Queue) CollectionHeld(ctx context.Context, profile string) (bool, error) {
	if profile == "" || checkNodeName("collection", profile) != nil {
		return false, nil
	}
	return q.flag(ctx, "/locks/collections/"+profile)
}

// HeldCollections lists the held collections.
func (q *Queue) HeldCollections(ctx context.Context) ([]string, error) {
	return q.children(ctx, q.Path("/locks/collections"))
}

// Hold is one hold in force.
type Hold struct {
	Kind  string    `json:"kind"` // "queue" or "collection"
	Name  string    `json:"name"` // the queue (ingest, accessSmall, accessLarge) or the profile
	Since time.Time `json:"since"`
}

// Holds lists the queue and collection holds in force, with when each was
// set (its node's creation time).
func (q *Queue) Holds(ctx context.Context) ([]Hold, error) {
	var out []Hold
	for _, kind := range []string{"queue", "collection"} {
		dir := "/locks/" + kind
		if kind == "collection" {
			dir = "/locks/collections"
		}
		names, err := q.children(ctx, q.Path(dir))
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, err
		}
		slices.Sort(names)
		for _, n := range names {
			ok, st, err := q.zk.exists(ctx, q.Path(dir+"/"+n))
			if err != nil {
				return nil, fmt.Errorf("check %s/%s: %w", dir, n, err)
			}
			if ok {
				out = append(out, Hold{Kind: kind, Name: n, Since: time.UnixMilli(st.Ctime)})
			}
		}
	}
	return out, nil
}

// LockStorage takes the ephemeral per-object storage lock for an ark for
// job jid, whose id is the lock's data (StorageLock names it to a job
// that finds the lock held); false when another session holds it.
func (q *Queue) LockStorage(ctx context.Context, ark, jid string) (bool, error) {
	return q.tryLock(ctx, q.Path("/locks/storage/"+LockName(ark)), jid)
}

// UnlockStorage releases this session's storage lock; false when the lock
// is gone or another session's (this one's expired and another took it).
func (q *Queue) UnlockStorage(ctx context.Context, ark string) (bool, error) {
	return q.deleteOwnFlag(ctx, "/locks/storage/"+LockName(ark))
}

// HoldsStorage tells whether this session holds ark's storage lock. A
// daemon paused past its session timeout wakes up without it, while
// another may be storing the object: a store asks before it commits or
// removes anything.
func (q *Queue) HoldsStorage(ctx context.Context, ark string) (bool, error) {
	owned, _, err := q.ownFlag(ctx, "/locks/storage/"+LockName(ark))
	return owned, err
}

// LockInventory takes the ephemeral per-object inventory lock for an ark
// for job jid, as LockStorage.
func (q *Queue) LockInventory(ctx context.Context, ark, jid string) (bool, error) {
	return q.tryLock(ctx, q.Path("/locks/inventory/"+LockName(ark)), jid)
}

// ObjectLock is who holds one of an object's locks.
type ObjectLock struct {
	Path string // its node, with the queue's root: what an operator deletes
	// Job is the ingestq job that took it; "" for a lock another program
	// took (mrt-zk's are empty).
	Job string
	// Session is the session that holds it; 0 for a persistent lock (as
	// Merritt's Java storage service takes one), which stays until deleted.
	Session int64
	Since   time.Time // when it was taken
}

// StorageLock reads who holds ark's storage lock; ok is false when no one
// does.
func (q *Queue) StorageLock(ctx context.Context, ark string) (l ObjectLock, ok bool, err error) {
	return q.objectLock(ctx, q.Path("/locks/storage/"+LockName(ark)))
}

// InventoryLock reads who holds ark's inventory lock, as StorageLock.
func (q *Queue) InventoryLock(ctx context.Context, ark string) (l ObjectLock, ok bool, err error) {
	return q.objectLock(ctx, q.Path("/locks/inventory/"+LockName(ark)))
}

func (q *Queue) objectLock(ctx context.Context, p string) (ObjectLock, bool, error) {
	data, st, err := q.get(ctx, p)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return ObjectLock{}, false, nil
	case err != nil:
		return ObjectLock{}, false, err
	}
	return ObjectLock{Path: p, Job: string(data), Session: st.EphemeralOwner, Since: time.UnixMilli(st.Ctime)}, true, nil
}

// UnlockInventory releases this session's inventory lock, as UnlockStorage.
func (q *Queue) UnlockInventory(ctx context.Context, ark string) (bool, error) {
	return q.deleteOwnFlag(ctx, "/locks/inventory/"+LockName(ark))
}

// LockName maps an identifier to a node name: ":/" and "/" become "_".
func LockName(ark string) string {
	return strings.ReplaceAll(strings.ReplaceAll(ark, ":/", "_"), "/", "_")
}

func checkNodeName(what, name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("%s name %q: must be non-empty, without '/'", what, name)
	}
	return nil
}

func (q *Queue) createFlag(ctx context.Context, rel string) (bool, error) {
	_, err := q.zk.create(ctx, q.Path(rel), nil, 0)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, zk.ErrNodeExists):
		return false, nil
	}
	return false, fmt.Errorf("create %s: %w", rel, err)
}

func (q *Queue) deleteFlag(ctx context.Context, rel string) (bool, error) {
	err := q.zk.delete(ctx, q.Path(rel), -1)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, zk.ErrNoNode):
		return false, nil
	}
	return false, fmt.Errorf("delete %s: %w", rel, err)
}

// tryLock takes the ephemeral lock p as a commit does: it tries again
// through connection trouble, and knows a create whose reply was lost as
// this session's own. A lock created so and not known would stay with the
// session, which outlives a server's restart, and leave what it guards
// "locked" meanwhile. holder, the lock's data, says who takes it ("" for
// none). It reports false when another session holds the lock, and
// ErrNotFound when p's parent is gone.
func (q *Queue) tryLock(ctx context.Context, p, holder string) (bool, error) {
	lock := lockOp(p)
	lock.req.(*zk.CreateRequest).Data = []byte(holder)
	err := q.commit(ctx, []op{lock})
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrLocked):
		return false, nil
	case errors.Is(err, zk.ErrNoNode):
		return false, fmt.Errorf("lock %s: %w", q.rel(p), ErrNotFound)
	}
	return false, fmt.Errorf("lock %s: %w", q.rel(p), err)
}

// deleteOwnFlag deletes an ephemeral node only if this session made it:
// a session that expired must not free the lock another has since taken.
// The delete is at the version read, so it never takes a newer node. It
// tries again through connection trouble, as a commit does, for as long
// after the first try as one request may wait for its answer: enough for
// the client to move to another server of the ensemble, or for a new
// leader to be elected. The session lives through that, and a lock left
// then would stay as long as the session; after a longer outage the caller
// frees it later.
func (q *Queue) deleteOwnFlag(ctx context.Context, rel string) (bool, error) {
	deleted, err := q.deleteOwnFlagOnce(ctx, rel)
	giveUp := time.Now().Add(q.zk.timeout)
	for outages := 1; Transient(err) && time.Now().Before(giveUp) && q.outage(ctx, outages); outages++ {
		deleted, err = q.deleteOwnFlagOnce(ctx, rel)
	}
	return deleted, err
}

func (q *Queue) deleteOwnFlagOnce(ctx context.Context, rel string) (bool, error) {
	owned, st, err := q.ownFlag(ctx, rel)
	if err != nil || !owned {
		return false, err
	}
	deleted, err := q.deleteOwn(ctx, q.Path(rel), st)
	if err != nil {
		return false, fmt.Errorf("delete %s: %w", rel, err)
	}
	return deleted, nil
}

// ownFlag tells whether the ephemeral node rel exists and this session
// made it, with its stat.
func (q *Queue) ownFlag(ctx context.Context, rel string) (bool, *zk.Stat, error) {
	ok, st, err := q.zk.exists(ctx, q.Path(rel))
	if err != nil {
		return false, nil, fmt.Errorf("check %s: %w", rel, err)
	}
	return ok && q.zk.owns(st), st, nil
}

func (q *Queue) flag(ctx context.Context, rel string) (bool, error) {
	ok, _, err := q.zk.exists(ctx, q.Path(rel))
	if err != nil {
		return false, fmt.Errorf("check %s: %w", rel, err)
	}
	return ok, nil
}
