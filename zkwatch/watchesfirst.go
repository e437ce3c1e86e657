package zkwatch

import (
	"encoding/binary"
	"net"
	"sync"
	"time"
)

// go-zookeeper 1.0.4 reads Conn.lastZxid, for the set-watches request it
// builds after a reconnect, while its receive loop already writes it for
// the replies of requests queued during the outage: a data race (open
// upstream as go-zookeeper/zk#35 and samuel/go-zookeeper#260), which the
// race detector reports in any test that reconnects with watches set. A
// connection of a session therefore hands the receive loop no reply until
// the set-watches request has been written, which go-zookeeper does only
// after its read of lastZxid, or until holdReplies has passed (a session
// with no watch sends none). The write, the channel and the read order the
// two accesses; the replies wait in the socket meanwhile.

// opSetWatches is ZooKeeper's opcode of the set-watches request.
const opSetWatches = 101

// holdReplies is how long replies wait for a set-watches request that may
// never come (a session with no watch): once per connection.
const holdReplies = 100 * time.Millisecond

// watchesFirst is a connection whose replies after the session handshake
// wait until the set-watches request is written.
type watchesFirst struct {
	net.Conn

	// The handshake's answer, read by go-zookeeper before its loops start:
	// 4 bytes of length, then that many bytes. Only the reading goroutine
	// uses these.
	header []byte
	left   int  // bytes of the answer still to come, once header is whole
	shaken bool // the answer is read: later reads are the receive loop's

	once     sync.Once
	released chan struct{}
}

func newWatchesFirst(conn net.Conn) *watchesFirst {
	return &watchesFirst{Conn: conn, released: make(chan struct{})}
}

func (c *watchesFirst) release() { c.once.Do(func() { close(c.released) }) }

func (c *watchesFirst) Read(p []byte) (int, error) {
	if c.shaken {
		<-c.released
		return c.Conn.Read(p)
	}
	n, err := c.Conn.Read(p)
	c.count(p[:n])
	return n, err
}

// count follows the handshake's answer through b, the bytes just read.
func (c *watchesFirst) count(b []byte) {
	if need := 4 - len(c.header); need > 0 {
		take := min(need, len(b))
		c.header = append(c.header, b[:take]...)
		b = b[take:]
		if len(c.header) < 4 {
			return
		}
		c.left = int(binary.BigEndian.Uint32(c.header))
	}
	c.left -= len(b)
	if c.left <= 0 {
		c.shaken = true
		time.AfterFunc(holdReplies, c.release)
	}
}

func (c *watchesFirst) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	// A request's packet: length, xid, opcode, written in one piece (the
	// handshake's request, written before, is no request).
	if c.shaken && len(p) >= 12 && binary.BigEndian.Uint32(p[8:12]) == opSetWatches {
		c.release()
	}
	return n, err
}

func (c *watchesFirst) Close() error {
	c.release() // a receive loop waiting here reads the closed connection's error
	return c.Conn.Close()
}
