package zkconn_test

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/ingestq/ingestq/internal/zkconn"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// A real ZooKeeper answers the probe; a refusal is the dial's error, not a
// verdict; a server greeting with its own banner is not ZooKeeper.
func TestProbe(t *testing.T) {
	srv := zktest.OwnServer(t)
	if err := zkconn.Probe(t.Context(), srv.Addr, 5*time.Second); err != nil {
		t.Errorf("probe of a ZooKeeper: %v", err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := zkconn.Probe(t.Context(), srv.Addr, 5*time.Second); err == nil || errors.Is(err, zkconn.ErrNotZooKeeper) {
		t.Errorf("probe of a closed port: %v, want the refusal", err)
	}
	banner := bannerServer(t)
	if err := zkconn.Probe(t.Context(), banner, 5*time.Second); !errors.Is(err, zkconn.ErrNotZooKeeper) {
		t.Errorf("probe of an SSH server: %v, want ErrNotZooKeeper", err)
	}
}

// A first packet announcing more than a connect response can hold fails the
// read at once: go-zookeeper would allocate it and wait for it with no
// deadline.
func TestBoundRefusesAHugeFirstPacket(t *testing.T) {
	dial := zkconn.Dialer(time.Minute)
	conn, err := dial("tcp", bannerServer(t), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = io.ReadFull(conn, make([]byte, 4))
	if !errors.Is(err, zkconn.ErrNotZooKeeper) {
		t.Errorf("read of an SSH banner: %v, want ErrNotZooKeeper", err)
	}
}

// bannerServer greets each connection as an SSH server does, then waits.
func bannerServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			_, _ = c.Write([]byte("SSH-2.0-OpenSSH_9.2\r\n"))
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return l.Addr().String()
}
