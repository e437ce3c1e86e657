package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// AccessQueues are the two access queues, small first.
var AccessQueues = []string{AccessSmall, AccessLarge}

// AcquireAccessWork locks the oldest request of an access queue that is
// Pending, or Processing without a lock: its worker's session ended (a
// daemon killed mid-assembly), or an operator requeued it. takes (nil:
// all) passes over a request after reading it, before anything is
// written: another tool's request, or one a worker of the caller holds.
// A caller that gives takes vouches for the second: a request it takes
// that is locked by this very session is then an orphan (an acquisition
// whose reply was lost and could not be confirmed), let go and taken. It
// returns nil when there is none, with the nodes to watch for one that
// may become acquirable: the locks of requests worked elsewhere, and the
// status of a request whose creation is under way.
func (q *Queue) AcquireAccessWork(ctx context.Context, queue string, takes func(*Access) bool) (*Access, []Wait, error) {
	return q.acquireAccess(ctx, queue, []State{Pending, Processing}, takes)
}

// AcquireAccess locks the oldest unlocked Pending request of a queue; nil
// when there is none.
func (q *Queue) AcquireAccess(ctx context.Context, queue string) (*Access, error) {
	a, _, err := q.acquireAccess(ctx, queue, []State{Pending}, nil)
	return a, err
}

func (q *Queue) acquireAccess(ctx context.Context, queue string, states []State, takes func(*Access) bool) (*Access, []Wait, error) {
	if err := checkAccessQueue(queue); err != nil {
		return nil, nil, err
	}
	kids, err := q.children(ctx, q.Path("/access/"+queue))
	if err != nil {
		return nil, nil, err
	}
	slices.Sort(kids)
	var waits []Wait
	for _, qid := range kids {
		if !validName(qid, "qid") {
			continue
		}
		a, err := q.LoadAccess(ctx, queue, qid)
		lock := q.accessPath(queue, qid, "lock")
		switch {
		case errors.Is(err, ErrIncomplete):
			waits = append(waits, Wait{Path: q.accessPath(queue, qid, "status")})
			continue
		case err != nil:
			if !errors.Is(err, ErrNotFound) {
				q.log.Warn("queue: skipping access request", "queue", queue, "id", qid, "err", err)
			}
			continue
		case !slices.Contains(states, a.State()) || (takes != nil && !takes(a)):
			continue
		case a.Locked && a.lockHere && takes != nil:
			released, err := q.releaseOwn(ctx, lock, nil)
			if err != nil || !released {
				q.log.Warn("queue: could not release an orphaned lock of this session", "request", a.Ref(), "err", err)
				continue
			}
			q.log.Warn("queue: released a lock this session held but no worker used", "request", a.Ref())
		case a.Locked:
			// Worked elsewhere, or being taken (Pending): its lock goes
			// when that worker ends or dies.
			waits = append(waits, Wait{Path: lock, Present: true})
			continue
		}
		// Locked and re-fenced in one multi(), as in AcquireJob: ingestq's
		// own request names this daemon its holder; another tool's status
		// is written back as read.
		var withHolder func(*JobHolder) []byte
		if a.Ours() {
			withHolder = func(by *JobHolder) []byte { st := a.Status; st.Holder = by; return mustJSON(st) }
		}
		held, _, err := q.lockFenced(ctx, lock, q.accessPath(queue, qid, "status"), a.statusData, a.version, a.Status.Holder, withHolder)
		if errors.Is(err, ErrLocked) || errors.Is(err, ErrStale) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		a.version++
		a.owner, a.Locked, a.lockHere = true, true, true
		a.TakenFrom, a.Status.Holder = takenFrom(a.Status.Holder, held), held
		return a, nil, nil
	}
	return nil, waits, nil
}

// AccessChange is what an access request's move writes besides its status.
type AccessChange struct {
	Message string
	Token   map[string]any // written in the same multi(); nil: unchanged
	At      time.Time      // stamps the change; zero means now (see JobChange.At)
	Retried bool           // an earlier try may have landed (see JobChange.Retried)
}

// MoveAccess is SetAccessStatus with a message and a token (nil:
// unchanged).
func (q *Queue) MoveAccess(ctx context.Context, a *Access, to State, message string, token map[string]any) error {
	return q.SetAccessStatus(ctx, a, to, AccessChange{Message: message, Token: token})
}

// SetAccessStatus moves a request to another state, with c, in one
// multi() fenced by the version of the status this view was read at; a
// move to Completed or Failed releases the lock this view holds.
func (q *Queue) SetAccessStatus(ctx context.Context, a *Access, to State, c AccessChange) error {
	if err := AccessMachine.Check(a.ID, a.State(), to); err != nil {
		return err
	}
	release := to == Completed || to == Failed
	st := BatchStatus{Status: to, LastModified: q.stampAt(c.At), Message: truncate(c.Message, maxAccessMessage), Extra: a.Status.Extra,
		Holder: q.keptHolder(!release && a.owner, a.Status.Holder)} // Pending → Processing keeps who assembles it
	ops := []op{fenceSet(q.accessPath(a.Queue, a.ID, "status"), mustJSON(st), a.version)}
	if c.Token != nil {
		ops = append(ops, upsert(q.accessPath(a.Queue, a.ID, "token"), mustJSON(c.Token), true))
	}
	if release && a.owner {
		ops = append(ops, delIfThere(q.accessPath(a.Queue, a.ID, "lock")))
	}
	if _, err := q.commitLanded(ctx, ops, c.Retried); err != nil {
		return err
	}
	a.Status, a.version = st, a.version+1
	if c.Token != nil {
		a.Token = c.Token
	}
	if release {
		a.owner, a.Locked, a.lockHere = false, false, false
	}
	return nil
}

// Ref names a request in both queues: "small/qid0000000003". Each queue
// numbers its requests on its own (mrt-zk's sequential nodes), so a qid
// alone may name one in each.
func (a *Access) Ref() string { return a.Queue + "/" + a.ID }

// FindAccess reads a request by its Ref, or by its qid alone when only one
// queue has that qid.
func (q *Queue) FindAccess(ctx context.Context, ref string) (*Access, error) {
	if name, qid, ok := strings.Cut(ref, "/"); ok {
		return q.LoadAccess(ctx, name, qid)
	}
	var found *Access
	for _, name := range AccessQueues {
		a, err := q.LoadAccess(ctx, name, ref)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return nil, err
		case found != nil:
			return nil, refused("both access queues have a request %s: say %s or %s", ref, found.Ref(), a.Ref())
		default:
			found = a
		}
	}
	if found == nil {
		return nil, notFound("access request", ref)
	}
	return found, nil
}

// FindAccessNow is FindAccess after a sync with ZooKeeper's leader: it
// sees a delete or a move that any client saw finish before the call,
// which a read alone, from a follower not yet caught up, may not. It
// costs one more round trip, through the leader.
func (q *Queue) FindAccessNow(ctx context.Context, ref string) (*Access, error) {
	if err := q.zk.sync(ctx, q.Path("/access")); err != nil {
		return nil, fmt.Errorf("read access request %s: %w", ref, err)
	}
	return q.FindAccess(ctx, ref)
}

// AccessRequests reads every request of both queues, oldest first in each;
// a request that cannot be read is a problem, not a failure of the list.
func (q *Queue) AccessRequests(ctx context.Context) ([]*Access, []error, error) {
	var out []*Access
	var problems []error
	for _, queue := range AccessQueues {
		qids, err := q.AccessQIDs(ctx, queue)
		if err != nil {
			return nil, nil, err
		}
		for _, qid := range qids {
			a, err := q.LoadAccess(ctx, queue, qid)
			switch {
			case errors.Is(err, ErrNotFound):
			case err != nil:
				problems = append(problems, err)
			default:
				out = append(out, a)
			}
		}
	}
	return out, problems, nil
}

// AccessQIDs lists the requests of access queue name, oldest first: its
// sequential names are in the order ZooKeeper made them.
func (q *Queue) AccessQIDs(ctx context.Context, name string) ([]string, error) {
	kids, err := q.children(ctx, q.Path("/access/"+name))
	if err != nil {
		return nil, err
	}
	kids = slices.DeleteFunc(kids, func(qid string) bool { return !validName(qid, "qid") })
	slices.Sort(kids)
	return kids, nil
}

// RequeueAccess sends a Failed request (by FindAccess's ref) back to
// Processing, unlocked: a daemon takes it up as one left by a dead worker.
// The token of an ingestq request says NotReady again with the same
// multi(): a reader of the token alone (mrt-zk's Access) would take the
// request for failed while it is assembled again.
func (q *Queue) RequeueAccess(ctx context.Context, qid string) (*Access, error) {
	a, err := q.FindAccess(ctx, qid)
	if err != nil {
		return nil, err
	}
	if a.State() != Failed {
		return nil, refused("access request %s is %s; only a Failed request can be requeued", qid, a.State())
	}
	c := AccessChange{Message: "requeued"}
	if t, err := a.AccessToken(); err == nil && a.Ours() && t.TokenStatus != TokenNotReady {
		t.TokenStatus = TokenNotReady
		c.Token = t.Map(a.Token)
	}
	return a, q.setAccessStatus(ctx, a, Processing, c)
}

// RemoveAccess deletes a request (by FindAccess's ref): a Failed one
// becomes Deleted (kept, as mrt-zk does); a Completed or Deleted one is
// removed from ZooKeeper (removed says so).
func (q *Queue) RemoveAccess(ctx context.Context, qid string) (a *Access, removed bool, err error) {
	a, err = q.FindAccess(ctx, qid)
	if err != nil {
		return nil, false, err
	}
	switch a.State() {
	case Failed:
		return a, false, q.setAccessStatus(ctx, a, Deleted, AccessChange{Message: "deleted"})
	case Completed, Deleted:
		return a, true, q.DeleteAccess(ctx, a)
	}
	return nil, false, refused("access request %s is %s; only a Failed, Completed or Deleted request can be deleted", qid, a.State())
}

// setAccessStatus is an operator's move of a request no worker holds,
// fenced by the status read.
func (q *Queue) setAccessStatus(ctx context.Context, a *Access, to State, c AccessChange) error {
	if err := q.SetAccessStatus(ctx, a, to, c); err != nil {
		return fmt.Errorf("access request %s: %w", a.ID, err)
	}
	return nil
}

// AccessWait is the wait for a request's status to change, or for the
// request to go. Set it before reading the request: a change made between
// the read and the watch is then not missed.
func (q *Queue) AccessWait(queue, qid string) Wait {
	return Wait{Path: q.accessPath(queue, qid, "status"), Present: true}
}
