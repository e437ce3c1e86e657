// Package zkwatch owns ingestq's ZooKeeper session: connecting, tracking
// the session's state, and (in the daemon) the child watches on the queue's
// state folders.
package zkwatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"
)

// Config says how to reach ZooKeeper.
type Config struct {
	Servers        []string      // host:port, at least one
	SessionTimeout time.Duration // default 10 s
	Logger         *slog.Logger  // default slog.Default()

	// MaxBufferSize caps the size of one packet from the server
	// (zk.WithMaxBufferSize). 0, the default, means no cap: go-zookeeper
	// then accepts any listing, however large. A packet over the cap makes
	// the client drop the connection (the request fails with
	// zk.ErrConnectionClosed). Tests use a small cap to provoke the failure
	// a Java client sees past jute.maxbuffer (1 MB by default).
	MaxBufferSize int
}

// ParseServers splits a connect string "h1:2181,h2:2181".
func ParseServers(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Session is a ZooKeeper connection whose session state is tracked through
// the event callback (go-zookeeper's event channel drops events when full).
type Session struct {
	Conn *zk.Conn

	maxBufferSize int // Config.MaxBufferSize, for the watcher's diagnostics
	log           *slog.Logger
	closed        atomic.Bool // Close was called

	mu          sync.Mutex
	state       zk.State
	expirations int           // StateExpired events seen
	onConnect   []func()      // called when a session is (re-)established
	changed     chan struct{} // closed and replaced on every state change
}

// Dial connects and waits until the session is established or ctx ends.
func Dial(ctx context.Context, cfg Config) (*Session, error) {
	if len(cfg.Servers) == 0 {
		return nil, fmt.Errorf("no ZooKeeper servers given")
	}
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := reachable(cfg.Servers); err != nil {
		return nil, err
	}
	s := &Session{changed: make(chan struct{}), maxBufferSize: cfg.MaxBufferSize, log: cfg.Logger}
	conn, _, err := zk.Connect(cfg.Servers, cfg.SessionTimeout,
		zk.WithLogger(slogPrintf{cfg.Logger}), zk.WithEventCallback(s.onEvent),
		zk.WithMaxBufferSize(cfg.MaxBufferSize)) // 0: no cap, go-zookeeper's default
	if err != nil {
		return nil, fmt.Errorf("zookeeper %s: %w", strings.Join(cfg.Servers, ","), err)
	}
	s.Conn = conn
	if err := s.WaitState(ctx, zk.StateHasSession); err != nil {
		conn.Close()
		return nil, fmt.Errorf("zookeeper %s: no session: %w (is it running? `ingestq` reads --zk or INGESTQ_ZK)",
			strings.Join(cfg.Servers, ","), err)
	}
	return s, nil
}

// reachable fails at once when no server of the list can be reached at all
// (nothing listens, or the name does not resolve): go-zookeeper would
// retry for ever, and a command would wait its whole connect timeout to
// say what the first refused connection already said. A server that
// accepts the connection but gives no session is left to that timeout.
func reachable(servers []string) error {
	var errs []string
	for _, addr := range servers {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		var dns *net.DNSError
		if !errors.Is(err, syscall.ECONNREFUSED) && !errors.As(err, &dns) {
			return nil // a timeout or the like: let the client try
		}
		errs = append(errs, err.Error())
	}
	return fmt.Errorf("cannot reach ZooKeeper at %s: %s (is it running? --zk or INGESTQ_ZK say where)",
		strings.Join(servers, ","), strings.Join(errs, "; "))
}

func (s *Session) onEvent(e zk.Event) {
	if e.Type != zk.EventSession {
		return
	}
	s.mu.Lock()
	s.state = e.State
	if e.State == zk.StateExpired {
		s.expirations++
		s.log.Warn("zookeeper: session expired: its locks are gone; a new session is being opened and every watch re-armed")
	}
	close(s.changed)
	s.changed = make(chan struct{})
	hooks := s.onConnect
	s.mu.Unlock()
	if e.State == zk.StateHasSession {
		for _, fn := range hooks {
			go fn() // never block the client's event loop
		}
	}
}

// OnConnect registers fn to run each time the client has a session again
// (after a reconnect or an expiry): work that waited on ZooKeeper can go on.
func (s *Session) OnConnect(fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onConnect = append(s.onConnect, fn)
}

// State is the session's last known state.
func (s *Session) State() zk.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// WaitState waits until the session is in state want, or ctx ends.
//
// Transient states can be missed: zk.StateExpired, in particular, lasts
// only until go-zookeeper starts its new session (and the client learns of
// the expiry only once it reaches a server again). Use WaitExpirations to
// wait for an expiry.
func (s *Session) WaitState(ctx context.Context, want zk.State) error {
	return s.wait(ctx, func() bool { return s.state == want })
}

// Expirations counts the session expiries seen since Dial. After each one
// go-zookeeper opens a new session by itself: the old session's watches are
// gone (each got zk.EventNotWatching) and so are its ephemeral nodes.
func (s *Session) Expirations() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.expirations
}

// WaitExpirations waits until Expirations() >= n, or ctx ends.
func (s *Session) WaitExpirations(ctx context.Context, n int) error {
	return s.wait(ctx, func() bool { return s.expirations >= n })
}

// wait waits until cond (called with s.mu held) holds, or ctx ends.
func (s *Session) wait(ctx context.Context, cond func() bool) error {
	for {
		s.mu.Lock()
		ok, st, ch := cond(), s.state, s.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w (session state %s)", ctx.Err(), st)
		}
	}
}

// Close ends the session; its ephemeral nodes (locks) go at once. Close a
// Watcher on the session first.
func (s *Session) Close() {
	s.closed.Store(true)
	s.Conn.Close()
}

// slogPrintf adapts go-zookeeper's Printf logger to slog, at debug level:
// the client logs every reconnect, which is routine.
type slogPrintf struct{ l *slog.Logger }

func (p slogPrintf) Printf(format string, args ...any) {
	p.l.Debug("zookeeper: " + fmt.Sprintf(format, args...))
}

// Closed tells whether Close was called.
func (s *Session) Closed() bool { return s.closed.Load() }
