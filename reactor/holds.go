package reactor

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"

	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch"
)

// holds is the one place a daemon learns what is held: the ingest queue,
// the access queues and the collections. It is read from ZooKeeper at start, kept current by
// the watcher's changes of /locks/queue and /locks/collections, and, for a
// collection about to get work, asked of ZooKeeper itself, since the
// watcher's view lags a hold by a watch round trip.
type holds struct {
	q      *queue.Queue
	log    *slog.Logger
	onFree func() // the ingest queue was released: work may go on

	mu     sync.Mutex
	queue  bool            // the ingest queue is held
	access map[string]bool // held access queues (accessSmall, accessLarge)
	cols   map[string]bool // held collections
	// The watcher has reported the folder: its view is newer than what
	// load read, which then leaves it alone.
	queueSeen, colsSeen bool
}

func newHolds(q *queue.Queue, log *slog.Logger, onFree func()) *holds {
	return &holds{q: q, log: log, onFree: onFree, cols: map[string]bool{}, access: map[string]bool{}}
}

// accessQueues are the queue holds of the access queues.
var accessQueues = []string{queue.QueueAccessSmall, queue.QueueAccessLarge}

// load reads both kinds of hold, before the pools start: the watcher's
// first listings run beside the pools' and could come late.
func (h *holds) load(ctx context.Context) {
	held, err := h.q.QueueHeld(ctx, queue.QueueIngest)
	access := map[string]bool{}
	for _, name := range accessQueues {
		if held, err := h.q.QueueHeld(ctx, name); err == nil {
			access[name] = held
		}
	}
	cols, err2 := h.q.HeldCollections(ctx)
	h.mu.Lock()
	if !h.queueSeen {
		if err == nil {
			h.queue = held
		}
		maps.Copy(h.access, access)
	}
	if !h.colsSeen {
		for _, c := range cols {
			h.cols[c] = true
		}
	}
	h.mu.Unlock()
	if err != nil || err2 != nil {
		h.log.Warn("reactor: holds not read at start; the watcher will tell", "err", errors.Join(err, err2))
	}
}

// queueHeld tells whether the ingest queue is held (the watcher's view).
func (h *holds) queueHeld() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.queue
}

// accessHeld tells whether an access queue (its hold's name) is held:
// ZooKeeper's answer (the watcher's view lags a hold made just before a
// request), or the view when ZooKeeper cannot answer.
func (h *holds) accessHeld(ctx context.Context, name string) bool {
	if held, err := h.q.QueueHeld(ctx, name); err == nil {
		return held
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.access[name]
}

// collectionHeld tells whether a profile's collection is held: ZooKeeper's
// answer, or the watcher's view when ZooKeeper cannot answer.
func (h *holds) collectionHeld(ctx context.Context, profile string) bool {
	if profile == "" {
		return false
	}
	if held, err := h.q.CollectionHeld(ctx, profile); err == nil {
		return held
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cols[profile]
}

// queueChanged applies a change of /locks/queue.
func (h *holds) queueChanged(c zkwatch.Change) {
	h.mu.Lock()
	h.queueSeen = true
	was, held := h.queue, h.queue && !c.Rescan
	for _, n := range c.Added {
		held = held || n == queue.QueueIngest
	}
	for _, n := range c.Removed {
		held = held && n != queue.QueueIngest
	}
	h.queue = held
	freed := h.accessChanged(c)
	h.mu.Unlock()
	if was != held {
		h.log.Info("reactor: ingest queue hold changed", "held", held)
	}
	if (was && !held) || freed {
		h.onFree()
	}
}

// accessChanged applies a change of /locks/queue to the access queues'
// holds, under mu, and tells whether one was released.
func (h *holds) accessChanged(c zkwatch.Change) (freed bool) {
	for _, name := range accessQueues {
		was, held := h.access[name], slices.Contains(c.Children, name)
		h.access[name] = held
		if was != held {
			h.log.Info("reactor: access queue hold changed", "queue", name, "held", held)
			freed = freed || !held
		}
	}
	return freed
}

// collectionsChanged applies a change of /locks/collections.
func (h *holds) collectionsChanged(c zkwatch.Change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.colsSeen = true
	if c.Rescan {
		h.cols = map[string]bool{}
	}
	for _, n := range c.Added {
		h.cols[n] = true
	}
	for _, n := range c.Removed {
		delete(h.cols, n)
	}
}
