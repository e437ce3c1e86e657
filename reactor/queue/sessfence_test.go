package queue_test

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// An unlock whose write go-zookeeper still held unsent when its session
// expired leaves the lock that another session took since. go-zookeeper
// keeps such requests queued and, with several servers, sends them on the
// session it opens by itself after the expiry: it drops them only once it
// has tried every server (connect's retryStart). Here the client has three
// servers (three proxies to one): cut off after the unlock's exists saw
// its own lock, it learns of the expiry from the second and opens its new
// session on the third. Before, the queued delete went out on the new
// session and deleted the other session's lock (every lock node is at
// version 0). The cut comes before the unlock's first write: its delete,
// or, at the session's first unlock, what makes the session's own node.
func TestAnUnlockQueuedThroughAnExpiryLeavesAnotherSessionsLock(t *testing.T) {
	for _, first := range []bool{true, false} {
		t.Run(map[bool]string{true: "first unlock of the session", false: "a later unlock"}[first], func(t *testing.T) {
			r := newRun(t)
			ctx := t.Context()
			b := r.batch()
			s := cutOffClient(t, 3)
			var hook atomic.Pointer[func(op string)]
			qa, err := queue.New(s.conn, r.root, queue.WithLogger(slog.New(onLog(func(_, op string) {
				if f := hook.Load(); f != nil && op != "" {
					(*f)(op)
				}
			}))))
			r.ok(err)
			acquire := func() *queue.Batch {
				t.Helper()
				held, _, err := qa.AcquirePendingBatch(ctx, nil)
				if err != nil || held == nil {
					t.Fatalf("acquired %s (%v); want %s", idOf(held), err, b.ID)
				}
				return held
			}
			if !first {
				r.ok(qa.UnlockBatch(ctx, acquire()))
			}
			held := acquire()
			lock := r.q.Path("/batches/" + b.ID + "/lock")
			ok, mine, lockGone, err := r.conn.ExistsW(lock)
			if err != nil || !ok || mine.EphemeralOwner != s.conn.SessionID() {
				t.Fatalf("the lock before the unlock: %v %+v (%v); want this session's", ok, mine, err)
			}

			var once sync.Once
			cut := func(op string) {
				if op == "create" || op == "delete" || op == "multi" {
					once.Do(s.cut)
				}
			}
			hook.Store(&cut)
			unlocked := make(chan error, 1)
			go func() { unlocked <- qa.UnlockBatch(ctx, held) }()

			// The server expires the session, another session takes the
			// lock, and the client gets through again: it learns of the
			// expiry and opens a new session, on which go-zookeeper sends
			// what it still holds.
			waitEvent(t, lockGone, zk.EventNodeDeleted, "the cut-off session's lock to go with it")
			other, err := r.q.LockBatch(ctx, b.ID)
			if err != nil {
				t.Fatalf("another session's lock of %s: %v", b.ID, err)
			}
			s.reconnect()
			// Requests go out in order: this read follows what the client held.
			if _, _, err := s.conn.Exists(lock); err != nil {
				t.Fatalf("a read on the new session: %v", err)
			}
			err = <-unlocked
			ok, now, rerr := r.conn.Exists(lock)
			if rerr != nil || !ok || now.EphemeralOwner != r.conn.SessionID() {
				t.Fatalf("after the cut-off session's unlock (%v), the lock another session took since is there: %v (%v); want true, left",
					err, ok, rerr)
			}
			r.ok(r.q.UnlockBatch(ctx, other))
		})
	}
}

// The session's own node deleted by hand while the session lives, and its
// folder with it (zkCli's deleteall /ingestq/sessions): the next unlock
// makes them again and releases the lock. Before, with the folder gone,
// the unlock failed with NoNode, which is not transient: the reactor's
// retry, releaseOrphanLater and the store step's unlock gave it up, and
// the lock stayed for as long as the daemon's session.
func TestAnUnlockAfterTheSessionsNodeWasDeletedReleasesTheLock(t *testing.T) {
	const ark = "ark:/99999/fk4fence"
	for _, tc := range []struct {
		name            string
		folder, storage bool
	}{
		{"the node, a batch lock", false, false},
		{"the node and its folder, a batch lock", true, false},
		{"the node and its folder, a storage lock", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRun(t)
			ctx := t.Context()
			b := r.acquiredBatch()
			r.ok(r.q.UnlockBatch(ctx, b)) // makes the session's node
			sessions := r.q.Path("/ingestq/sessions")
			kids, _, err := r.conn.Children(sessions)
			if err != nil || len(kids) != 1 {
				t.Fatalf("the sessions' nodes after an unlock: %v (%v); want this session's", kids, err)
			}
			r.ok(r.conn.Delete(sessions+"/"+kids[0], -1))
			if tc.folder {
				r.ok(r.conn.Delete(sessions, -1))
			}

			lock := r.q.Path("/batches/" + b.ID + "/lock")
			var unlock func() error
			if tc.storage {
				lock = r.q.Path("/locks/storage/" + queue.LockName(ark))
				if ok, err := r.q.LockStorage(ctx, ark, ""); err != nil || !ok {
					t.Fatalf("storage lock of %s: %v (%v); want taken", ark, ok, err)
				}
				unlock = func() error {
					deleted, err := r.q.UnlockStorage(ctx, ark)
					if err == nil && !deleted {
						return errors.New("UnlockStorage deleted nothing")
					}
					return err
				}
			} else {
				held, _, err := r.q.AcquirePendingBatch(ctx, nil)
				if err != nil || held == nil {
					t.Fatalf("acquired %s (%v); want %s", idOf(held), err, b.ID)
				}
				unlock = func() error { return r.q.UnlockBatch(ctx, held) }
			}
			if err := unlock(); err != nil {
				t.Fatalf("the unlock after its session's node was deleted: %v; want nil", err)
			}
			if ok, _, err := r.conn.Exists(lock); err != nil || ok {
				t.Fatalf("%s after the unlock is there: %v (%v); want gone", lock, ok, err)
			}
		})
	}
}

// cutOff is a client of n servers, each a proxy to the shared one, that a
// test cuts off from all of them at once and lets through again.
type cutOff struct {
	t       *testing.T
	conn    *zk.Conn
	proxies []*zktest.Proxy
	gone    chan struct{} // closed once the client saw its connection go
	renewed chan struct{} // closed once it has a session after an expiry
}

// cutOffClient connects through n proxies to the shared server with a
// session timeout of 1 s.
func cutOffClient(t *testing.T, n int) *cutOff {
	c := &cutOff{t: t, gone: make(chan struct{}), renewed: make(chan struct{})}
	addrs := make([]string, n)
	for i := range n {
		c.proxies = append(c.proxies, zktest.ProxyToShared(t))
		addrs[i] = c.proxies[i].Addr()
	}
	var lost, renewed sync.Once
	var expired atomic.Bool
	connected := make(chan struct{}, 1)
	conn, _, err := zk.Connect(addrs, time.Second, zk.WithLogger(quiet{}), zk.WithEventCallback(func(e zk.Event) {
		switch {
		case e.Type != zk.EventSession:
		case e.State == zk.StateDisconnected:
			lost.Do(func() { close(c.gone) })
		case e.State == zk.StateExpired:
			expired.Store(true)
		case e.State == zk.StateHasSession && expired.Load():
			renewed.Do(func() { close(c.renewed) })
		case e.State == zk.StateHasSession:
			select {
			case connected <- struct{}{}:
			default:
			}
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	c.conn = conn
	c.wait(connected, "a session")
	return c
}

// cut black-holes every server and drops the client's connection, and
// returns once the client has seen it go: a request it is given then is
// held unsent.
func (c *cutOff) cut() {
	for _, p := range c.proxies {
		p.Pause()
		p.Cut()
	}
	select { // on the unlock's goroutine: no Fatal here
	case <-c.gone:
	case <-time.After(30 * time.Second):
		c.t.Error("waited 30 s for the client to see its connection go")
	}
}

// reconnect lets the client through again and waits for the new session
// it opens once it learns that its session expired.
func (c *cutOff) reconnect() {
	for _, p := range c.proxies {
		p.Resume()
	}
	c.wait(c.renewed, "the client's new session")
}

func (c *cutOff) wait(ch <-chan struct{}, what string) {
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		c.t.Fatalf("waited 30 s for %s", what)
	}
}

// quiet drops go-zookeeper's log: its loop may log after the test ends.
type quiet struct{}

func (quiet) Printf(string, ...any) {}
