package zkwatch

import (
	"context"
	"errors"
	"log/slog"
	"path"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/internal/backoff"
	"github.com/ingestq/ingestq/internal/zkconn"
)

// folder is the watch on one path, run by one goroutine.
type folder struct {
	w      *Watcher
	path   string
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}   // closed when run returns
	after  <-chan struct{} // a previous, ended watch of path to wait for
	rescan chan struct{}   // RescanAll requests
	ended  atomic.Bool     // the folder was deleted: run is ending

	// Owned by run.
	known      []string        // children at the last listing, sorted
	czxid      int64           // the folder's creation zxid at the last listing
	listed     bool            // known is valid
	warned     bool            // the large-listing warning was logged
	avgName    int             // average child name length at the last listing
	failures   int             // consecutive failures
	outage     bool            // the last failure was ZooKeeper being away (logged by the Session)
	watch      <-chan zk.Event // the armed child watch, nil if none
	watched    string          // its folder: path, or an ancestor while path is not there
	rescanNext bool            // the next listing emits a Rescan change
	recovering bool            // the next successful listing is a re-arm
	wait       time.Duration   // delay before the next listing
	listedAt   time.Time       // when the last listing was answered
	safety     *time.Timer     // the safety rescan; nil when off
}

// result is a ZooKeeper reply, received from a helper goroutine.
type result struct {
	path     string // the ancestor listed by awaitCreation
	children []string
	stat     *zk.Stat
	exists   bool
	watch    <-chan zk.Event
	err      error
}

// call runs req detached (Session.detach) so that Unwatch and Close never
// wait for ZooKeeper; false when the watch was stopped meanwhile.
func (f *folder) call(req func() result) (result, bool) {
	ch := make(chan result, 1)
	f.w.s.detach(func() { ch <- req() })
	select {
	case r := <-ch:
		return r, true
	case <-f.ctx.Done():
		return result{}, false
	}
}

// run keeps the folder's watch until it is stopped or the folder is
// deleted: list the folder (arming a child watch), wait for the watch to
// fire, wait Coalesce, list again, and so on. A failure waits its backoff
// and lists again.
func (f *folder) run() {
	defer f.w.wg.Done()
	defer close(f.done)
	defer f.cleanup()
	if !f.waitForPrevious() {
		return
	}
	if f.w.cfg.Rescan > 0 {
		f.safety = time.NewTimer(f.w.cfg.Rescan)
		defer f.safety.Stop()
	}
	f.rescanNext = true // the first listing is a Rescan
	for f.pause() {
		switch f.look() {
		case stopped:
			return
		case lookAgain:
			continue
		}
		if !f.awaitWatch() {
			return
		}
	}
}

// next is what run does after look.
type next int

const (
	stopped   next = iota // the watch was stopped or the folder deleted
	lookAgain             // look again, after f.wait
	await                 // wait for the armed watch
)

// waitForPrevious waits for an ended watch of the same path to finish its
// last emit; false if this watch was stopped meanwhile.
func (f *folder) waitForPrevious() bool {
	if f.after == nil {
		return true
	}
	select {
	case <-f.after:
		return true
	case <-f.ctx.Done():
		return false
	}
}

// pause waits f.wait (a backoff, or Coalesce after a fire) and takes a
// pending RescanAll request; false if the watch was stopped meanwhile.
func (f *folder) pause() bool {
	if f.wait > 0 && !f.sleep(f.wait) {
		return false
	}
	f.wait = 0
	select {
	case <-f.rescan:
		f.rescanNext = true
	default:
	}
	return true
}

// look lists the folder, with a watch unless one is armed already, and
// reports the change; a folder that is not there yet is waited for.
func (f *folder) look() next {
	armed := f.watch != nil && f.watched == f.path
	r, ok := f.call(func() result {
		var r result
		if armed {
			r.children, r.stat, r.err = f.w.s.Conn.Children(f.path)
		} else {
			r.children, r.stat, r.watch, r.err = f.w.s.Conn.ChildrenW(f.path)
		}
		return r
	})
	if !ok {
		return stopped
	}
	f.w.listings.Add(1)
	f.listedAt = time.Now()
	switch {
	case r.err == nil:
		if !armed {
			f.watch, f.watched = r.watch, f.path
		}
		if !f.onListing(r) {
			return stopped
		}
		return await
	case errors.Is(r.err, zk.ErrNoNode):
		if f.listed { // deleted
			f.gone()
			return stopped
		}
		return f.awaitCreation()
	default:
		f.fail("list", r.err)
		return lookAgain
	}
}

// onListing takes a successful listing: logs a re-armed watch, notices a
// folder re-created between two listings, and reports the change; false if
// the watch was stopped.
func (f *folder) onListing(r result) bool {
	w := f.w
	if f.recovering {
		w.rearms.Add(1)
		level := slog.LevelInfo
		if f.outage { // the Session logs the return, once for every folder
			level = slog.LevelDebug
		}
		w.log.Log(context.Background(), level, "zkwatch: watch re-armed", "path", f.path, "attempts", f.failures)
		f.recovering = false
	}
	f.failures = 0
	if f.listed && r.stat.Czxid != f.czxid {
		w.log.Info("zkwatch: folder was re-created", "path", f.path)
		f.rescanNext = true
	}
	f.czxid = r.stat.Czxid
	if !f.report(r.children, f.rescanNext) {
		return false
	}
	if f.rescanNext {
		f.resetSafety()
	}
	f.rescanNext = false
	return true
}

// awaitCreation waits for a folder not there yet by a child watch on its
// nearest ancestor that is there (unless one is armed already): it fires
// when the next folder down is created, and when the ancestor is deleted,
// so it goes with a batch removed before its batch-processing was made
// (an exists watch on a folder that never comes stays until the session
// ends: no client can remove a watch). The folder is listed at once if
// it appeared meanwhile.
func (f *folder) awaitCreation() next {
	armed := f.watch != nil && f.watched != f.path
	r, ok := f.call(func() result {
		var r result
		if armed { // its fire would have said the folder appeared
			r.exists, _, r.err = f.w.s.Conn.Exists(f.path)
			return r
		}
		for r.path = path.Dir(f.path); ; r.path = path.Dir(r.path) {
			f.w.listings.Add(1)
			r.children, _, r.watch, r.err = f.w.s.Conn.ChildrenW(r.path)
			if !errors.Is(r.err, zk.ErrNoNode) || r.path == "/" {
				break
			}
		}
		down, _, _ := strings.Cut(strings.TrimPrefix(f.path, strings.TrimSuffix(r.path, "/")+"/"), "/")
		r.exists = slices.Contains(r.children, down)
		return r
	})
	if !ok {
		return stopped
	}
	if r.err != nil {
		f.fail("wait", r.err)
		return lookAgain
	}
	if r.exists {
		// Created meanwhile (the folder, or a folder on the way down to it,
		// whose creation the watch just armed will not see): look again.
		f.watch = nil
		return lookAgain
	}
	if !armed {
		f.watch, f.watched = r.watch, r.path
	}
	if f.recovering {
		f.w.rearms.Add(1)
		f.recovering = false
	}
	f.failures = 0
	f.resetSafety()
	return await
}

// awaitWatch waits for the armed watch to fire, a RescanAll, the safety
// rescan, or the end; false at the end.
func (f *folder) awaitWatch() bool {
	var safety <-chan time.Time
	if f.safety != nil {
		safety = f.safety.C
	}
	select {
	case ev := <-f.watch:
		f.w.fires.Add(1)
		f.watch = nil
		switch ev.Type {
		case zk.EventNodeChildrenChanged:
			// A quiet folder lists at once; a busy one at most once per
			// Coalesce.
			f.wait = f.w.cfg.Coalesce - time.Since(f.listedAt)
		case zk.EventNotWatching: // session expired (or closed)
			f.fail("watch", ev.Err)
		default: // deleted: look now
		}
	case <-f.rescan:
		f.rescanNext = true
	case <-safety:
		f.rescanNext = true
	case <-f.ctx.Done():
		return false
	}
	return true
}

// resetSafety restarts the safety rescan's period after a full listing.
func (f *folder) resetSafety() {
	if f.safety != nil {
		f.safety.Reset(f.w.cfg.Rescan)
	}
}

// sleep waits d; false if the watch was stopped meanwhile.
func (f *folder) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-f.ctx.Done():
		return false
	}
}

// fail logs a failed request or a lost watch, drops the watch, and sets the
// backoff before the next listing, which re-arms and is a Rescan.
func (f *folder) fail(what string, err error) {
	w := f.w
	w.errs.Add(1)
	f.failures++
	d := backoff.Delay(backoffStart, backoffMax, f.failures)
	f.wait, f.recovering, f.rescanNext, f.watch = d, true, true, nil
	loud := f.failures == 1 || f.failures%10 == 0 // the first failure and every tenth
	f.outage = w.s.away(err)
	level := slog.LevelWarn
	if !loud || f.outage || w.s.closed.Load() { // or the session was closed under the watcher
		level = slog.LevelDebug
	}
	w.log.Log(context.Background(), level, "zkwatch: "+what+" failed, retrying",
		"path", f.path, "err", err, "attempt", f.failures, "backoff", d)
	if what == "list" && loud && !w.s.closed.Load() {
		f.diagnoseSize(err)
	}
}

// diagnoseSize checks, with a small request, whether a failed listing may
// have been too big for one packet, and logs an error naming the folder.
func (f *folder) diagnoseSize(listErr error) {
	st, ok := f.call(func() result {
		var r result
		r.exists, r.stat, r.err = f.w.s.Conn.Exists(f.path)
		return r
	})
	if !ok || st.err != nil || !st.exists {
		return
	}
	limit := zkconn.MaxPacket
	if m := f.w.s.maxBufferSize; m > 0 {
		limit = m
	}
	size := f.listingSize(int(st.stat.NumChildren))
	if size < limit*9/10 {
		return
	}
	f.w.log.Error("zkwatch: cannot list folder: it has too many children for one ZooKeeper packet; "+
		"drain it, or raise the packet limit (jute.maxbuffer on servers and Java clients, "+
		"zkwatch Config.MaxBufferSize)",
		"path", f.path, "children", st.stat.NumChildren, "estimated_bytes", size, "limit_bytes", limit,
		"err", listErr)
}

// listingSize estimates the bytes of a getChildren reply with n children.
func (f *folder) listingSize(n int) int {
	name := f.avgName
	if name == 0 {
		name = 24
	}
	return 100 + n*(4+name)
}

// report diffs a listing against the last one and emits the change;
// false if the watch was stopped.
func (f *folder) report(children []string, rescan bool) bool {
	sort.Strings(children)
	added, removed := diff(f.known, children)
	if rescan {
		added = slices.Clone(children)
	}
	f.known, f.listed = children, true
	total := 0
	for _, c := range children {
		total += len(c)
	}
	if len(children) > 0 {
		f.avgName = total / len(children)
	}
	// A listing over one packet (about 60,000 children of job-sized names)
	// fails in Java clients and in go-zookeeper capped with
	// Config.MaxBufferSize.
	if size := f.listingSize(len(children)); size > zkconn.MaxPacket && !f.warned {
		f.warned = true
		f.w.log.Warn("zkwatch: folder listing is over 1 MB: Java clients with the default jute.maxbuffer cannot list it",
			"path", f.path, "children", len(children), "estimated_bytes", size)
	} else if size <= zkconn.MaxPacket/2 {
		f.warned = false
	}
	if !rescan && len(added) == 0 && len(removed) == 0 {
		return true
	}
	return f.send(Change{Path: f.path, Added: added, Removed: removed, Count: len(children), Children: children, Rescan: rescan})
}

// gone ends the watch of a deleted folder with its Gone change.
func (f *folder) gone() {
	// Mark the watch ended first, so that a Watch of the same path (from
	// emit, say) starts a new one, which waits for this one to finish.
	f.ended.Store(true)
	f.send(Change{Path: f.path, Removed: f.known, Count: 0, Gone: true})
}

// send calls emit unless the watch was stopped.
func (f *folder) send(c Change) bool {
	if f.ctx.Err() != nil {
		return false
	}
	f.w.emits.Add(1)
	f.w.emit(c)
	return true
}

// cleanup forgets the folder when its watch ended by itself.
func (f *folder) cleanup() {
	w := f.w
	w.mu.Lock()
	if w.folders[f.path] == f {
		delete(w.folders, f.path)
	}
	w.mu.Unlock()
	f.cancel()
}

// diff returns what is in b and not in a, and what is in a and not in b;
// both are sorted.
func diff(a, b []string) (added, removed []string) {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			i++
			j++
		case a[i] < b[j]:
			removed = append(removed, a[i])
			i++
		default:
			added = append(added, b[j])
			j++
		}
	}
	removed = append(removed, a[i:]...)
	added = append(added, b[j:]...)
	return added, removed
}
