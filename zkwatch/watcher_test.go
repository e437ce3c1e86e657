package zkwatch

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

func TestDiff(t *testing.T) {
	for _, c := range []struct{ a, b, add, rm []string }{
		{nil, nil, nil, nil},
		{nil, []string{"a", "b"}, []string{"a", "b"}, nil},
		{[]string{"a", "b"}, nil, nil, []string{"a", "b"}},
		{[]string{"a", "c", "e"}, []string{"b", "c", "d"}, []string{"b", "d"}, []string{"a", "e"}},
		{[]string{"a"}, []string{"a"}, nil, nil},
	} {
		add, rm := diff(c.a, c.b)
		if !slices.Equal(add, c.add) || !slices.Equal(rm, c.rm) {
			t.Errorf("diff(%v, %v) = %v, %v; want %v, %v", c.a, c.b, add, rm, c.add, c.rm)
		}
	}
}

func TestFolderChanges(t *testing.T) {
	conn := zktest.Connect(t)
	root := zktest.Root(t)
	dir := root + "/pending"
	mkdirs(t, conn, root, dir, dir+"/a", dir+"/b")

	r := newRecorder()
	w := startWatcher(t, dial(t, Config{}), WatcherConfig{Rescan: -1}, r)
	w.Watch(dir)
	w.Watch(dir) // idempotent
	if got := w.Watching(); !slices.Equal(got, []string{dir}) {
		t.Fatalf("Watching() = %v", got)
	}
	cs := r.wait(t, dir, "first listing", func(cs []Change) bool { return len(cs) > 0 })
	if c := cs[0]; !c.Rescan || !slices.Equal(c.Added, []string{"a", "b"}) || len(c.Removed) != 0 || c.Count != 2 {
		t.Fatalf("first change = %+v; want Rescan of [a b]", c)
	}

	mkdirs(t, conn, dir+"/c", dir+"/d", dir+"/e")
	cs = r.wait(t, dir, "c, d, e", func(cs []Change) bool { return has(cs, "c", "d", "e") })
	var added []string
	for _, c := range cs[1:] {
		if c.Rescan || len(c.Removed) > 0 {
			t.Fatalf("unexpected change %+v", c)
		}
		added = append(added, c.Added...)
	}
	if slices.Sort(added); !slices.Equal(added, []string{"c", "d", "e"}) {
		t.Fatalf("added %v; want [c d e] once each", added)
	}
	if c := cs[len(cs)-1]; c.Count != 5 {
		t.Fatalf("last change %+v: Count %d, want 5", c, c.Count)
	}

	if err := conn.Delete(dir+"/a", -1); err != nil {
		t.Fatal(err)
	}
	cs = r.wait(t, dir, "removal of a", func(cs []Change) bool { return !has(cs, "a") })
	if c := cs[len(cs)-1]; !slices.Equal(c.Removed, []string{"a"}) || len(c.Added) != 0 || c.Count != 4 || c.Rescan {
		t.Fatalf("change after delete = %+v; want Removed [a], Count 4", c)
	}
	if r.overl.Load() != 0 {
		t.Fatal("emit calls for one folder overlapped")
	}
	t.Logf("changes: %d, stats %+v", len(r.of(dir)), w.Stats())
}

func TestBurst(t *testing.T) {
	const n, writers = 1000, 16
	conn := zktest.Connect(t)
	root := zktest.Root(t)
	dir := root + "/pending"
	mkdirs(t, conn, root, dir)

	r := newRecorder()
	w := startWatcher(t, dial(t, Config{}), WatcherConfig{Rescan: -1}, r)
	w.Watch(dir)
	r.wait(t, dir, "first listing", func(cs []Change) bool { return len(cs) > 0 })
	before := w.Stats()

	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for g := range writers {
		wg.Go(func() {
			for i := g; i < n; i += writers {
				if _, err := conn.Create(fmt.Sprintf("%s/job-%04d", dir, i), nil, 0, acl); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	created := time.Since(start)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	cs := r.wait(t, dir, "all creates", func(cs []Change) bool { return len(view(cs)) == n })
	seen := time.Since(start)

	count := map[string]int{}
	for _, c := range cs[1:] {
		if c.Rescan || len(c.Removed) > 0 {
			t.Fatalf("unexpected change %+v", c)
		}
		for _, a := range c.Added {
			count[a]++
		}
	}
	for i := range n {
		if name := fmt.Sprintf("job-%04d", i); count[name] != 1 {
			t.Errorf("%s reported %d times", name, count[name])
		}
	}
	if last := cs[len(cs)-1]; last.Count != n {
		t.Errorf("last Count %d, want %d", last.Count, n)
	}
	st := w.Stats()
	listings, fires := st.Listings-before.Listings, st.Fires-before.Fires
	t.Logf("%d creates by %d writers in %v, all seen after %v: %d changes, %d listings, %d fires",
		n, writers, created.Round(time.Millisecond), seen.Round(time.Millisecond), len(cs)-1, listings, fires)
	if listings >= 500 {
		t.Errorf("%d listings for %d creates; want < 500", listings, n)
	}
}

func TestFolderAppearsAndGoes(t *testing.T) {
	conn := zktest.Connect(t)
	root := zktest.Root(t)
	dir := root + "/batches/b1/states/batch-processing" // no part exists yet

	r := newRecorder()
	w := startWatcher(t, dial(t, Config{}), WatcherConfig{Rescan: -1}, r)
	w.Watch(dir)
	if got := w.Watching(); !slices.Equal(got, []string{dir}) {
		t.Fatalf("Watching() = %v", got)
	}
	mkdirs(t, conn, root, root+"/batches", root+"/batches/b1", root+"/batches/b1/states", dir, dir+"/x")
	cs := r.wait(t, dir, "x", func(cs []Change) bool { return has(cs, "x") })
	if !cs[0].Rescan {
		t.Fatalf("first change %+v is not a Rescan", cs[0])
	}

	// Deleted: the last change is Gone with what was left, and the watch stops.
	mkdirs(t, conn, dir+"/y")
	r.wait(t, dir, "y", func(cs []Change) bool { return has(cs, "y") })
	if err := zktest.DeleteTree(conn, root+"/batches/b1"); err != nil {
		t.Fatal(err)
	}
	cs = r.wait(t, dir, "Gone", func(cs []Change) bool { return len(cs) > 0 && cs[len(cs)-1].Gone })
	if len(view(cs)) != 0 || cs[len(cs)-1].Count != 0 {
		t.Fatalf("after Gone the folder still holds %v: %+v", view(cs), cs)
	}
	// DeleteTree deletes children first: the Gone change holds what the
	// last listing saw, perhaps nothing.
	t.Logf("changes: %+v", cs)
	if got := w.Watching(); len(got) != 0 {
		t.Fatalf("Watching() = %v after the folder was deleted", got)
	}

	// Watch again: waits for it to come back.
	n := len(cs)
	w.Watch(dir)
	mkdirs(t, conn, root+"/batches/b1", root+"/batches/b1/states", dir, dir+"/z")
	cs = r.wait(t, dir, "z", func(cs []Change) bool { return has(cs, "z") })
	if !cs[n].Rescan {
		t.Fatalf("first change after the new Watch is %+v, not a Rescan", cs[n])
	}
}

// A folder waited for under a batch removed before the folder was ever
// made (cancelled before its jobs were) leaves no watch on the server: an
// exists watch on it stayed there, and in the client, until the session
// ended. A batch whose folder appears later is still seen. Its own server:
// the count of watches is the server's, and wchp lists no child watch.
func TestWaitForAFolderThatNeverComesLeavesNoWatch(t *testing.T) {
	srv := zktest.OwnServer(t)
	conn := zktest.Connect(t, srv.Addr)
	folder := func(bid string) string { return "/batches/" + bid + "/states/batch-processing" }
	mkdirs(t, conn, "/batches", "/batches/b1", "/batches/b2")
	watches := func() int {
		t.Helper()
		n, err := zktest.Watches(srv.Addr)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	r := newRecorder()
	w := startWatcher(t, dial(t, Config{Servers: []string{srv.Addr}}), WatcherConfig{Rescan: -1}, r)
	w.Watch("/batches") // as the reactor does
	r.wait(t, "/batches", "first listing", func(cs []Change) bool { return has(cs, "b1", "b2") })
	before := watches()
	w.Watch(folder("b1"))
	w.Watch(folder("b2"))
	// Bounded poll: arming a watch has no event of its own.
	for deadline := time.Now().Add(waitTimeout); watches() < before+2; {
		if time.Now().After(deadline) {
			t.Fatalf("%d watches after %v, want %d: one for each batch's folder", watches(), waitTimeout, before+2)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// b2 is taken up and given a job: its folder is watched once made.
	mkdirs(t, conn, "/batches/b2/states", folder("b2"), folder("b2")+"/jid1")
	cs := r.wait(t, folder("b2"), "jid1", func(cs []Change) bool { return has(cs, "jid1") })
	if !cs[0].Rescan {
		t.Fatalf("first change %+v is not a Rescan", cs[0])
	}

	// b1 is taken up and removed without a job, b2 removed; both are
	// unwatched once /batches has lost them, as the reactor does.
	mkdirs(t, conn, "/batches/b1/states")
	for _, bid := range []string{"b1", "b2"} {
		if err := zktest.DeleteTree(conn, "/batches/"+bid); err != nil {
			t.Fatal(err)
		}
	}
	r.wait(t, "/batches", "both removed", func(cs []Change) bool { return len(view(cs)) == 0 })
	w.Unwatch(folder("b1"))
	w.Unwatch(folder("b2"))
	if n := watches(); n != before {
		t.Errorf("%d watches on the server after both batches went, want %d (the watch on /batches)", n, before)
	}
	if cs := r.of(folder("b1")); len(cs) != 0 {
		t.Errorf("changes of a folder never made: %+v", cs)
	}
}

// A folder whose parents are made one by one just after Watch is seen,
// whichever level its wait is on when each is made: a level made between
// two steps of the wait's climb (a batch taken up as its folder's watch
// begins) is looked into at once, not waited on from above. A few hundred
// folders, for the races between the climb and the creates.
func TestFolderMadeLevelByLevelIsSeen(t *testing.T) {
	conn := zktest.Connect(t)
	root := zktest.Root(t)
	mkdirs(t, conn, root)
	r := newRecorder()
	w := startWatcher(t, dial(t, Config{}), WatcherConfig{Rescan: -1, Coalesce: -1}, r)
	for i := range 300 {
		bid := fmt.Sprintf("%s/b%d", root, i)
		dir := bid + "/states/batch-processing"
		w.Watch(dir)
		mkdirs(t, conn, bid, bid+"/states", dir, dir+"/jid")
		r.wait(t, dir, "jid", func(cs []Change) bool { return has(cs, "jid") })
	}
}

func TestWatchFromGoneEmit(t *testing.T) {
	// The daemon may call Watch for the same folder from emit: the new watch
	// must wait for the old one and not be lost.
	conn := zktest.Connect(t)
	root := zktest.Root(t)
	dir := root + "/f"
	mkdirs(t, conn, root, dir)

	r := newRecorder()
	var w *Watcher
	w = startWatcher(t, dial(t, Config{}), WatcherConfig{Rescan: -1}, &recorder{notify: make(chan struct{})})
	w.emit = func(c Change) {
		r.emit(c)
		if c.Gone {
			w.Watch(c.Path)
		}
	}
	w.Watch(dir)
	r.wait(t, dir, "first listing", func(cs []Change) bool { return len(cs) > 0 })
	if err := conn.Delete(dir, -1); err != nil {
		t.Fatal(err)
	}
	r.wait(t, dir, "Gone", func(cs []Change) bool { return slices.ContainsFunc(cs, func(c Change) bool { return c.Gone }) })
	mkdirs(t, conn, dir, dir+"/again")
	r.wait(t, dir, "again", func(cs []Change) bool { return has(cs, "again") })
	if r.overl.Load() != 0 {
		t.Fatal("emit calls for one folder overlapped")
	}
}

func TestUnwatch(t *testing.T) {
	conn := zktest.Connect(t)
	root := zktest.Root(t)
	a, b := root+"/a", root+"/b"
	mkdirs(t, conn, root, a, b)

	r := newRecorder()
	w := startWatcher(t, dial(t, Config{}), WatcherConfig{Rescan: -1}, r)
	w.Watch(a)
	w.Watch(b)
	r.wait(t, a, "first listing", func(cs []Change) bool { return len(cs) > 0 })
	r.wait(t, b, "first listing", func(cs []Change) bool { return len(cs) > 0 })

	w.Unwatch(a)
	w.Unwatch(a) // no-op
	nA := len(r.of(a))
	if got := w.Watching(); !slices.Equal(got, []string{b}) {
		t.Fatalf("Watching() = %v", got)
	}
	mkdirs(t, conn, a+"/after-unwatch", b+"/sentinel")
	r.wait(t, b, "sentinel", func(cs []Change) bool { return has(cs, "sentinel") })
	if cs := r.of(a); len(cs) != nA {
		t.Fatalf("emits for %s after Unwatch: %+v", a, cs[nA:])
	}

	// Watching again starts over with a Rescan.
	w.Watch(a)
	cs := r.wait(t, a, "Rescan", func(cs []Change) bool { return len(cs) > nA })
	if c := cs[nA]; !c.Rescan || !slices.Equal(c.Added, []string{"after-unwatch"}) {
		t.Fatalf("change after re-Watch = %+v", c)
	}
}

func TestServerRestart(t *testing.T) {
	srv := zktest.OwnServer(t)
	conn := zktest.Connect(t, srv.Addr)
	mkdirs(t, conn, "/jobs", "/jobs/pending", "/jobs/pending/before")

	s := dial(t, Config{Servers: []string{srv.Addr}})
	r := newRecorder()
	w := startWatcher(t, s, WatcherConfig{Rescan: -1}, r)
	w.Watch("/jobs/pending")
	r.wait(t, "/jobs/pending", "first listing", func(cs []Change) bool { return has(cs, "before") })

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	conn2 := zktest.Connect(t, srv.Addr)
	mkdirs(t, conn2, "/jobs/pending/after")
	cs := r.wait(t, "/jobs/pending", "after", func(cs []Change) bool { return has(cs, "after", "before") })
	mkdirs(t, conn2, "/jobs/pending/later")
	cs = r.wait(t, "/jobs/pending", "later", func(cs []Change) bool { return has(cs, "later") })
	t.Logf("session expirations %d; changes %+v; stats %+v", s.Expirations(), cs, w.Stats())
}

func TestSessionExpiry(t *testing.T) {
	proxy, err := zktest.StartProxy(zktest.Shared(t).Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	direct := zktest.Connect(t)
	root := zktest.Root(t)
	dir := root + "/pending"
	mkdirs(t, direct, root, dir, dir+"/a")

	s := dial(t, Config{Servers: []string{proxy.Addr()}, SessionTimeout: time.Second})
	oldID := s.Conn.SessionID()
	r := newRecorder()
	w := startWatcher(t, s, WatcherConfig{Rescan: -1}, r)
	w.Watch(dir)
	r.wait(t, dir, "first listing", func(cs []Change) bool { return has(cs, "a") })

	n0 := s.Expirations()
	paused := time.Now()
	pauseUntilExpired(t, s, direct, proxy, root)
	t.Logf("server expired the session %v after the pause", time.Since(paused).Round(time.Millisecond))
	mkdirs(t, direct, dir+"/b", dir+"/c")
	if err := direct.Delete(dir+"/a", -1); err != nil {
		t.Fatal(err)
	}
	nBefore := len(r.of(dir))

	proxy.Resume()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := s.WaitExpirations(ctx, n0+1); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitState(ctx, zk.StateHasSession); err != nil {
		t.Fatal(err)
	}
	if s.Conn.SessionID() == oldID {
		t.Fatal("same session id after expiry")
	}
	cs := r.wait(t, dir, "Rescan after expiry", func(cs []Change) bool { return len(cs) > nBefore })
	if c := cs[nBefore]; !c.Rescan || !slices.Equal(c.Added, []string{"b", "c"}) ||
		!slices.Equal(c.Removed, []string{"a"}) || c.Count != 2 {
		t.Fatalf("change after expiry = %+v; want Rescan Added [b c] Removed [a]", c)
	}
	mkdirs(t, direct, dir+"/d")
	cs = r.wait(t, dir, "d", func(cs []Change) bool { return has(cs, "d") })
	if c := cs[len(cs)-1]; c.Rescan || !slices.Equal(c.Added, []string{"d"}) {
		t.Fatalf("change after re-arm = %+v", c)
	}
	st := w.Stats()
	if st.Rearms == 0 {
		t.Fatalf("stats %+v: no re-arm", st)
	}
	t.Logf("recovered %v after the pause; stats %+v", time.Since(paused).Round(time.Millisecond), st)
}

func TestProxyCutKeepsSession(t *testing.T) {
	proxy, err := zktest.StartProxy(zktest.Shared(t).Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	direct := zktest.Connect(t)
	root := zktest.Root(t)
	dir := root + "/pending"
	mkdirs(t, direct, root, dir)

	s := dial(t, Config{Servers: []string{proxy.Addr()}})
	id := s.Conn.SessionID()
	r := newRecorder()
	w := startWatcher(t, s, WatcherConfig{Rescan: -1}, r)
	w.Watch(dir)
	r.wait(t, dir, "first listing", func(cs []Change) bool { return len(cs) > 0 })
	for i := range 3 {
		proxy.Cut()
		name := fmt.Sprintf("n%d", i)
		mkdirs(t, direct, dir+"/"+name)
		r.wait(t, dir, name, func(cs []Change) bool { return has(cs, name) })
	}
	if s.Conn.SessionID() != id || s.Expirations() != 0 {
		t.Fatalf("session changed: id %x -> %x, %d expirations", id, s.Conn.SessionID(), s.Expirations())
	}
	for _, c := range r.of(dir)[1:] {
		if c.Rescan {
			t.Errorf("Rescan after a reconnect that kept the session: %+v", c)
		}
	}
	t.Logf("stats %+v", w.Stats())
}

func TestSafetyRescan(t *testing.T) {
	conn := zktest.Connect(t)
	root := zktest.Root(t)
	dir := root + "/pending"
	mkdirs(t, conn, root, dir, dir+"/a")

	r := newRecorder()
	startWatcher(t, dial(t, Config{}), WatcherConfig{Rescan: 50 * time.Millisecond}, r).Watch(dir)
	cs := r.wait(t, dir, "two Rescans", func(cs []Change) bool { return len(cs) >= 2 })
	for _, c := range cs[:2] {
		if !c.Rescan || !slices.Equal(c.Added, []string{"a"}) || c.Count != 1 {
			t.Fatalf("change %+v; want a Rescan of [a]", c)
		}
	}
}

func TestRescanAll(t *testing.T) {
	conn := zktest.Connect(t)
	root := zktest.Root(t)
	a, b, missing := root+"/a", root+"/b", root+"/missing"
	mkdirs(t, conn, root, a, b, b+"/x")

	r := newRecorder()
	w := startWatcher(t, dial(t, Config{}), WatcherConfig{Rescan: -1}, r)
	for _, p := range []string{a, b, missing} {
		w.Watch(p)
	}
	r.wait(t, a, "first listing", func(cs []Change) bool { return len(cs) == 1 })
	r.wait(t, b, "first listing", func(cs []Change) bool { return len(cs) == 1 })
	w.RescanAll()
	for _, p := range []string{a, b} {
		cs := r.wait(t, p, "second Rescan", func(cs []Change) bool { return len(cs) == 2 })
		if !cs[1].Rescan || !slices.Equal(cs[1].Added, cs[0].Added) {
			t.Fatalf("%s: %+v after RescanAll", p, cs[1])
		}
	}
	if cs := r.of(missing); len(cs) != 0 {
		t.Fatalf("emits for a missing folder: %+v", cs)
	}
}

func TestTooBigListing(t *testing.T) {
	// A listing over the client's packet cap fails (the client drops the
	// connection); the watcher names the folder in an error, keeps retrying
	// and keeps the other folders going.
	conn := zktest.Connect(t)
	root := zktest.Root(t)
	big, small := root+"/big", root+"/small"
	mkdirs(t, conn, root, big, small)
	var ops []any
	for i := range 400 {
		ops = append(ops, &zk.CreateRequest{Path: fmt.Sprintf("%s/child-%04d", big, i), Acl: acl})
	}
	multi(t, conn, ops) // about 5.6 KB of names

	logger, logs := testLogger(t)
	s := dial(t, Config{MaxBufferSize: 4096, Logger: logger})
	r := newRecorder()
	w := startWatcher(t, s, WatcherConfig{Rescan: -1, Logger: logger}, r)
	w.Watch(big)
	w.Watch(small)
	line := logs.WaitFor(t, "too many children", "path="+big)
	t.Logf("logged: %s", line)
	r.wait(t, small, "first listing", func(cs []Change) bool { return len(cs) > 0 })
	mkdirs(t, conn, small+"/s1")
	r.wait(t, small, "s1", func(cs []Change) bool { return has(cs, "s1") })
	if cs := r.of(big); len(cs) != 0 {
		t.Fatalf("emits for the unlistable folder: %+v", cs)
	}

	ops = ops[:0]
	for i := range 300 {
		ops = append(ops, &zk.DeleteRequest{Path: fmt.Sprintf("%s/child-%04d", big, i), Version: -1})
	}
	multi(t, conn, ops)
	cs := r.wait(t, big, "listing once drained", func(cs []Change) bool { return len(cs) > 0 })
	if c := cs[0]; !c.Rescan || c.Count != 100 {
		t.Fatalf("first change of %s = Rescan %v Count %d; want a Rescan of 100", big, c.Rescan, c.Count)
	}
	st := w.Stats()
	if st.Errors == 0 || st.Rearms == 0 {
		t.Fatalf("stats %+v", st)
	}
	t.Logf("stats %+v", st)
}

func TestClose(t *testing.T) {
	conn := zktest.Connect(t)
	root := zktest.Root(t)
	busy, quiet := root+"/busy", root+"/quiet"
	mkdirs(t, conn, root, busy, quiet)
	s := dial(t, Config{})
	// A round trip on each connection: their send and receive loops start
	// just after the session is established.
	for _, c := range []*zk.Conn{conn, s.Conn} {
		if _, _, err := c.Exists("/"); err != nil {
			t.Fatal(err)
		}
	}
	before := runtime.NumGoroutine()

	r := newRecorder()
	w := NewWatcher(s, WatcherConfig{Rescan: 20 * time.Millisecond}, r.emit)
	for _, p := range []string{busy, quiet, root + "/missing", root + "/a/b/c"} {
		w.Watch(p)
	}
	stop := make(chan struct{})
	writerDone := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				writerDone <- nil
				return
			default:
			}
			if _, err := conn.Create(fmt.Sprintf("%s/n-%06d", busy, i), nil, 0, acl); err != nil {
				writerDone <- err
				return
			}
		}
	}()
	r.wait(t, busy, "20 children", func(cs []Change) bool { return len(view(cs)) >= 20 })
	w.Close()
	r.closed.Store(true)
	close(stop)
	if err := <-writerDone; err != nil {
		t.Fatal(err)
	}
	w.Watch(busy) // after Close: no-op
	w.RescanAll()
	w.Unwatch(quiet)

	// A second watcher sees a child created after Close: by then the first
	// would have reported it too, had it still been running.
	r2 := newRecorder()
	w2 := NewWatcher(s, WatcherConfig{}, r2.emit)
	w2.Watch(busy)
	mkdirs(t, conn, busy+"/after-close")
	r2.wait(t, busy, "after-close", func(cs []Change) bool { return has(cs, "after-close") })
	w2.Close()
	if n := r.late.Load(); n != 0 {
		t.Fatalf("emit called %d times after Close returned", n)
	}

	// No goroutine is left behind (a request abandoned by Close ends when
	// ZooKeeper answers it).
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before, %d after Close:\n%s",
				before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond) // bounded poll of the goroutine count
	}
	t.Logf("goroutines: %d before, %d after; stats %+v", before, runtime.NumGoroutine(), w.Stats())
}

func TestCloseWhileDisconnected(t *testing.T) {
	// Close must not wait for ZooKeeper: with the server unreachable, a
	// listing waits for a connection, and Close abandons it. The listing
	// belongs to the session: the session's Close ends it and waits for it.
	// (Not parallel: it counts the listings of every watcher in the process.)
	proxy, err := zktest.StartProxy(zktest.Shared(t).Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	direct := zktest.Connect(t)
	root := zktest.Root(t)
	mkdirs(t, direct, root)
	s := dial(t, Config{Servers: []string{proxy.Addr()}})
	r := newRecorder()
	w := NewWatcher(s, WatcherConfig{}, r.emit)
	w.Watch(root)
	r.wait(t, root, "first listing", func(cs []Change) bool { return len(cs) > 0 })
	proxy.Pause()
	w.RescanAll() // a listing that cannot be answered
	for deadline := time.Now().Add(waitTimeout); listingsInFlight() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the rescan's listing never started")
		}
		time.Sleep(5 * time.Millisecond) // bounded poll: no event says a request was sent
	}
	done := make(chan struct{})
	go func() { w.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatal("Close hangs while ZooKeeper is unreachable")
	}
	r.closed.Store(true)
	if listingsInFlight() == 0 {
		t.Fatal("no listing in flight after the watcher's Close: nothing to show")
	}
	s.Close()
	if n := listingsInFlight(); n != 0 {
		t.Fatalf("%d listings still running after the session's Close", n)
	}
	proxy.Resume()
}

// listingsInFlight counts the goroutines running a folder's request.
func listingsInFlight() int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "zkwatch.(*folder).call.func1(")
}
