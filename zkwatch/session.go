// Package zkwatch owns ingestq's ZooKeeper session: connecting, tracking
// the session's state, and the child watches the daemon and its dashboard
// keep on the queue's folders (Watcher).
package zkwatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/internal/zkconn"
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

// SplitChroot splits a ZooKeeper connect string "h1:2181,h2:2181/app" into
// its servers and its chroot suffix ("/app"; "" when there is none).
func SplitChroot(s string) (servers, chroot string) {
	if i := strings.IndexByte(s, '/'); i >= 0 {
		return s[:i], s[i:]
	}
	return s, ""
}

// Session is a ZooKeeper connection whose session state is tracked through
// the event callback (go-zookeeper's event channel drops events when full).
type Session struct {
	Conn *zk.Conn

	maxBufferSize int // Config.MaxBufferSize, for the watcher's diagnostics
	log           *slog.Logger
	closed        atomic.Bool    // Close was called
	detached      sync.WaitGroup // requests whose caller may stop waiting (detach)

	mu          sync.Mutex
	state       zk.State
	expirations int           // StateExpired events seen
	onConnect   []*hook       // called when a session is (re-)established
	changed     chan struct{} // closed and replaced on every state change
	hadSession  bool          // a session was established once
	lostAt      time.Time     // when the connection dropped; zero while connected
	lostExpired bool          // the session expired during the current loss
}

// ErrRefused is Dial's error when every ZooKeeper address refused the
// connection: nothing listens there, so waiting would not help.
var ErrRefused = errors.New("connection refused")

// Dial connects and waits until the session is established or ctx ends. It
// returns ErrRefused at once when every server's address refused the
// connection; a server that accepts it but gives no session is waited for
// until ctx ends.
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
	servers := strings.Join(cfg.Servers, ",")
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	refused := &refusals{onAll: func() { cancel(ErrRefused) }, handshake: zkconn.Limit(cfg.SessionTimeout),
		behind: &behind{log: cfg.Logger}}
	hosts := zk.NewDNSHostProvider()
	s := &Session{changed: make(chan struct{}), maxBufferSize: cfg.MaxBufferSize, log: cfg.Logger}
	conn, _, err := zk.Connect(cfg.Servers, cfg.SessionTimeout,
		zk.WithLogger(slogPrintf{cfg.Logger}), zk.WithEventCallback(s.onEvent),
		zk.WithHostProvider(hosts), zk.WithDialer(refused.dial),
		zk.WithMaxBufferSize(cfg.MaxBufferSize)) // 0: no cap, go-zookeeper's default
	if err != nil {
		return nil, fmt.Errorf("zookeeper %s: %w", servers, err)
	}
	refused.setAddresses(hosts.Len())
	s.Conn = conn
	if err := s.WaitState(ctx, zk.StateHasSession); err != nil {
		conn.Close()
		if errors.Is(context.Cause(ctx), ErrRefused) {
			return nil, fmt.Errorf("zookeeper %s: %w: nothing listens there", servers, ErrRefused)
		}
		return nil, fmt.Errorf("zookeeper %s: no session: %w (is it running? `ingestq` reads --zk or INGESTQ_ZK)",
			servers, err)
	}
	return s, nil
}

// refusals watches the client's connection attempts, so that Dial can say
// at once that no server listens instead of waiting for its deadline.
// go-zookeeper tries each resolved address in turn: once as many attempts
// in a row as there are addresses were refused, every address refused.
type refusals struct {
	onAll     func()        // called when every address refused
	handshake time.Duration // the most a session handshake may wait (zkconn.Bound)
	behind    *behind       // gives up a session that serving servers refuse

	mu        sync.Mutex
	addresses int // resolved addresses; 0 until known
	inARow    int // refused attempts since the last other outcome
}

func (r *refusals) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	conn, err := net.DialTimeout(network, address, timeout)
	r.mu.Lock()
	if errors.Is(err, syscall.ECONNREFUSED) {
		r.inARow++
	} else {
		r.inARow = 0 // a connection, or a timeout: something may be there
	}
	r.mu.Unlock()
	r.check()
	if err != nil {
		return nil, err
	}
	return newWatchesFirst(r.behind.wrap(zkconn.Bound(conn, r.handshake), address)), nil
}

func (r *refusals) setAddresses(n int) {
	r.mu.Lock()
	r.addresses = n
	r.mu.Unlock()
	r.check()
}

func (r *refusals) check() {
	r.mu.Lock()
	all := r.addresses > 0 && r.inARow >= r.addresses
	r.mu.Unlock()
	if all {
		r.onAll()
	}
}

func (s *Session) onEvent(e zk.Event) {
	if e.Type != zk.EventSession {
		return
	}
	s.mu.Lock()
	s.state = e.State
	switch e.State {
	case zk.StateDisconnected:
		s.lost(e.Server)
	case zk.StateExpired:
		s.expirations++
		s.lostExpired = true
		if s.lostAt.IsZero() { // not seen without a loss; say it anyway
			s.log.Warn("zookeeper: session expired: its locks are gone; a new session is being opened and every watch re-armed")
		}
	case zk.StateHasSession:
		s.back()
	}
	close(s.changed)
	s.changed = make(chan struct{})
	if e.State == zk.StateHasSession && !s.closed.Load() {
		for _, h := range s.onConnect {
			// A goroutine of its own: never block the client's event loop.
			// Started under mu, so before the Wait of unregister or Close.
			h.running.Go(h.fn)
		}
	}
	s.mu.Unlock()
}

// hook is a function OnConnect registered, with its calls under way.
type hook struct {
	fn      func()
	running sync.WaitGroup
}

// lost logs, once per outage, that the connection dropped. Called with s.mu
// held. The client reconnects by itself; requests wait or fail meanwhile.
func (s *Session) lost(server string) {
	if !s.hadSession || !s.lostAt.IsZero() || s.closed.Load() {
		return
	}
	s.lostAt = time.Now()
	s.log.Warn("zookeeper: connection lost; reconnecting (nothing is read or written until it is back)", "server", server)
}

// back logs the end of an outage, with how long it lasted and whether the
// session survived it. Called with s.mu held.
func (s *Session) back() {
	s.hadSession = true
	if s.lostAt.IsZero() {
		return
	}
	away := time.Since(s.lostAt).Round(time.Millisecond)
	if s.lostExpired {
		s.log.Info("zookeeper: back; the session had expired: its locks were dropped, and every watch is re-armed", "away", away)
	} else {
		s.log.Info("zookeeper: back; the session was kept", "away", away)
	}
	s.lostAt, s.lostExpired = time.Time{}, false
}

// away tells whether err is ZooKeeper being out of reach (the connection
// lost, the session expired or closed), which the Session logs once per
// outage: callers need not log it again.
func (s *Session) away(err error) bool {
	if s.State() != zk.StateHasSession {
		return true
	}
	for _, e := range []error{zk.ErrConnectionClosed, zk.ErrNoServer, zk.ErrSessionExpired, zk.ErrClosing} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// OnConnect registers fn to run each time the client has a session again
// (after a reconnect or an expiry): work that waited on ZooKeeper can go on.
// Each call runs in a goroutine of its own. The returned unregister stops
// the calls and waits for those under way; it is safe to call twice. Close
// does the same for every fn still registered. fn must not call either.
func (s *Session) OnConnect(fn func()) (unregister func()) {
	h := &hook{fn: fn}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onConnect = append(s.onConnect, h)
	return func() {
		s.mu.Lock()
		s.onConnect = slices.DeleteFunc(s.onConnect, func(o *hook) bool { return o == h })
		s.mu.Unlock()
		h.running.Wait()
	}
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

// Close ends the session; its ephemeral nodes (locks) go at once. It waits
// for the detached requests, which the closed client fails at once, and for
// the OnConnect calls under way; none starts after it. Close a Watcher on
// the session first.
func (s *Session) Close() {
	s.mu.Lock()
	s.closed.Store(true) // under mu: no detach or hook starts a goroutine after this
	hooks := slices.Clone(s.onConnect)
	s.mu.Unlock()
	s.Conn.Close()
	s.detached.Wait()
	for _, h := range hooks {
		h.running.Wait()
	}
}

// detach runs a request in a goroutine the session owns, so that its caller
// can stop waiting for ZooKeeper (a request made while disconnected waits
// for a connection) and Close still waits for it.
func (s *Session) detach(req func()) {
	s.mu.Lock()
	closed := s.closed.Load()
	if !closed {
		s.detached.Go(req) // under mu: before Close's Wait
	}
	s.mu.Unlock()
	if closed {
		req() // the client is closed: it fails at once
	}
}

// slogPrintf adapts go-zookeeper's Printf logger to slog, at debug level:
// the client logs every reconnect, which is routine.
type slogPrintf struct{ l *slog.Logger }

func (p slogPrintf) Printf(format string, args ...any) {
	p.l.Debug("zookeeper: " + fmt.Sprintf(format, args...))
}

// Closed tells whether Close was called.
func (s *Session) Closed() bool { return s.closed.Load() }
