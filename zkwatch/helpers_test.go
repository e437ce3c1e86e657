package zkwatch

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// waitTimeout bounds every wait on ZooKeeper; generous for a loaded CI box.
const waitTimeout = 30 * time.Second

var acl = zk.WorldACL(zk.PermAll)

// recorder collects emitted changes and lets a test wait on them.
type recorder struct {
	mu      sync.Mutex
	changes []Change
	notify  chan struct{} // closed and replaced on every emit

	closed atomic.Bool  // set by the test once Watcher.Close returned
	late   atomic.Int32 // emits after closed
	overl  atomic.Int32 // emits that overlapped for one folder
	inPath sync.Map     // path -> *atomic.Int32, emits in progress
}

func newRecorder() *recorder { return &recorder{notify: make(chan struct{})} }

func (r *recorder) emit(c Change) {
	if r.closed.Load() {
		r.late.Add(1)
	}
	n, _ := r.inPath.LoadOrStore(c.Path, new(atomic.Int32))
	if n.(*atomic.Int32).Add(1) > 1 {
		r.overl.Add(1)
	}
	defer n.(*atomic.Int32).Add(-1)
	if !slices.IsSorted(c.Added) || !slices.IsSorted(c.Removed) {
		panic(fmt.Sprintf("unsorted change %+v", c))
	}
	r.mu.Lock()
	r.changes = append(r.changes, c)
	close(r.notify)
	r.notify = make(chan struct{})
	r.mu.Unlock()
}

// of returns the changes emitted for path so far.
func (r *recorder) of(path string) []Change {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Change
	for _, c := range r.changes {
		if c.Path == path {
			out = append(out, c)
		}
	}
	return out
}

// wait waits until cond holds for path's changes, and returns them.
func (r *recorder) wait(t testing.TB, path, what string, cond func([]Change) bool) []Change {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		ch := r.notify
		r.mu.Unlock()
		cs := r.of(path)
		if cond(cs) {
			return cs
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("%s: no %s after %v; changes: %+v", path, what, waitTimeout, cs)
		}
	}
}

// view applies changes to an empty folder and returns the children.
func view(cs []Change) map[string]bool {
	v := map[string]bool{}
	for _, c := range cs {
		if c.Rescan {
			clear(v)
		}
		for _, a := range c.Added {
			v[a] = true
		}
		for _, d := range c.Removed {
			delete(v, d)
		}
	}
	return v
}

func has(cs []Change, names ...string) bool {
	v := view(cs)
	for _, n := range names {
		if !v[n] {
			return false
		}
	}
	return true
}

// testLogger returns a debug logger whose output is shown if t fails.
func testLogger(t testing.TB) (*slog.Logger, *logtest.Buffer) {
	lb := &logtest.Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log:\n%s", lb.String())
		}
	})
	return slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug})), lb
}

// dial opens a Session (closed by t.Cleanup) on cfg.Servers, default the
// shared server.
func dial(t testing.TB, cfg Config) *Session {
	t.Helper()
	if len(cfg.Servers) == 0 {
		cfg.Servers = []string{zktest.Shared(t).Addr}
	}
	if cfg.Logger == nil {
		cfg.Logger, _ = testLogger(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	s, err := Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// startWatcher starts a Watcher whose Close runs in t.Cleanup (before the
// session's, which was registered earlier).
func startWatcher(t testing.TB, s *Session, cfg WatcherConfig, r *recorder) *Watcher {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger, _ = testLogger(t)
	}
	w := NewWatcher(s, cfg, r.emit)
	t.Cleanup(w.Close)
	return w
}

// mkdirs creates each path (parents first), with no data.
func mkdirs(t testing.TB, conn *zk.Conn, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := conn.Create(p, nil, 0, acl); err != nil {
			t.Fatalf("create %s: %v", p, err)
		}
	}
}

// multi runs ops in batches of 500.
func multi(t testing.TB, conn *zk.Conn, ops []any) {
	t.Helper()
	for len(ops) > 0 {
		n := min(len(ops), 500)
		if _, err := conn.Multi(ops[:n]...); err != nil {
			t.Fatalf("multi: %v", err)
		}
		ops = ops[n:]
	}
}
