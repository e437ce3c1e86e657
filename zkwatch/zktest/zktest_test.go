package zktest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(WithShared(m)) }

func TestInstalled(t *testing.T) {
	if err := Installed(); err != nil {
		t.Fatal(err)
	}
}

func TestSharedRoundTrip(t *testing.T) {
	conn := Connect(t)
	root := Root(t)
	if _, err := conn.Create(root, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create %s: %v", root, err)
	}
	want := []byte("hello\x00world")
	if _, err := conn.Create(root+"/n", want, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	got, _, err := conn.Get(root + "/n")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestRootCleanup(t *testing.T) {
	var root string
	t.Run("sub/with spaces", func(t *testing.T) {
		root = Root(t)
		if strings.Count(root, "/") != 1 || strings.ContainsAny(root, " ") {
			t.Fatalf("root %q not sanitised", root)
		}
		conn := Connect(t)
		acl := zk.WorldACL(zk.PermAll)
		for _, p := range []string{root, root + "/a", root + "/a/b", root + "/c"} {
			if _, err := conn.Create(p, []byte("x"), 0, acl); err != nil {
				t.Fatalf("create %s: %v", p, err)
			}
		}
		if _, err := conn.Create(root+"/a/eph", nil, zk.FlagEphemeral, acl); err != nil {
			t.Fatal(err)
		}
	})
	if root == "" {
		t.Fatal("subtest did not run")
	}
	if root2 := Root(t); root2 == root {
		t.Fatalf("Root returned %q twice", root)
	}
	ok, _, err := Connect(t).Exists(root)
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		t.Fatalf("%s still exists after the subtest's cleanup", root)
	}
}

func TestDeleteTreeAndWipe(t *testing.T) {
	s, err := StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Kill() })
	conn := Connect(t, s.Addr)
	acl := zk.WorldACL(zk.PermAll)
	for _, p := range []string{"/x", "/x/y", "/x/y/z", "/w"} {
		if _, err := conn.Create(p, nil, 0, acl); err != nil {
			t.Fatal(err)
		}
	}
	if err := DeleteTree(conn, "/x"); err != nil {
		t.Fatal(err)
	}
	if err := DeleteTree(conn, "/x"); err != nil {
		t.Fatalf("second DeleteTree: %v", err)
	}
	if err := Wipe(conn); err != nil {
		t.Fatal(err)
	}
	children, _, err := conn.Children("/")
	if err != nil {
		t.Fatal(err)
	}
	if len(children) != 1 || children[0] != "zookeeper" {
		t.Fatalf("after Wipe, / has %v", children)
	}
}

func TestRestart(t *testing.T) {
	s, err := StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Kill() })
	addr := s.Addr
	if mode, err := Mode(addr); err != nil || mode != "standalone" {
		t.Fatalf("Mode = %q, %v", mode, err)
	}

	conn := Connect(t, addr)
	if _, err := conn.Create("/persist", []byte("v1"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	conn.Close()

	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := Mode(addr); err == nil {
		t.Fatal("server still answers after Stop")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.Addr != addr {
		t.Fatalf("Addr changed from %s to %s", addr, s.Addr)
	}
	if got, _, err := Connect(t, addr).Get("/persist"); err != nil || string(got) != "v1" {
		t.Fatalf("after Stop+Restart: Get = %q, %v", got, err)
	}

	// Kill -9 keeps committed data too (fsync is on).
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if got, _, err := Connect(t, addr).Get("/persist"); err != nil || string(got) != "v1" {
		t.Fatalf("after Kill+Restart: Get = %q, %v", got, err)
	}
	if err := s.Restart(); err == nil {
		t.Fatal("Restart of a running server succeeded")
	}
}

func TestEnsemble(t *testing.T) {
	e, err := StartEnsemble(t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Stop() })
	modes := map[string]int{}
	for _, s := range e.Servers {
		mode, err := Mode(s.Addr)
		if err != nil {
			t.Fatal(err)
		}
		modes[mode]++
	}
	if modes["leader"] != 1 || modes["follower"] != 2 {
		t.Fatalf("modes = %v", modes)
	}

	conn := Connect(t, e.Addrs()...)
	acl := zk.WorldACL(zk.PermAll)
	if _, err := conn.Create("/before", []byte("1"), 0, acl); err != nil {
		t.Fatal(err)
	}
	// Kill the server the client is connected to: the hardest case.
	victim := e.Servers[0]
	for _, s := range e.Servers {
		if s.Addr == conn.Server() {
			victim = s
		}
	}
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}

	// One in-flight request may fail while the client moves on, and while the
	// survivors elect a new leader (when the victim led) every server refuses
	// clients: go-zookeeper then reports ErrNoServer. A create whose reply
	// was lost may report ErrNodeExists on the next try.
	var lastErr error
	created := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		_, err := conn.Create("/after", []byte("2"), 0, acl)
		if err == nil || (lastErr != nil && errors.Is(err, zk.ErrNodeExists)) {
			created = true
			break
		}
		if !errors.Is(err, zk.ErrConnectionClosed) && !errors.Is(err, zk.ErrNoServer) {
			t.Fatalf("create after kill: %v", err)
		}
		lastErr = err
		t.Logf("create after kill: %v (retrying)", err)
		time.Sleep(100 * time.Millisecond) // back-off between retries, not synchronisation
	}
	if !created {
		t.Fatalf("create after kill kept failing: %v", lastErr)
	}
	for p, want := range map[string]string{"/before": "1", "/after": "2"} {
		got, _, err := conn.Get(p)
		if err != nil || string(got) != want {
			t.Fatalf("Get %s = %q, %v", p, got, err)
		}
	}
	if err := e.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, s := range e.Servers {
		if _, err := Mode(s.Addr); err == nil {
			t.Fatalf("%s still answers after Stop", s.Addr)
		}
	}
}
