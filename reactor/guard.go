package reactor

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/ingestq/ingestq/internal/backoff"
	"github.com/ingestq/ingestq/reactor/queue"
)

// errJobChanged is the cause of a step's context cancelled because its job
// changed under it.
var errJobChanged = errors.New("the job changed under its step (an operator's cancel, fail or delete, or another session)")

// guardAfter is how long a step runs before its job is watched for a
// change under it: a long download of a job an operator cancels then stops
// at once, where it would run to its end for nothing. The many short
// steps cost no watch.
const guardAfter = time.Second

// guard watches a running step's job, and cancels the step's context
// (cause errJobChanged) when another writer changes the job. The step's
// own writes to the job go through write, so that they are not taken for
// another's. (The step's final move may be taken for one when the watch
// outlives it by a moment: nothing reads the cause after the step.)
type guard struct {
	job     *queue.Job
	mu      sync.Mutex // held across the step's own writes, and each look at the job
	version int32      // the job's status version after the step's last own write
	cancel  context.CancelCauseFunc
	quit    chan struct{}
	timer   *time.Timer
	wg      sync.WaitGroup
}

// guardJob returns the context to run j's step under, and its guard: from
// guardAfter on, a watch on j's status. stop ends the watch.
func (r *Reactor) guardJob(ctx context.Context, j *queue.Job) (context.Context, *guard) {
	ctx, cancel := context.WithCancelCause(ctx)
	g := &guard{job: j, version: j.StatusVersion(), cancel: cancel, quit: make(chan struct{})}
	g.wg.Add(1)
	g.timer = time.AfterFunc(guardAfter, func() {
		defer g.wg.Done()
		g.watch(ctx, r.q, j.ID)
	})
	return ctx, g
}

// watch never reads the job itself, which the step's goroutine writes (its
// move at the end, while the watch may still run): only the version noted
// at the step's own writes.
func (g *guard) watch(ctx context.Context, q *queue.Queue, jid string) {
	for tries := 0; ; {
		g.mu.Lock()
		fired, changed, err := q.WatchJobChange(ctx, jid, g.version)
		g.mu.Unlock()
		switch {
		case err != nil:
			// ZooKeeper away a moment: look again after a while, an
			// hours-long step is not left unguarded for the rest of it.
			tries++
			select {
			case <-time.After(backoff.Delay(100*time.Millisecond, 5*time.Second, tries)):
				continue
			case <-g.quit:
			case <-ctx.Done():
			}
			return
		case changed:
			g.cancel(errJobChanged)
			return
		}
		tries = 0
		select {
		case <-fired:
		case <-g.quit:
			return
		case <-ctx.Done():
			return
		}
		// Read before watching again: a watch set on a job another writer
		// (or the step's final move) changed would stay on its status, for
		// good once the job has ended.
		g.mu.Lock()
		_, version, err := q.JobStatusOf(ctx, jid)
		own := err == nil && version == g.version
		g.mu.Unlock()
		if !own && (err == nil || errors.Is(err, queue.ErrNotFound)) {
			g.cancel(errJobChanged)
			return
		}
	}
}

// write runs one of the step's own writes to the job, in the step's
// goroutine.
func (g *guard) write(w func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	err := w()
	g.version = g.job.StatusVersion()
	return err
}

// jobChanged tells whether ctx, a step's, was cancelled because its job
// changed under it.
func jobChanged(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), errJobChanged)
}

// stop ends the guard and waits for its watch to end.
func (g *guard) stop() {
	if g.timer.Stop() {
		g.wg.Done() // the watch never started
	}
	close(g.quit)
	g.wg.Wait()
	g.cancel(nil)
}
