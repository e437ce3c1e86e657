// Package zkconn bounds a ZooKeeper session handshake, for every client
// ingestq and its test harness open (decision 173).
//
// go-zookeeper lets the connect request and its answer take ten receive
// timeouts (200 s for a 30 s session). A restarting ZooKeeper was seen to
// take a connection made while it started and never answer it: the client
// sat on it with no session long after the server answered new
// connections.
package zkconn

import (
	"net"
	"sync/atomic"
	"time"
)

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
}

func (c *handshakeConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.done.Store(true)
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
