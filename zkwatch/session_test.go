package zkwatch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// pauseUntilExpired makes ZooKeeper unreachable for s through proxy (paused,
// its connections cut) until the server expires s's session: an ephemeral
// node of s under root, watched from direct, goes. The proxy stays paused.
func pauseUntilExpired(t *testing.T, s *Session, direct *zk.Conn, proxy *zktest.Proxy, root string) {
	t.Helper()
	eph := root + "/eph"
	if _, err := s.Conn.Create(eph, nil, zk.FlagEphemeral, acl); err != nil {
		t.Fatal(err)
	}
	ok, _, ephGone, err := direct.ExistsW(eph)
	if err != nil || !ok {
		t.Fatalf("ExistsW %s: %v, %v", eph, ok, err)
	}
	proxy.Pause()
	proxy.Cut()
	select {
	case ev := <-ephGone:
		if ev.Type != zk.EventNodeDeleted {
			t.Fatalf("event %v on %s", ev, eph)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the server did not expire the paused session")
	}
}

// Every address refusing the connection ends Dial at once with ErrRefused,
// however long its context would let it wait: a hang fails the test by its
// own timeout, not by a measured time.
func TestDialRefused(t *testing.T) {
	t.Parallel()
	a, b := zktest.ClosedAddr(t), zktest.ClosedAddr(t)
	log, _ := testLogger(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	_, err := Dial(ctx, Config{Servers: []string{a, b}, Logger: log})
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("Dial to two closed ports: %v, want ErrRefused", err)
	}
	for _, want := range []string{a, b, "refused"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

// A server that accepts the connection but gives no session is waited for
// until the context ends: that is not a refusal.
func TestDialNoSession(t *testing.T) {
	t.Parallel()
	proxy := zktest.ProxyToShared(t)
	proxy.Pause()
	log, _ := testLogger(t)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err := Dial(ctx, Config{Servers: []string{proxy.Addr()}, Logger: log})
	if err == nil || errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "no session") {
		t.Fatalf("Dial through a paused proxy: %v, want a no-session error", err)
	}
}

// A server that takes the connection and never answers the handshake (a
// restarting ZooKeeper was seen to) is given up after two thirds of the session
// timeout, and the client tries again: go-zookeeper alone would wait ten
// receive timeouts, 200 s for this 30 s session, well past the test's wait.
func TestStalledHandshakeIsGivenUp(t *testing.T) {
	t.Parallel()
	proxy := zktest.ProxyToShared(t)
	log, _ := testLogger(t)
	s, err := Dial(t.Context(), Config{Servers: []string{proxy.Addr()}, SessionTimeout: 30 * time.Second, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	proxy.Pause()
	proxy.Cut() // the client reconnects at once, into the black hole
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	if err := proxy.WaitAccepted(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := proxy.WaitAccepted(ctx, 3); err != nil {
		t.Fatalf("the client never gave up a handshake the server does not answer: %v", err)
	}
	proxy.Resume()
	if err := s.WaitState(ctx, zk.StateHasSession); err != nil {
		t.Fatal(err)
	}
	if n := s.Expirations(); n != 0 {
		t.Errorf("%d expirations: the session should have outlived a 20 s handshake", n)
	}
}

// An outage reads as two lines: the loss (WARN, at once) and the return
// (INFO, with how long it lasted and whether the session survived). The
// watches' own failures while ZooKeeper is away are debug lines.
func TestOutageLogsTwoLines(t *testing.T) {
	t.Parallel()
	proxy := zktest.ProxyToShared(t)
	direct := zktest.Connect(t)
	root := zktest.Root(t)
	mkdirs(t, direct, root)
	var dirs []string
	for i := range 30 {
		dirs = append(dirs, fmt.Sprintf("%s/f%02d", root, i))
	}
	mkdirs(t, direct, dirs...)

	log, logs := testLogger(t)
	// 3 s, not 1: on a loaded machine a cut connection's reconnect took
	// over a second, and the session the test means to keep expired.
	s := dial(t, Config{Servers: []string{proxy.Addr()}, SessionTimeout: 3 * time.Second, Logger: log})
	r := newRecorder()
	w := startWatcher(t, s, WatcherConfig{Rescan: -1, Logger: log}, r)
	for _, d := range dirs {
		w.Watch(d)
	}
	rescans := func(n int) {
		for _, d := range dirs {
			r.wait(t, d, fmt.Sprintf("%d rescans", n), func(cs []Change) bool {
				got := 0
				for _, c := range cs {
					if c.Rescan {
						got++
					}
				}
				return got >= n
			})
		}
	}
	rescans(1)

	// A cut connection: the session survives the reconnect.
	proxy.Cut()
	logs.WaitFor(t, "zookeeper: back", "kept")

	// ZooKeeper out of reach past the session timeout: the server expires
	// the session (its ephemeral node goes), and after the return every
	// watch is re-armed.
	pauseUntilExpired(t, s, direct, proxy, root)
	proxy.Resume()
	logs.WaitFor(t, "zookeeper: back", "expired")
	rescans(2)

	lost := logs.Lines("level=WARN", "zookeeper: connection lost")
	back := logs.Lines("level=INFO", "zookeeper: back")
	if len(lost) != 2 || len(back) != 2 {
		t.Errorf("%d WARN lines of a lost connection and %d INFO lines of its return; want 2 and 2 (two outages)",
			len(lost), len(back))
	}
	if n := len(logs.Lines("zkwatch:", "level=WARN")) + len(logs.Lines("zkwatch:", "level=INFO")); n > 0 {
		t.Errorf("%d per-folder lines above debug during the outages; want none", n)
	}
	if n := len(logs.Lines("level=DEBUG", "zkwatch: watch failed")); n < len(dirs) {
		t.Errorf("%d debug lines of lost watches, want at least %d: were the watches' failures seen?", n, len(dirs))
	}
}

// A function OnConnect registered runs on each return of the session, in a
// goroutine of its own. Its unregister waits for the call under way, and
// after it the function runs no more; Close waits for the calls under way
// of the functions still registered.
func TestOnConnect(t *testing.T) {
	t.Parallel()
	proxy := zktest.ProxyToShared(t)
	s := dial(t, Config{Servers: []string{proxy.Addr()}})
	// hook blocks each call until gate is closed, then marks it finished.
	hook := func(gate chan struct{}) (fn func(), started chan struct{}, finished *atomic.Bool) {
		started, finished = make(chan struct{}, 10), &atomic.Bool{}
		return func() { started <- struct{}{}; <-gate; finished.Store(true) }, started, finished
	}
	waitStarted := func(started chan struct{}, what string) {
		t.Helper()
		select {
		case <-started:
		case <-time.After(waitTimeout):
			t.Fatalf("%s not called after the connection was cut", what)
		}
	}
	// openWhen closes gate once cond holds (under s.mu): once the call's
	// waiter has gone past the point where it could skip the wait.
	openWhen := func(gate chan struct{}, cond func() bool) {
		go func() {
			defer close(gate)
			for deadline := time.Now().Add(waitTimeout); time.Now().Before(deadline); {
				s.mu.Lock()
				ok := cond()
				s.mu.Unlock()
				if ok {
					return
				}
				time.Sleep(time.Millisecond) // bounded poll: no event tells it
			}
		}()
	}

	gate1 := make(chan struct{})
	fn1, started1, finished1 := hook(gate1)
	unregister := s.OnConnect(fn1)
	proxy.Cut()
	waitStarted(started1, "the first function")
	openWhen(gate1, func() bool { return len(s.onConnect) == 0 })
	unregister()
	if !finished1.Load() {
		t.Fatal("unregister returned before the call under way ended")
	}
	unregister() // safe twice

	gate2 := make(chan struct{})
	fn2, started2, finished2 := hook(gate2)
	s.OnConnect(fn2)
	proxy.Cut()
	waitStarted(started2, "the second function")
	openWhen(gate2, s.closed.Load)
	s.Close()
	if !finished2.Load() {
		t.Fatal("Close returned before the call under way ended")
	}
	if n := len(started1); n != 0 {
		t.Fatalf("the unregistered function was called %d more times", n)
	}
}
