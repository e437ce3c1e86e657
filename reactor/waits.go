package reactor

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/ingestq/ingestq/reactor/queue"
)

// waiter holds the one-shot ZooKeeper watches that wake a pool when work it
// passed over may have become acquirable, and that no folder's child watch
// would announce: the lock of a job or batch held by another session (gone
// when that session ends or lets go), the status of a batch still being
// created, the buckets of a batch whose count of done jobs falls short.
// Each node is watched at most once at a time. It also holds the timers of
// steps that asked to be tried again later. Every goroutine it starts
// ends when its watch or timer fires or at stop, which waits for them.
type waiter struct {
	q   *queue.Queue
	log *slog.Logger

	mu       sync.Mutex
	watching map[string]map[string]func() // node → who waits on it → its wake
	stopped  bool
	stopCh   chan struct{}
	wg       sync.WaitGroup
}

func newWaiter(q *queue.Queue, log *slog.Logger) *waiter {
	return &waiter{q: q, log: log, watching: map[string]map[string]func(){}, stopCh: make(chan struct{})}
}

// on calls wake once when w's node changes, or at once when it changed
// already. A node is watched once however many wait on it; each waiter
// (who: a pool's signal) is woken, so a pool that finds the node watched
// for another pool is not forgotten. A watch that cannot be set is left to
// the safety rescan.
func (w *waiter) on(ctx context.Context, wt queue.Wait, who string, wake func()) {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	if wakes, ok := w.watching[wt.Path]; ok {
		wakes[who] = wake
		w.mu.Unlock()
		return
	}
	w.watching[wt.Path] = map[string]func(){who: wake}
	w.wg.Add(1) // under mu: never after stop's Wait began
	w.mu.Unlock()
	take := func() map[string]func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		wakes := w.watching[wt.Path]
		delete(w.watching, wt.Path)
		return wakes
	}
	wakeAll := func() {
		for _, wake := range take() {
			wake()
		}
	}
	fired, changed, err := w.q.WatchOnce(ctx, wt)
	if err != nil {
		take()
		w.wg.Done()
		w.log.Debug("reactor: watch not set; the rescan covers it", "err", err)
		return
	}
	if changed {
		wakeAll()
		w.wg.Done()
		return
	}
	go func() {
		defer w.wg.Done()
		select {
		case <-fired:
			wakeAll()
		case <-w.stopCh:
		}
	}()
}

// after calls wake once d has passed, unless stop comes first.
func (w *waiter) after(d time.Duration, wake func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	w.wg.Add(1) // under mu: never after stop's Wait began
	go func() {
		defer w.wg.Done()
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			wake()
		case <-w.stopCh:
		}
	}()
}

// stop ends every wait and waits for their goroutines. Safe to call twice.
func (w *waiter) stop() {
	w.mu.Lock()
	if !w.stopped {
		w.stopped = true
		close(w.stopCh)
	}
	w.mu.Unlock()
	w.wg.Wait()
}
