package cli_test

import (
	"context"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingestq/ingestq/cmd/ingestq/cli"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// serve started before its ZooKeeper (a host booting, a README pasted in
// one go) waits for it, within the connect timeout, and then serves; a
// command run meanwhile says at once that nothing listens.
func TestServeWaitsForZooKeeperToStart(t *testing.T) {
	t.Parallel()
	srv := zktest.OwnServer(t)
	if err := srv.Stop(); err != nil { // its address is known, and nothing listens there now
		t.Fatal(err)
	}
	log, _ := serveWaiting(t, srv.Addr, "/ingestq")
	log.WaitFor(t, "ZooKeeper refuses connections; waiting for it")
	_, stderr, code := runEnv(t, nil, "--zk", srv.Addr, "ls", "batches")
	wantCode(t, code, 1)
	wantErrLine(t, stderr, "connection refused, nothing listens there")
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	log.WaitFor(t, "reactor: running")
}

// serve behind something that takes connections and closes them at once
// while its ZooKeeper is not there yet (a port-forward, a TCP load
// balancer, Docker's proxy) waits too, where it took the silence for a
// server that is no ZooKeeper and exited; once ZooKeeper is behind it, it
// serves.
func TestServeWaitsBehindAProxyWhoseZooKeeperIsNotUpYet(t *testing.T) {
	t.Parallel()
	var ready atomic.Bool
	accepted := make(chan struct{}, 64)
	addr := listen(t, func(c net.Conn) {
		if !ready.Load() {
			c.Close()
			select {
			case accepted <- struct{}{}:
			default:
			}
			return
		}
		go pipeTo(c, zktest.Shared(t).Addr)
	})
	log, exited := serveWaiting(t, addr, "/t-proxy-"+strings.ToLower(t.Name()[:8]))
	// The session's tries and the probe (after half a second) have each
	// been closed on: more than two connections.
	for range 3 {
		select {
		case <-accepted:
		case code := <-exited:
			exited <- code
			t.Fatalf("serve exited %d behind a proxy that closes connections; its log:\n%s", code, log.String())
		case <-time.After(time.Minute):
			t.Fatal("serve made no connection within a minute")
		}
	}
	ready.Store(true)
	log.WaitFor(t, "reactor: running")
}

// serveWaiting runs a pass-through `ingestq serve` in-process on the
// ZooKeeper at zk, under root, with a connect timeout of 2 minutes, until
// the test ends; it returns its log, and its exit code once it exits (the
// cleanup then reads it, and fails the test unless it is 0). args are
// serve's further flags (a flag given again wins).
func serveWaiting(t *testing.T, zk, root string, args ...string) (*logtest.Buffer, chan int) {
	log := &logtest.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan int, 1)
	go func() {
		exited <- cli.Run(ctx, append([]string{"--zk", zk, "--zk-root", root, "--connect-timeout", "2m", "serve",
			"--data-dir", t.TempDir(), "--pipeline", "passthrough", "--nats-listen", "off", "--http", "off"}, args...),
			log, log, func(string) string { return "" })
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-exited; code != 0 {
			t.Errorf("serve exited %d; its log:\n%s", code, log.String())
		}
	})
	return log, exited
}

// pipeTo joins c to a new connection to addr until either side closes.
func pipeTo(c net.Conn, addr string) {
	defer c.Close()
	up, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}
