package zkwatch

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ingestq/ingestq/internal/zkconn"
)

// behind gives up a session that serving ZooKeeper servers keep refusing.
// A server behind this client (restored from an older snapshot, or wiped)
// closes the connection on its session request ("has seen zxid … client
// must try another server"), and go-zookeeper would offer the same session
// and last zxid for good. Once serving servers have refused it for longer
// than the session timeout and a margin, the quorum has expired the session
// anyway: the client is told so (a connect answer with no session, as a
// server sends for an expired one), so that it takes its one expiry path
// and opens a new session with no zxid. A server that does not serve (no
// quorum, starting) keeps the session alive, and resets the count.
type behind struct {
	log *slog.Logger

	mu    sync.Mutex
	since time.Time // first refusal by a serving server, since the last answer; zero if none
}

// wrap watches the session handshake on conn, made to addr.
func (b *behind) wrap(conn net.Conn, addr string) net.Conn {
	return &handshake{Conn: conn, addr: addr, b: b}
}

// answered: a server answered a session request, whatever it said.
func (b *behind) answered() {
	b.mu.Lock()
	b.since = time.Time{}
	b.mu.Unlock()
}

// refused tells whether a session request that addr closed unanswered
// ends the session: serving servers have refused it for longer than
// timeout and half of it (a server expires sessions once a tick, and a
// session timeout is at least two ticks). seen is the last zxid the
// client has seen.
func (b *behind) refused(addr string, seen int64, timeout time.Duration) bool {
	serving, zxid, err := zkconn.Serving(context.Background(), addr, zkconn.Limit(timeout))
	if err == nil && !serving {
		b.answered() // no quorum: the session lives on, and will be taken back
		return false
	}
	if err != nil && !errors.Is(err, zkconn.ErrSrvrNotAllowed) {
		return false // gone meanwhile, or not a ZooKeeper: tells nothing
	}
	if n, err := strconv.ParseInt(strings.TrimPrefix(zxid, "0x"), 16, 64); err == nil && n >= seen {
		return false // not behind: closed for another reason, which this cannot help
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	if b.since.IsZero() {
		b.since = now
	}
	lasted := now.Sub(b.since)
	if lasted <= timeout+timeout/2 {
		return false
	}
	b.since = time.Time{}
	if zxid == "" {
		zxid = "not known (srvr is not allowed there)"
	}
	b.log.Error("zookeeper: the servers refused this client's session for "+lasted.Round(time.Second).String()+
		": they are behind it (ZooKeeper restored from an older snapshot, or wiped?). The session is taken as expired:"+
		" work in hand is given up, its locks go, and a new session is opened. Run `ingestq check`",
		"server", addr, "client_zxid", "0x"+strconv.FormatInt(seen, 16), "server_zxid", zxid)
	return true
}

// handshake is a connection whose session handshake behind watches.
// go-zookeeper writes the session request and reads its answer in one
// goroutine, before any other use of the connection.
type handshake struct {
	net.Conn
	addr string
	b    *behind

	session, seen int64         // the session request's session and last zxid
	timeout       time.Duration // the session request's timeout (the negotiated one, once there was a session)
	done          bool          // the answer came (or the request had no session to refuse)
	expired       io.Reader     // the answer told to the client instead of the server's closing
}

// connectRequest's fields after the packet's length: protocol version,
// last zxid seen, timeout (ms), session id.
const connectRequestLen = 4 + 4 + 8 + 4 + 8

func (c *handshake) Write(p []byte) (int, error) {
	if c.timeout == 0 && !c.done && len(p) >= connectRequestLen {
		c.seen = int64(binary.BigEndian.Uint64(p[8:16]))
		c.timeout = time.Duration(binary.BigEndian.Uint32(p[16:20])) * time.Millisecond
		c.session = int64(binary.BigEndian.Uint64(p[20:28]))
		c.done = c.session == 0 // a new session: nothing to give up
	}
	return c.Conn.Write(p)
}

func (c *handshake) Read(p []byte) (int, error) {
	if c.expired != nil {
		return c.expired.Read(p)
	}
	n, err := c.Conn.Read(p)
	switch {
	case c.done || c.timeout == 0:
	case n > 0:
		c.done = true
		c.b.answered()
	case (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) && c.b.refused(c.addr, c.seen, c.timeout):
		c.Conn.Close()
		c.expired = bytes.NewReader(expiredAnswer)
		return c.expired.Read(p)
	}
	return n, err
}

// expiredAnswer is a connect answer with no session, as a server sends for
// an expired one: length, protocol version, timeout, session id 0, and an
// empty password.
var expiredAnswer = []byte{0, 0, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
