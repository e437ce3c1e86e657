package reactor

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor/queue"
)

// AccessHandler assembles access requests (the access queue): a stored
// object, version or files into one package.
type AccessHandler interface {
	// Assemble makes an acquired request's package and returns the token
	// to write with its move: the result on success; on a fatal error (a
	// bad request: Fatal), the token to write with its failure. Other
	// errors are retried. It must be safe to run again on a request whose
	// daemon died mid-assembly.
	Assemble(ctx context.Context, a *queue.Access) (token map[string]any, err error)
	// Sweep removes expired packages and their requests, and returns the
	// requests it removed.
	Sweep(ctx context.Context) ([]*queue.Access, error)
}

// Default settings of the access queues.
const (
	DefaultAccessSmallWorkers = 2
	DefaultAccessLargeWorkers = 1
	DefaultAccessSweep        = time.Minute
)

func sigAccess(queueName string) string { return "watch.access." + queueName }

// accessHold is the queue hold of an access queue.
func accessHold(queueName string) string {
	if queueName == queue.AccessLarge {
		return queue.QueueAccessLarge
	}
	return queue.QueueAccessSmall
}

// accessWorkers is how many workers an access queue gets: Config's
// number, else the default; 0 means none (the queue is not worked here).
func (cfg Config) accessWorkers(queueName string) int {
	if n, ok := cfg.AccessWorkers[queueName]; ok {
		return n
	}
	if queueName == queue.AccessLarge {
		return DefaultAccessLargeWorkers
	}
	return DefaultAccessSmallWorkers
}

// newAccessPools adds a pool, and later a watch, for each access queue
// with workers: the small queue's pool never waits for the large one's.
func (r *Reactor) newAccessPools() {
	if r.cfg.Access == nil {
		return
	}
	for _, name := range queue.AccessQueues {
		if n := r.cfg.accessWorkers(name); n > 0 {
			h := &accessHands{refs: map[string]bool{}}
			r.pools[sigAccess(name)] = newPool("access "+name, n, func(ctx context.Context) (bool, error) {
				return r.accessStep(ctx, name, h)
			}, r.log)
		}
	}
}

// accessHands are the requests of one access queue that this daemon's
// workers hold. The queue's acquisitions here take turns, each claiming
// what it took before the next one looks, so the claims alone tell an
// acquisition (AcquireAccessWork's takes) what a worker here holds: such
// a request is passed over even when its lock went (its session expired
// under the step: a second worker would write the same package file), and
// a lock of this session on a request no worker here holds is an orphan.
// (Only the reactor takes access locks on its session: operators' actions
// take none.)
type accessHands struct {
	mu   sync.Mutex
	refs map[string]bool
}

// acquire runs an acquisition (get, given its takes) in its turn, and
// claims what it took.
func (h *accessHands) acquire(get func(takes func(*queue.Access) bool) (*queue.Access, []queue.Wait, error)) (*queue.Access, []queue.Wait, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a, waits, err := get(func(a *queue.Access) bool { return a.Ours() && !h.refs[a.Ref()] })
	if a != nil {
		h.refs[a.Ref()] = true
	}
	return a, waits, err
}

func (h *accessHands) drop(ref string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.refs, ref)
}

// watchAccess watches the folder of each access queue this daemon works.
func (r *Reactor) watchAccess() {
	for _, name := range queue.AccessQueues {
		if r.pools[sigAccess(name)] != nil {
			r.watcher.Watch(r.q.Path("/access/" + name))
		}
	}
}

// accessStep takes a request of the queue, unless the queue is held, and
// works it to Completed or Failed.
func (r *Reactor) accessStep(ctx context.Context, name string, h *accessHands) (bool, error) {
	if r.holds.accessHeld(ctx, accessHold(name)) {
		return false, nil
	}
	a, waits, err := h.acquire(func(takes func(*queue.Access) bool) (*queue.Access, []queue.Wait, error) {
		return r.q.AcquireAccessWork(ctx, name, takes)
	})
	if err != nil || a == nil {
		r.wakeOn(waits, sigAccess(name))
		return false, err
	}
	defer h.drop(a.Ref())
	r.runAccess(ctx, a)
	return true, nil
}

// runAccess moves a Pending request to Processing (a Processing one was
// left by a dead worker, which it says (takenOver), or requeued),
// assembles it, and moves it on.
func (r *Reactor) runAccess(ctx context.Context, a *queue.Access) {
	if msg := r.takenOver(a.TakenFrom, a.State(), "request", a.Ref()); msg != "" {
		// A progress event, not a move: the request stays where it was.
		r.bus.Publish(events.Event{Kind: events.KindProgress, AccessID: a.Ref(), To: string(a.State()), Message: msg,
			Attrs: map[string]any{"queue": a.Queue, "taken_over_from": a.TakenFrom.Host}})
	}
	if a.State() == queue.Pending {
		if !r.moveAccess(a, queue.Processing, "", nil) {
			return
		}
	}
	var token map[string]any
	ok, err := r.withRetries(ctx, "access assembly", a.Ref(), true, nil, func() (err error) {
		token, err = r.cfg.Access.Assemble(ctx, a)
		return err
	})
	if !ok {
		r.log.Warn("reactor: access assembly cut off at shutdown; the request stays Processing for the next daemon", "request", a.Ref(), "err", err)
		r.unlockAccess(a)
		return
	}
	to, msg := queue.Completed, ""
	if err != nil {
		to, msg = queue.Failed, err.Error()
		r.log.Warn("reactor: access request failed", "request", a.Ref(), "err", err)
		if t, terr := a.AccessToken(); token == nil && terr == nil {
			t.TokenStatus = queue.TokenFailed
			token = t.Map(a.Token)
		}
	}
	r.moveAccess(a, to, msg, token)
}

// moveAccess commits a request's move and publishes it; it reports
// whether the commit happened. As for jobs and batches, a try whose reply
// was lost is recognised by the next one (decision 228), and a move of
// unknown outcome is said so.
func (r *Reactor) moveAccess(a *queue.Access, to queue.State, msg string, token map[string]any) bool {
	from := a.State()
	c := queue.AccessChange{Message: msg, Token: token, At: r.q.Now()} // one stamp for every try: a landed try is known by its bytes
	err := r.retryMove(func(retried bool) error {
		c.Retried = retried
		return r.q.SetAccessStatus(r.work, a, to, c)
	})
	if err == nil {
		r.cfg.Observer.Moved("access", from, to.Folder())
		r.publishAccess(a, from, to)
		return true
	}
	outcome := NotCommitted
	switch {
	case errors.Is(err, queue.ErrStale) && !queue.MaybeApplied(err):
		outcome = Abandoned
	case queue.OutcomeUnknown(err):
		// It may have landed (decision 236), and no one recovers an access
		// request's events: its event is counted lost.
		outcome = Unknown
		r.bus.Lost(err)
	}
	r.log.Warn("reactor: access request's move failed", "request", a.Ref(), "from", from, "to", to, "outcome", outcome, "err", err)
	r.cfg.Observer.Moved("access", from, outcome)
	r.unlockAccess(a)
	return false
}

func (r *Reactor) publishAccess(a *queue.Access, from, to queue.State) {
	attrs := map[string]any{"queue": a.Queue}
	if t, err := a.AccessToken(); err == nil {
		attrs["ark"] = t.ARK
		if p := t.Package; p != nil && to == queue.Completed {
			attrs["url"], attrs["size"], attrs["sha256"], attrs["expires"] = t.URL, p.Size, p.SHA256, p.Expires
		}
	}
	r.bus.Publish(events.Event{Kind: events.KindAccess, AccessID: a.Ref(), From: string(from), To: string(to),
		Message: a.Status.Message, Attrs: attrs})
}

func (r *Reactor) unlockAccess(a *queue.Access) {
	if err := r.retry(func() error { return r.q.UnlockAccess(r.work, a) }); err != nil {
		r.log.Warn("reactor: unlock failed (the lock goes with the session)", "request", a.Ref(), "err", err)
	}
}

// sweepAccess runs the access handler's sweep now and then, until ctx
// ends; each request it removes is published as Expired.
func (r *Reactor) sweepAccess(ctx context.Context) {
	t := time.NewTicker(r.cfg.AccessSweep)
	defer t.Stop()
	for {
		removed, err := r.cfg.Access.Sweep(ctx)
		if err != nil && ctx.Err() == nil {
			r.log.Warn("reactor: access sweep", "err", err)
		}
		for _, a := range removed {
			r.bus.Publish(events.Event{Kind: events.KindAccess, AccessID: a.Ref(), From: string(a.State()), To: "Expired",
				Message: "package expired and removed, request removed", Attrs: map[string]any{"queue": a.Queue}})
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
