package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// AccessQueues are the two access queues, small first.
var AccessQueues = []string{AccessSmall, AccessLarge}

// AcquireAccessWork locks the oldest request of an access queue that is
// Pending, or Processing without a lock: its worker's session ended (a
// daemon killed mid-assembly), or an operator requeued it. takes (nil:
// all) passes over a request after reading it, before anything is
// written: another tool's request. It returns nil when there is none,
// with the nodes to watch for one that may become acquirable: the locks
// of requests worked elsewhere, and the status of a request whose
// creation is under way.
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
		case a.Locked:
			if a.State() == Processing {
				waits = append(waits, Wait{Path: q.accessPath(queue, qid, "lock"), Present: true})
			}
			continue
		}
		// Locked and re-fenced in one multi(), as in AcquireJob.
		err = q.commit(ctx, []op{lockOp(q.accessPath(queue, qid, "lock")),
			fenceSet(q.accessPath(queue, qid, "status"), mustJSON(a.Status), a.version)})
		if errors.Is(err, ErrLocked) || errors.Is(err, ErrStale) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		a.version++
		a.owner, a.Locked = true, true
		return a, nil, nil
	}
	return nil, waits, nil
}

// MoveAccess moves an acquired request to another state with its token (nil:
// unchanged) in one fenced multi(); a move to Completed or Failed releases
// the lock.
func (q *Queue) MoveAccess(ctx context.Context, a *Access, to State, message string, token map[string]any) error {
	if err := AccessMachine.Check(a.ID, a.State(), to); err != nil {
		return err
	}
	st := BatchStatus{Status: to, LastModified: q.stamp(), Message: truncate(message, 4000)}
	ops := []op{fenceSet(q.accessPath(a.Queue, a.ID, "status"), mustJSON(st), a.version)}
	if token != nil {
		ops = append(ops, upsert(q.accessPath(a.Queue, a.ID, "token"), mustJSON(token), true))
	}
	release := to == Completed || to == Failed
	if release && a.owner {
		ops = append(ops, delIfThere(q.accessPath(a.Queue, a.ID, "lock")))
	}
	if err := q.commit(ctx, ops); err != nil {
		return err
	}
	a.Status, a.version = st, a.version+1
	if token != nil {
		a.Token = token
	}
	if release {
		a.owner, a.Locked = false, false
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

// AccessRequests reads every request of both queues, oldest first in each;
// a request that cannot be read is a problem, not a failure of the list.
func (q *Queue) AccessRequests(ctx context.Context) ([]*Access, []error, error) {
	var out []*Access
	var problems []error
	for _, queue := range AccessQueues {
		kids, err := q.children(ctx, q.Path("/access/"+queue))
		if err != nil {
			return nil, nil, err
		}
		slices.Sort(kids)
		for _, qid := range kids {
			if !validName(qid, "qid") {
				continue
			}
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

// RequeueAccess sends a Failed request (by FindAccess's ref) back to
// Processing, unlocked: a daemon takes it up as one left by a dead worker.
func (q *Queue) RequeueAccess(ctx context.Context, qid string) (*Access, error) {
	a, err := q.FindAccess(ctx, qid)
	if err != nil {
		return nil, err
	}
	if a.State() != Failed {
		return nil, refused("access request %s is %s; only a Failed request can be requeued", qid, a.State())
	}
	return a, q.setAccessStatus(ctx, a, Processing, "requeued")
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
		return a, false, q.setAccessStatus(ctx, a, Deleted, "deleted")
	case Completed, Deleted:
		return a, true, q.DeleteAccess(ctx, a)
	}
	return nil, false, refused("access request %s is %s; only a Failed, Completed or Deleted request can be deleted", qid, a.State())
}

// setAccessStatus is an operator's move of a request no worker holds,
// fenced by the status read.
func (q *Queue) setAccessStatus(ctx context.Context, a *Access, to State, message string) error {
	if err := AccessMachine.Check(a.ID, a.State(), to); err != nil {
		return err
	}
	st := BatchStatus{Status: to, LastModified: q.stamp(), Message: message}
	if err := q.commit(ctx, []op{fenceSet(q.accessPath(a.Queue, a.ID, "status"), mustJSON(st), a.version)}); err != nil {
		return fmt.Errorf("access request %s: %w", a.ID, err)
	}
	a.Status, a.version = st, a.version+1
	return nil
}

// AccessWait is the wait for a request's status to change, or for the
// request to go. Set it before reading the request: a change made between
// the read and the watch is then not missed.
func (q *Queue) AccessWait(queue, qid string) Wait {
	return Wait{Path: q.accessPath(queue, qid, "status"), Present: true}
}
