package place

import (
	"context"
	"net"
	"time"
)

// defaultIdleTimeout is how long an S3 request may move no byte, either
// way, before it fails as the store being out of reach (a frozen or hung
// server keeps its connections open and never answers). A transfer that
// moves bytes is never cut, however long it takes; a store's slowest
// answer (completing a multipart upload of gigabytes) comes well within it.
const defaultIdleTimeout = 30 * time.Second

// s3Tries is how many times the client sends one request: a store that
// does not answer is found out after at most s3Tries idle timeouts, where
// minio-go's ten tries of a minute each kept a step ten minutes.
const s3Tries = 2

// idleDial wraps dial's connections so that each read or write must start
// moving bytes within idle of the last one's start.
func idleDial(dial func(ctx context.Context, network, addr string) (net.Conn, error), idle time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return idleConn{c, idle}, nil
	}
}

// idleConn moves its deadline (both ways) at each read or write: a read
// waiting for the answer while the request's body is sent is kept alive by
// the writes, and fails (a timeout) idle after the last of them.
type idleConn struct {
	net.Conn
	idle time.Duration
}

func (c idleConn) Read(p []byte) (int, error) {
	_ = c.SetDeadline(time.Now().Add(c.idle))
	return c.Conn.Read(p)
}

func (c idleConn) Write(p []byte) (int, error) {
	_ = c.SetDeadline(time.Now().Add(c.idle))
	return c.Conn.Write(p)
}
