package zktest

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// echoServer echoes every connection until the listener closes.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	return ln.Addr().String()
}

func TestProxyPauseResumeCut(t *testing.T) {
	p, err := StartProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip := func(msg string) {
		t.Helper()
		if _, err := io.WriteString(c, msg); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(c, got); err != nil || string(got) != msg {
			t.Fatalf("echo of %q: %q, %v", msg, got, err)
		}
	}
	roundTrip("hello")

	// Paused: nothing comes back (checked for a bounded time), nothing is
	// lost: it all arrives, in order, after Resume.
	p.Pause()
	if _, err := io.WriteString(c, "held-1 "); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read through a paused proxy: %d bytes, %v", n, err)
	}
	// A new connection is accepted but gets nothing through either.
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := io.WriteString(c2, "second"); err != nil {
		t.Fatal(err)
	}
	_ = c2.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, err := c2.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read through a paused proxy (new connection): %d bytes, %v", n, err)
	}
	if _, err := io.WriteString(c, "held-2"); err != nil {
		t.Fatal(err)
	}
	p.Resume()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	want := "held-1 held-2"
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, []byte(want)) {
		t.Fatalf("after Resume: %q, %v", got, err)
	}
	_ = c2.SetReadDeadline(time.Now().Add(10 * time.Second))
	got = make([]byte, len("second"))
	if _, err := io.ReadFull(c2, got); err != nil || string(got) != "second" {
		t.Fatalf("after Resume (new connection): %q, %v", got, err)
	}

	// Cut: the client sees the connection end; new ones work.
	p.Cut()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatalf("read after Cut: %d bytes, no error", n)
	}
	c.Close()
	if c, err = net.Dial("tcp", p.Addr()); err != nil {
		t.Fatal(err)
	}
	roundTrip("again")

	// Close ends everything, paused connections included.
	p.Pause()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := net.Dial("tcp", p.Addr()); err == nil {
		t.Fatal("dial after Close succeeded")
	}
}
