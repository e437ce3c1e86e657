package zkwatch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// A ZooKeeper brought back behind the client (restored from an older copy
// of its data folder, then wiped) refuses the client's session for good.
// The session is taken as expired once, as a real expiry: a new session,
// the OnConnect hooks run once, one line says why, and writes work again.
// Before, the client offered the old session forever and never came back.
func TestServerBehindTheClientGivesANewSession(t *testing.T) {
	t.Parallel()
	srv := zktest.OwnServer(t)
	log, lb := testLogger(t)
	s := dial(t, Config{Servers: []string{srv.Addr}, SessionTimeout: timeoutForBehind, Logger: log})
	connected := make(chan struct{}, 10)
	defer s.OnConnect(func() { connected <- struct{}{} })()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	create := func(p string) {
		t.Helper()
		if _, err := s.Conn.Create(p, nil, 0, acl); err != nil {
			t.Fatalf("create %s: %v", p, err)
		}
	}

	create("/before")
	snapshot := filepath.Join(t.TempDir(), "data")
	if err := srv.Reload(zktest.CopyDataTo(snapshot)); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitState(ctx, zk.StateHasSession); err != nil {
		t.Fatal(err)
	}
	<-connected
	// The client sees zxids the copy lacks: more than the restored server
	// writes by itself (expiring its sessions) before the client is back.
	for i := range 20 {
		create(fmt.Sprintf("/after%02d", i))
	}

	for i, step := range []struct {
		name   string
		change func(data string) error
	}{
		{"restored from the older copy", zktest.RestoreDataFrom(snapshot)},
		{"wiped", os.RemoveAll},
	} {
		old := s.Conn.SessionID()
		if err := srv.Reload(step.change); err != nil {
			t.Fatal(err)
		}
		if err := s.WaitExpirations(ctx, i+1); err != nil {
			t.Fatalf("%s: the session was never given up: %v", step.name, err)
		}
		if err := s.WaitState(ctx, zk.StateHasSession); err != nil {
			t.Fatal(err)
		}
		select {
		case <-connected:
		case <-ctx.Done():
			t.Fatalf("%s: the OnConnect hook did not run", step.name)
		}
		if s.Conn.SessionID() == old {
			t.Errorf("%s: still session %x, want a new one", step.name, old)
		}
		create(fmt.Sprintf("/new%d", i))
		if n := s.Expirations(); n != i+1 {
			t.Errorf("%s: %d expirations, want %d", step.name, n, i+1)
		}
		if n := len(connected); n != 0 {
			t.Errorf("%s: the OnConnect hook ran %d more times", step.name, n)
		}
		if n := len(lb.Lines("refused this client's session", "ingestq check")); n != i+1 {
			t.Errorf("%s: %d lines say the session was refused, want %d", step.name, n, i+1)
		}
	}
	if ok, _, err := s.Conn.Exists("/after00"); ok || err != nil {
		t.Errorf("/after00 exists: %v, %v; the server was wiped", ok, err)
	}
}

// timeoutForBehind is short, so that the refusals outlast it soon.
const timeoutForBehind = 2 * time.Second

// A member without a quorum takes connections and closes them as a server
// behind the client does, but it says (srvr) that it does not serve: the
// session lives on however long the quorum is away, and is kept when it is
// back, as before.
func TestQuorumLossKeepsTheSession(t *testing.T) {
	t.Parallel()
	e, err := zktest.StartEnsemble(t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Stop() })
	log, lb := testLogger(t)
	timeout := 2 * timeoutForBehind
	s := dial(t, Config{Servers: e.Addrs()[:1], SessionTimeout: timeout, Logger: log})
	ctx, cancel := context.WithTimeout(t.Context(), 2*waitTimeout)
	defer cancel()
	old := s.Conn.SessionID()
	for _, m := range e.Servers[1:] {
		if err := m.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	stopped := time.Now()
	// Each attempt to connect changes the state: wait for the first one
	// past twice the session timeout, when a refused session is given up.
	if err := s.wait(ctx, func() bool { return time.Since(stopped) > 2*timeout }); err != nil {
		t.Fatal(err)
	}
	for _, m := range e.Servers[1:] {
		if err := m.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.WaitState(ctx, zk.StateHasSession); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Conn.Create("/kept", nil, 0, acl); err != nil {
		t.Fatal(err)
	}
	if n, id := s.Expirations(), s.Conn.SessionID(); n != 0 || id != old {
		t.Errorf("after the quorum loss: %d expirations, session %x (was %x); want the session kept", n, id, old)
	}
	if lines := lb.Lines("refused this client's session"); len(lines) != 0 {
		t.Errorf("a quorum loss read as a server behind the client: %q", lines)
	}
}
