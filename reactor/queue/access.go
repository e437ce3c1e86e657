package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
)

// Access request queues under /access.
const (
	AccessSmall = "small"
	AccessLarge = "large"
)

// Access is a request to assemble an object for download.
type Access struct {
	Queue  string // AccessSmall or AccessLarge
	ID     string // qid##########
	Token  map[string]any
	Status BatchStatus
	Locked bool
	// Made is when ZooKeeper made the request's node (by its clock, in the
	// order of the queue's sequential names).
	Made time.Time
	// TakenFrom, on a view this session acquired, is the holder its
	// status named then, when another (as Job.TakenFrom).
	TakenFrom *JobHolder

	version    int32
	statusData []byte // the status as read: an acquisition that names no holder writes it unchanged
	owner      bool   // this view took the lock
	lockHere   bool   // the lock is this session's
}

// State is the request's current status.
func (a *Access) State() State { return a.Status.Status }

func (q *Queue) accessPath(queue, qid string, child ...string) string {
	p := q.Path("/access/" + queue + "/" + qid)
	for _, c := range child {
		p += "/" + c
	}
	return p
}

func checkAccessQueue(queue string) error {
	if queue != AccessSmall && queue != AccessLarge {
		return fmt.Errorf("access queue %q: want %s or %s", queue, AccessSmall, AccessLarge)
	}
	return nil
}

// accessResultRoom is what a request's last move may add to its token and
// status (one multi): a package's URL (a presigned one with its query) and
// description, or a failure's message (maxAccessMessage bytes, six each
// in JSON at most). A token created without it could be refused that move
// as too large (ErrTooLarge), its request left Processing and assembled
// again without end.
const accessResultRoom = 32 << 10

// CreateAccess queues a Pending access request with its token.
func (q *Queue) CreateAccess(ctx context.Context, queue string, token map[string]any) (*Access, error) {
	if err := checkAccessQueue(queue); err != nil {
		return nil, err
	}
	p, err := q.zk.create(ctx, q.Path("/access/"+queue+"/qid"), nil, zk.FlagSequence)
	if err != nil {
		return nil, fmt.Errorf("create access request: %w", err)
	}
	a := &Access{Queue: queue, ID: path2name(p), Token: token, Status: BatchStatus{Status: Pending, LastModified: q.stamp()}}
	status := create(q.accessPath(queue, a.ID, "status"), mustJSON(a.Status))
	status.witness = true
	// Refused unless the token has room for its result, written into it
	// with the request's last move.
	data, tokenPath := mustJSON(token), q.accessPath(queue, a.ID, "token")
	if err = fits(&zk.CreateRequest{Path: tokenPath, Data: make([]byte, len(data)+accessResultRoom)}); err != nil {
		err = fmt.Errorf("its token, with %d bytes of room for its result: %w", accessResultRoom, err)
	} else {
		err = q.commit(ctx, []op{create(tokenPath, data), status})
	}
	if err != nil {
		_ = q.zk.delete(ctx, p, -1)
		return nil, fmt.Errorf("create access request %s: %w", a.ID, err)
	}
	return a, nil
}

// LoadAccess reads an access request.
func (q *Queue) LoadAccess(ctx context.Context, queue, qid string) (*Access, error) {
	if err := checkAccessQueue(queue); err != nil {
		return nil, err
	}
	if !validName(qid, "qid") {
		return nil, fmt.Errorf("%q is not an access request id (want qid followed by digits)", qid)
	}
	r := q.getAllAfter(ctx, 1, q.accessPath(queue, qid), q.accessPath(queue, qid, "status"),
		q.accessPath(queue, qid, "token"), q.accessPath(queue, qid, "lock"))
	if errors.Is(r[0].err, zk.ErrNoNode) {
		return nil, notFound("access request", queue+"/"+qid) // named as asked: each queue has its own qids
	}
	for _, x := range r {
		if x.err != nil && !errors.Is(x.err, zk.ErrNoNode) { // ZooKeeper out of reach, as such: not a corrupt request
			return nil, fmt.Errorf("load access request %s/%s: %w", queue, qid, x.err)
		}
	}
	statusPath := q.rel(q.accessPath(queue, qid, "status"))
	if r[1].err != nil {
		return nil, q.missingStatus(statusPath, r[0].stat) // a creation under way (mrt-zk writes the nodes one by one)
	}
	a := &Access{Queue: queue, ID: qid, Made: time.UnixMilli(r[0].stat.Ctime), version: r[1].stat.Version, statusData: r[1].data, Locked: r[3].err == nil,
		lockHere: r[3].err == nil && q.zk.owns(r[3].stat)}
	var err error
	if a.Status, err = decodeBatchStatus(AccessMachine, statusPath, r[1].data); err != nil {
		return nil, err
	}
	if r[2].err == nil && len(r[2].data) > 0 {
		if err := decodeJSON(q.rel(q.accessPath(queue, qid, "token")), r[2].data, &a.Token); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// UnlockAccess releases a lock this session took.
func (q *Queue) UnlockAccess(ctx context.Context, a *Access) error {
	if err := q.releaseOwnLock(ctx, q.accessPath(a.Queue, a.ID, "lock")); err != nil {
		return err
	}
	a.owner, a.Locked = false, false
	return nil
}

// DeleteAccess removes a Completed or Deleted request from ZooKeeper.
func (q *Queue) DeleteAccess(ctx context.Context, a *Access) error {
	if a.State() != Completed && a.State() != Deleted {
		return refused("access request %s is %s; only Completed or Deleted requests can be removed", a.ID, a.State())
	}
	return q.removeTree(ctx, q.accessPath(a.Queue, a.ID), fenceCheck(q.accessPath(a.Queue, a.ID, "status"), a.version))
}
