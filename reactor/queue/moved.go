package queue

import "context"

// Moved is a change of state of a job or a batch that landed in ZooKeeper,
// as told to the observer a context carries (WithMoved): what an operator's
// action did, to be published as the move's event under its arrival ID.
type Moved struct {
	Job   *Job   // the job as it is after the move (a copy); nil for a batch
	Batch *Batch // the batch as it is after the move (a copy); nil for a job
	From  State  // the state it left (a move through another, Held → Pending → Failed, is one move)
}

type movedKey struct{}

// WithMoved returns ctx with an observer: each job and batch transition a
// write under it lands (SetJobStatus, SetBatchStatus, and the admin actions
// made of them) is told to f, after its commit. f may be called from
// several goroutines at once; it holds up the write's caller (not a lock).
func WithMoved(ctx context.Context, f func(Moved)) context.Context {
	return context.WithValue(ctx, movedKey{}, f)
}

// tellMoved tells ctx's observer, if any, of a landed move.
func tellMoved(ctx context.Context, m Moved) {
	if f, ok := ctx.Value(movedKey{}).(func(Moved)); ok {
		f(m)
	}
}
