package cli_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// --zk naming a server that is not ZooKeeper fails within seconds, naming
// it and saying so, where the command waited out its connect timeout (30 s
// here): an HTTP server, a port that takes connections and says nothing,
// one that closes them at once, and one that greets with its own banner.
// A list with one real ZooKeeper in it still works.
func TestNotZooKeeper(t *testing.T) {
	t.Parallel()
	web := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(web.Close)
	for _, c := range []struct {
		name, addr, says string
	}{
		{"http", web.Listener.Addr().String(), "no answer within 2s"},
		{"silent", listen(t, func(net.Conn) {}), "no answer within 2s"},
		{"closes", listen(t, func(c net.Conn) { c.Close() }), "closes connections without answering"},
		{"banner", listen(t, func(c net.Conn) { _, _ = c.Write([]byte("SSH-2.0-OpenSSH_9.2\r\n")) }), `answers "SSH-2.0-OpenSSH_9.2"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			_, stderr, code := runEnv(t, map[string]string{"INGESTQ_CONNECT_TIMEOUT": "30s"}, "--zk", c.addr, "ls", "batches")
			took := time.Since(start)
			wantCode(t, code, 1)
			wantErrLine(t, stderr, c.addr+" takes connections but does not answer as ZooKeeper", c.says, "--zk")
			if took > 15*time.Second { // not INGESTQ_CONNECT_TIMEOUT's 30 s: a loaded machine's slack aside
				t.Errorf("took %v to say so", took)
			}
		})
	}
	e := newEnv(t)
	bid := e.batch("uuid-notzk", "demo")
	out, _, code := run(t, e.root, "--zk", listen(t, func(c net.Conn) { c.Close() })+","+zktest.Shared(t).Addr, "show", bid)
	wantCode(t, code, 0)
	if len(out) == 0 {
		t.Error("show through a list holding one ZooKeeper printed nothing")
	}
}

// listen serves each connection on a loopback port with serve, keeping it
// open until the test ends; it returns the address.
func listen(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	conns := make(chan net.Conn, 64)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(done)
				return
			}
			serve(c)
			conns <- c
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		close(conns)
		for c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}
