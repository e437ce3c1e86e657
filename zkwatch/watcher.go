package zkwatch

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Change is what a folder's watch saw.
type Change struct {
	Path    string   // the watched folder
	Added   []string // children that appeared since the last listing, sorted
	Removed []string // children that disappeared, sorted
	Count   int      // children now
	// Children is the whole listing now, sorted: a consumer can work from
	// it instead of listing the folder again. It is shared: read it, never
	// change it.
	Children []string

	// Rescan marks a full listing: the first one after Watch (or after the
	// folder appeared), the re-arm after a session expiry or an error, a
	// RescanAll, the safety timer, or a folder that was deleted and
	// re-created between two listings. Added is then every child now, and
	// Removed what disappeared since the previous listing (if any): a
	// consumer can replace its view of the folder with Added.
	Rescan bool

	// Gone marks the last change of a folder that was deleted: Removed is
	// every child of the last listing, Count is 0, and the watch has
	// stopped (Watch again to wait for the folder to come back).
	Gone bool
}

// WatcherConfig tunes a Watcher; the zero value is fine.
type WatcherConfig struct {
	// Coalesce is the least time between two listings of a folder, so that
	// a burst of creates costs one listing per Coalesce: a watch that fires
	// on a quiet folder lists at once, one that fires sooner after the last
	// listing waits out the rest. 0 means 2 ms; negative, no wait.
	Coalesce time.Duration
	// Rescan is the period of the safety rescan of every folder (a full
	// listing that emits a Rescan change even if nothing changed). 0 means
	// 1 minute; negative, off.
	Rescan time.Duration
	Logger *slog.Logger // default slog.Default()
}

// WatcherStats are counters since NewWatcher.
type WatcherStats struct {
	Listings uint64 // getChildren requests sent
	Fires    uint64 // watch events received (on folders, and on the ancestors of folders not there yet)
	Rearms   uint64 // watches re-armed after a session expiry or an error
	Emits    uint64 // calls of emit
	Errors   uint64 // failed requests and lost watches (each retried with backoff)
}

const (
	defaultCoalesce = 2 * time.Millisecond
	defaultRescan   = time.Minute
	backoffStart    = 50 * time.Millisecond
	backoffMax      = 2 * time.Second
)

// Watcher keeps child watches on ZooKeeper folders and reports what
// changed in them.
//
// ZooKeeper watches are one-shot: each folder's goroutine lists the folder
// with a watch (getChildren), waits for the watch to fire, lists again
// (re-arming; at most once per Coalesce), and emits the difference between
// the two listings. Changes made between a fire and the re-arm show in the new
// listing, so none is lost; several changes may come as one Change.
//
// On a session expiry (every watch gets zk.EventNotWatching and
// go-zookeeper opens a new session by itself) or any failed request, the
// folder retries with backoff (50 ms doubling to 2 s) and then emits a
// Rescan change. A reconnect that keeps the session needs nothing:
// go-zookeeper re-registers the watches and the server fires those whose
// folders changed meanwhile.
//
// A listing is one ZooKeeper packet: about 60,000 children exceed the
// default jute.maxbuffer (1 MB). go-zookeeper (uncapped, the default) still
// accepts it, but Java clients such as zkCli.sh do not, and with
// Config.MaxBufferSize set the listing fails: the watcher then logs an
// error naming the folder and keeps retrying with backoff.
type Watcher struct {
	s    *Session
	cfg  WatcherConfig
	emit func(Change)
	log  *slog.Logger

	mu      sync.Mutex
	folders map[string]*folder // current (and ending) watches by path
	closed  bool
	wg      sync.WaitGroup

	listings, fires, rearms, emits, errs atomic.Uint64
}

// NewWatcher returns a Watcher on s that calls emit with every change.
//
// emit is called from the watcher's goroutines; calls for one folder are
// serialised and in order, calls for different folders may be concurrent.
// It should return quickly (the folder's watch waits for it). It may call
// Watch and RescanAll, and Unwatch for other folders, but not Unwatch of
// its own folder nor Close: they wait for emit to return.
func NewWatcher(s *Session, cfg WatcherConfig, emit func(Change)) *Watcher {
	if cfg.Coalesce == 0 {
		cfg.Coalesce = defaultCoalesce
	}
	if cfg.Rescan == 0 {
		cfg.Rescan = defaultRescan
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Watcher{s: s, cfg: cfg, emit: emit, log: cfg.Logger, folders: map[string]*folder{}}
}

// Watch starts watching the folder at path; it is a no-op if path is
// already watched, or after Close. A folder that does not exist yet is
// waited for, by a child watch on its nearest ancestor that does, and
// watched once it appears (its first change is then a Rescan). A folder
// that is deleted ends with a Gone change and its watch stops, unless
// Watch is called again.
func (w *Watcher) Watch(path string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	old := w.folders[path]
	if old != nil && !old.ended.Load() {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &folder{
		w: w, path: path, ctx: ctx, cancel: cancel,
		done:   make(chan struct{}),
		rescan: make(chan struct{}, 1),
	}
	if old != nil {
		f.after = old.done // the ended watch may still be in its last emit
	}
	w.folders[path] = f
	w.wg.Add(1)
	go f.run()
}

// Unwatch stops the watch on path and waits for its goroutine: once it
// returns, emit is not called for path (until Watch is called again).
func (w *Watcher) Unwatch(path string) {
	w.mu.Lock()
	f := w.folders[path]
	if f != nil {
		delete(w.folders, path)
	}
	w.mu.Unlock()
	if f != nil {
		f.cancel()
		<-f.done
	}
}

// Watching returns the watched paths, sorted (folders that do not exist
// yet included, deleted ones not).
func (w *Watcher) Watching() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	paths := make([]string, 0, len(w.folders))
	for p, f := range w.folders {
		if !f.ended.Load() {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	return paths
}

// RescanAll has every folder list itself now and emit a Rescan change
// (folders that do not exist yet just check again and emit nothing).
func (w *Watcher) RescanAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, f := range w.folders {
		select {
		case f.rescan <- struct{}{}:
		default: // one is already pending
		}
	}
}

// Stats returns the counters.
func (w *Watcher) Stats() WatcherStats {
	return WatcherStats{
		Listings: w.listings.Load(),
		Fires:    w.fires.Load(),
		Rearms:   w.rearms.Load(),
		Emits:    w.emits.Load(),
		Errors:   w.errs.Load(),
	}
}

// Close stops every watch and waits for the goroutines: emit is never
// called after Close returns. It does not close the Session. A request in
// flight when Close is called is abandoned, not waited for: it ends when
// ZooKeeper answers or the Session is closed, which waits for it.
func (w *Watcher) Close() {
	w.mu.Lock()
	w.closed = true
	folders := w.folders
	w.folders = map[string]*folder{}
	w.mu.Unlock()
	for _, f := range folders {
		f.cancel()
	}
	w.wg.Wait()
}
