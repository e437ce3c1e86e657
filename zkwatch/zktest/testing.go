package zktest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/internal/freeport"
	"github.com/ingestq/ingestq/internal/zkconn"
)

// SessionTimeout is the session timeout of the harness's clients, and the
// one to give a daemon under test that is not testing expiry: long enough
// that a loaded 2-core CI machine's stall of a few seconds (seen: a test
// binary's sessions expired at 4 s) costs no reconnect.
const SessionTimeout = 10 * time.Second

const connectTimeout = 10 * time.Second

// shared is the test binary's server, set while WithShared's Run runs.
var shared *Server

// WithShared wraps a package's tests for TestMain: its Run starts one Server
// in a temp dir, runs the tests, then stops the server and removes the dir,
// so that a goroutine-leak check after it sees the package's own leftovers
// only. If ZooKeeper is not installed Run prints the install command and
// returns 1: it never skips.
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(zktest.WithShared(m)) }
func WithShared(m *testing.M) interface{ Run() int } { return withShared{m} }

type withShared struct{ m *testing.M }

func (w withShared) Run() int {
	if err := Installed(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "zktest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "zktest:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	s, err := StartServer(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Deferred so a panic in m.Run's goroutine still stops the server; if a
	// test goroutine crashes the binary, Pdeathsig kills it (Linux).
	defer s.Kill() // the data dir is thrown away, no need for a clean stop
	shared = s
	return w.m.Run()
}

// Shared returns the test binary's shared server started by WithShared.
func Shared(t testing.TB) *Server {
	t.Helper()
	if shared == nil {
		t.Fatal("zktest: no shared ZooKeeper server; add to the package's tests:\n" +
			"\tfunc TestMain(m *testing.M) { goleak.VerifyTestMain(zktest.WithShared(m)) }")
	}
	return shared
}

// ProxyToShared starts a Proxy to the shared server; t.Cleanup closes it.
func ProxyToShared(t testing.TB) *Proxy {
	t.Helper()
	p, err := StartProxy(Shared(t).Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// OwnServer starts a server for one test, for what the shared one cannot
// give (a restart, a stop, the server's own counts); t.Cleanup kills it.
func OwnServer(t testing.TB) *Server {
	t.Helper()
	s, err := StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Kill() })
	return s
}

// Connect opens a session to servers (default: the shared server) with
// SessionTimeout and waits up to 10 s for it to be established. The
// client's log is shown only if the test fails. t.Cleanup closes the
// connection.
func Connect(t testing.TB, servers ...string) *zk.Conn {
	t.Helper()
	if len(servers) == 0 {
		servers = []string{Shared(t).Addr}
	}
	log := &bufLogger{}
	conn, err := dial(servers, log)
	if err != nil {
		t.Fatalf("%v\nclient log:\n%s", err, log.take())
	}
	t.Cleanup(func() {
		conn.Close()
		if lines := log.take(); t.Failed() && lines != "" {
			t.Logf("zk client log (%v):\n%s", servers, lines)
		}
	})
	return conn
}

// dial connects and waits for zk.StateHasSession. The event callback is
// used because the events channel drops events when nobody reads it.
func dial(servers []string, log zk.Logger) (*zk.Conn, error) {
	hasSession := make(chan struct{}, 1)
	conn, _, err := zk.Connect(servers, SessionTimeout, zk.WithLogger(log), zk.WithDialer(zkconn.Dialer(zkconn.Limit(SessionTimeout))),
		zk.WithEventCallback(func(ev zk.Event) {
			if ev.Type == zk.EventSession && ev.State == zk.StateHasSession {
				select {
				case hasSession <- struct{}{}:
				default:
				}
			}
		}))
	if err != nil {
		return nil, fmt.Errorf("zktest: connect %v: %w", servers, err)
	}
	select {
	case <-hasSession:
		return conn, nil
	case <-time.After(connectTimeout):
		conn.Close()
		return nil, fmt.Errorf("zktest: no session with %v after %v (state %v)", servers, connectTimeout, conn.State())
	}
}

// bufLogger keeps go-zookeeper's log lines until take.
type bufLogger struct {
	mu    sync.Mutex
	lines []string
	done  bool
}

func (l *bufLogger) Printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done && len(l.lines) < 1000 {
		l.lines = append(l.lines, time.Now().Format("15:04:05.000 ")+fmt.Sprintf(format, args...))
	}
}

// take returns the lines so far and stops collecting.
func (l *bufLogger) take() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done = true
	return strings.Join(l.lines, "\n")
}

// ClosedAddr is a loopback address where nothing listens (a port just
// freed): a client dialling it is refused.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// Root returns a fresh path prefix for t on the shared server,
// "/t-<sanitised test name>-<random hex>". It does not create the node;
// t.Cleanup deletes its whole subtree.
func Root(t testing.TB) string {
	t.Helper()
	addr := Shared(t).Addr
	var b [6]byte
	_, _ = rand.Read(b[:])
	root := "/t-" + sanitize(t.Name()) + "-" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		conn, err := dial([]string{addr}, nopLogger{})
		if err != nil {
			t.Errorf("zktest: cleanup of %s: %v", root, err)
			return
		}
		defer conn.Close()
		if err := DeleteTree(conn, root); err != nil {
			t.Errorf("zktest: cleanup of %s: %v", root, err)
		}
	})
	return root
}

// sanitize maps a test name to [A-Za-z0-9_-], at most 80 characters.
func sanitize(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) > 80 {
		b = b[:80]
	}
	return string(b)
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// DeleteTree deletes p and everything below it, children first. A missing
// node is not an error.
func DeleteTree(conn *zk.Conn, p string) error {
	for range 5 { // retry if children appear while deleting
		children, _, err := conn.Children(p)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("zktest: list %s: %w", p, err)
		}
		for _, c := range children {
			if err := DeleteTree(conn, path.Join(p, c)); err != nil {
				return err
			}
		}
		if p == "/" {
			return nil
		}
		err = conn.Delete(p, -1)
		if err == nil || errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if !errors.Is(err, zk.ErrNotEmpty) {
			return fmt.Errorf("zktest: delete %s: %w", p, err)
		}
	}
	return fmt.Errorf("zktest: delete %s: %w", p, zk.ErrNotEmpty)
}

// Wipe deletes every node except /zookeeper.
func Wipe(conn *zk.Conn) error {
	children, _, err := conn.Children("/")
	if err != nil {
		return fmt.Errorf("zktest: list /: %w", err)
	}
	for _, c := range children {
		if c == "zookeeper" {
			continue
		}
		if err := DeleteTree(conn, "/"+c); err != nil {
			return err
		}
	}
	return nil
}
