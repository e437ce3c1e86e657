// Package zkconn bounds a ZooKeeper session handshake, for every client
// ingestq and its test harness open (decision 173).
//
// go-zookeeper lets the connect request and its answer take ten receive
// timeouts (200 s for a 30 s session). A restarting ZooKeeper was seen to
// take a connection made while it started and never answer it: the client
// sat on it with no session long after the server answered new
// connections.
//
// It also tells a server that is no ZooKeeper (Probe), and refuses a first
// packet no ZooKeeper would send.
package zkconn

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// MaxPacket is ZooKeeper's default limit on one packet (jute.maxbuffer,
// 1 MB): a server closes the connection of a client that sends a longer
// one, and a Java client (Merritt's) cannot read one.
const MaxPacket = 1<<20 - 1

// Limit is the bound for a session of the given timeout: the receive
// timeout go-zookeeper gives every other packet (two thirds of the session
// timeout). A tighter one would give up on a server slow under load (a new
// session is a write ZooKeeper syncs to disk) that answers in the end.
func Limit(sessionTimeout time.Duration) time.Duration { return sessionTimeout * 2 / 3 }

// Bound wraps a dialed connection so that, until its first bytes arrive, no
// deadline is set further than limit from now; after them every deadline
// passes through unchanged. The client then gives a silent server up and
// tries again (or tries the next server) while its session can still be
// kept. A limit of 0 or less leaves conn as it is.
func Bound(conn net.Conn, limit time.Duration) net.Conn {
	if limit <= 0 {
		return conn
	}
	return &handshakeConn{Conn: conn, limit: limit}
}

// Dialer is a zk.Dialer (zk.WithDialer) whose connections are Bound.
func Dialer(limit time.Duration) func(network, address string, timeout time.Duration) (net.Conn, error) {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		conn, err := net.DialTimeout(network, address, timeout)
		if err != nil {
			return nil, err
		}
		return Bound(conn, limit), nil
	}
}

type handshakeConn struct {
	net.Conn
	limit time.Duration
	done  atomic.Bool // the first bytes were read

	mu     sync.Mutex
	header []byte // the first packet's length, as read so far
}

// maxConnectResponse bounds the length of the first packet, the connect
// response (about 40 bytes). go-zookeeper allocates whatever length a
// server announces and then reads it with no deadline: an SSH or HTTP
// server's first bytes ("SSH-", "HTTP") announce over a gigabyte, and the
// client would wait on that server for good.
const maxConnectResponse = 4096

func (c *handshakeConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.done.Store(true)
		c.mu.Lock()
		defer c.mu.Unlock()
		if len(c.header) < 4 {
			c.header = append(c.header, p[:min(n, 4-len(c.header))]...)
			if len(c.header) == 4 && binary.BigEndian.Uint32(c.header) > maxConnectResponse {
				return 0, fmt.Errorf("%s: %w: its first packet announces %d bytes (%q)",
					c.RemoteAddr(), ErrNotZooKeeper, binary.BigEndian.Uint32(c.header), c.header)
			}
		}
	}
	return n, err
}

func (c *handshakeConn) bound(t time.Time) time.Time {
	if c.done.Load() || t.IsZero() { // zero clears a deadline
		return t
	}
	if max := time.Now().Add(c.limit); t.After(max) {
		return max
	}
	return t
}

func (c *handshakeConn) SetReadDeadline(t time.Time) error { return c.Conn.SetReadDeadline(c.bound(t)) }
func (c *handshakeConn) SetWriteDeadline(t time.Time) error {
	return c.Conn.SetWriteDeadline(c.bound(t))
}

// ErrNotZooKeeper is the error of a server that takes connections but does
// not answer as ZooKeeper: an HTTP server, a port that says nothing.
var ErrNotZooKeeper = errors.New("does not answer as ZooKeeper")

// ErrSilent is an ErrNotZooKeeper that said nothing at all: silence, or a
// connection closed at once. A proxy or port-forward in front of a
// ZooKeeper not started yet does that too, so a daemon waiting for its
// ZooKeeper takes it for "not yet".
var ErrSilent = errors.New("no answer")

// srvrAnswers are how every ZooKeeper's answer to the four-letter word srvr
// starts: its statistics, the word not being allowed (4lw.commands.whitelist),
// or the server not serving yet (starting, or without a quorum).
var srvrAnswers = []string{srvrStats, srvrNotAllowed, srvrNotServing}

const (
	srvrStats      = "Zookeeper version:"
	srvrNotAllowed = "srvr is not executed because it is not in the whitelist"
	srvrNotServing = "This ZooKeeper instance is not currently serving requests"
)

// ErrSrvrNotAllowed is Serving's error for a ZooKeeper that does not allow
// srvr (4lw.commands.whitelist): whether it serves is not known.
var ErrSrvrNotAllowed = errors.New("srvr is not allowed there (4lw.commands.whitelist)")

// Serving asks the ZooKeeper at addr (srvr) whether it serves clients: a
// server without a quorum, or starting, does not. zxid is its last
// transaction's ("0x61"), when it serves. Any answer but a ZooKeeper's, and
// none within wait, is an error.
func Serving(ctx context.Context, addr string, wait time.Duration) (serving bool, zxid string, err error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	conn, done, err := askSrvr(ctx, addr)
	if err != nil {
		return false, "", err
	}
	defer done()
	b, err := io.ReadAll(conn) // a ZooKeeper closes the connection after its answer
	answer := string(b)
	switch {
	case strings.HasPrefix(answer, srvrNotServing):
		return false, "", nil
	case strings.HasPrefix(answer, srvrNotAllowed):
		return false, "", ErrSrvrNotAllowed
	case !strings.HasPrefix(answer, srvrStats) || err != nil:
		return false, "", fmt.Errorf("%s: no answer to srvr as a ZooKeeper's: %q (%v)", addr, firstLine(b), err)
	}
	for _, line := range strings.Split(answer, "\n") {
		if z, ok := strings.CutPrefix(line, "Zxid: "); ok {
			zxid = strings.TrimSpace(z)
		}
	}
	return true, zxid, nil
}

// askSrvr connects to addr and sends srvr. Reads from conn end when ctx
// does; done closes it. A write error wraps ErrNotZooKeeper; the dial's
// error is returned as it is.
func askSrvr(ctx context.Context, addr string) (conn net.Conn, done func(), err error) {
	conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	done = func() { stop(); conn.Close() }
	if _, err := conn.Write([]byte("srvr")); err != nil {
		done()
		return nil, nil, fmt.Errorf("%w: the connection failed when asked srvr: %v", ErrNotZooKeeper, err)
	}
	return conn, done, nil
}

// Probe asks the server at addr for srvr, which a ZooKeeper answers at once
// (without the session's disk write). It returns nil for a ZooKeeper's
// answer; an error wrapping ErrNotZooKeeper for any other answer, for a
// connection closed without one and for silence over wait; and the dial's
// error (a refusal) as it is.
func Probe(ctx context.Context, addr string, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	conn, done, err := askSrvr(ctx, addr)
	if err != nil {
		return err
	}
	defer done()
	var got []byte
	buf := make([]byte, 64)
	for {
		n, err := conn.Read(buf)
		got = append(got, buf[:n]...)
		switch srvrAnswer(got) {
		case yes:
			return nil
		case no:
			return fmt.Errorf("%w: it answers %q", ErrNotZooKeeper, firstLine(got))
		}
		switch {
		case err == nil:
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			return fmt.Errorf("%w: %w within %v", ErrNotZooKeeper, ErrSilent, wait)
		case ctx.Err() != nil:
			return ctx.Err()
		case len(got) > 0:
			return fmt.Errorf("%w: it answers %q", ErrNotZooKeeper, firstLine(got))
		default:
			return fmt.Errorf("%w: it closes connections without answering (%w), as a ZooKeeper does only to a host past its maxClientCnxns", ErrNotZooKeeper, ErrSilent)
		}
	}
}

type verdict int

const (
	maybe verdict = iota
	yes
	no
)

// srvrAnswer judges the bytes of an answer to srvr read so far: a
// ZooKeeper's, another's, or too short to tell.
func srvrAnswer(got []byte) verdict {
	for _, a := range srvrAnswers {
		switch {
		case len(got) >= len(a) && string(got[:len(a)]) == a:
			return yes
		case len(got) < len(a) && a[:len(got)] == string(got):
			return maybe
		}
	}
	return no
}

// firstLine is the start of an answer, to name it in an error.
func firstLine(b []byte) string {
	for i, c := range b {
		if c == '\n' || c == '\r' || i == 60 {
			return string(b[:i])
		}
	}
	return string(b)
}
