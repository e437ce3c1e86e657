// Package zkwatch owns ingestq's ZooKeeper session: connecting, tracking
// the session's state, and (in the daemon) the child watches on the queue's
// state folders.
package zkwatch

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// Config says how to reach ZooKeeper.
type Config struct {
	Servers        []string      // host:port, at least one
	SessionTimeout time.Duration // default 10 s
	Logger         *slog.Logger  // default slog.Default()
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

	mu      sync.Mutex
	state   zk.State
	changed chan struct{} // closed and replaced on every state change
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
	s := &Session{changed: make(chan struct{})}
	conn, _, err := zk.Connect(cfg.Servers, cfg.SessionTimeout,
		zk.WithLogger(slogPrintf{cfg.Logger}), zk.WithEventCallback(s.onEvent))
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

func (s *Session) onEvent(e zk.Event) {
	if e.Type != zk.EventSession {
		return
	}
	s.mu.Lock()
	s.state = e.State
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// State is the session's last known state.
func (s *Session) State() zk.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// WaitState waits until the session is in state want, or ctx ends.
func (s *Session) WaitState(ctx context.Context, want zk.State) error {
	for {
		s.mu.Lock()
		st, ch := s.state, s.changed
		s.mu.Unlock()
		if st == want {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w (session state %s)", ctx.Err(), st)
		}
	}
}

// Close ends the session; its ephemeral nodes (locks) go at once.
func (s *Session) Close() { s.Conn.Close() }

// slogPrintf adapts go-zookeeper's Printf logger to slog, at debug level:
// the client logs every reconnect, which is routine.
type slogPrintf struct{ l *slog.Logger }

func (p slogPrintf) Printf(format string, args ...any) {
	p.l.Debug("zookeeper: " + fmt.Sprintf(format, args...))
}
