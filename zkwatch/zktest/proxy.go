package zktest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Proxy forwards TCP from a loopback port to a target (a ZooKeeper server),
// for partition tests: Pause turns it into a black hole, Cut drops every
// connection.
//
// A client connected through a paused proxy for longer than its session
// timeout has its session expired by the server; after Resume the client
// reaches the server again, learns that the session expired, and
// go-zookeeper opens a new one. Note the client cannot learn of the expiry
// while the proxy is paused: watch the session's ephemeral nodes from a
// connection straight to the server to know when the server expired it.
type Proxy struct {
	target string
	ln     net.Listener
	done   chan struct{} // closed by Close
	wg     sync.WaitGroup

	mu     sync.Mutex
	resume chan struct{} // nil when forwarding; closed by Resume
	conns  map[*proxyConn]struct{}
	closed bool
	// accepted counts the connections accepted so far; arrived is closed
	// and replaced on each.
	accepted int
	arrived  chan struct{}
}

type proxyConn struct {
	client net.Conn
	gone   chan struct{} // closed by close

	mu     sync.Mutex
	server net.Conn // nil until dialed
	closed bool
}

func (c *proxyConn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	close(c.gone)
	_ = c.client.Close()
	if c.server != nil {
		_ = c.server.Close()
	}
}

// setServer records the dialed server side; false (and server closed) when
// the pair was closed meanwhile.
func (c *proxyConn) setServer(server net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		_ = server.Close()
		return false
	}
	c.server = server
	return true
}

// StartProxy listens on a free loopback port and forwards every connection
// to target.
func StartProxy(target string) (*Proxy, error) {
	return StartProxyOn("127.0.0.1:0", target)
}

// StartProxyOn listens on addr and forwards every connection to target: a
// ZooKeeper that appears where a client was told to look.
func StartProxyOn(addr, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("zktest: proxy listen: %w", err)
	}
	p := &Proxy{target: target, ln: ln, done: make(chan struct{}), conns: map[*proxyConn]struct{}{}, arrived: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's "127.0.0.1:port", to give to clients.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Pause stops forwarding on every connection, current and new: bytes are
// neither read nor dropped, connections stay open (a black hole). New
// connections are accepted but nothing is forwarded on them. Bytes already
// read are held and delivered, in order, after Resume.
func (p *Proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.resume == nil {
		p.resume = make(chan struct{})
	}
}

// Resume forwards again.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.resume != nil {
		close(p.resume)
		p.resume = nil
	}
}

// WaitAccepted waits until the proxy has accepted n connections in all
// since it started, or ctx ends.
func (p *Proxy) WaitAccepted(ctx context.Context, n int) error {
	for {
		p.mu.Lock()
		got, arrived := p.accepted, p.arrived
		p.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-arrived:
		case <-ctx.Done():
			return fmt.Errorf("zktest: proxy accepted %d connections, want %d: %w", got, n, ctx.Err())
		}
	}
}

// Cut closes every current connection: the client sees a disconnect and
// reconnects (through the proxy, if it is its only server). It does not
// change Pause/Resume.
func (p *Proxy) Cut() {
	p.mu.Lock()
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

// Close stops listening, closes every connection and waits for the
// forwarding goroutines to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	p.mu.Unlock()
	err := p.ln.Close()
	p.Cut()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			select {
			case <-p.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return // listener broken
		}
		c := &proxyConn{client: client, gone: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = client.Close()
			return
		}
		p.conns[c] = struct{}{}
		p.accepted++
		close(p.arrived)
		p.arrived = make(chan struct{})
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serve(c)
	}
}

// serve dials the target and pumps both ways until either side ends.
func (p *Proxy) serve(c *proxyConn) {
	defer p.wg.Done()
	defer func() {
		c.close()
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return // the client sees the connection close, as if the server were down
	}
	if !c.setServer(server) { // cut or closed while dialing
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { p.pump(c, server, c.client) })
	wg.Go(func() { p.pump(c, c.client, server) })
	wg.Wait()
}

// pump copies src to dst, waiting while the proxy is paused both before
// reading and before writing, and closes the connection pair when src ends.
func (p *Proxy) pump(c *proxyConn, dst, src net.Conn) {
	defer c.close()
	buf := make([]byte, 32*1024)
	for {
		if !p.gate(c) {
			return
		}
		n, err := src.Read(buf)
		if n > 0 {
			if !p.gate(c) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// gate waits while the proxy is paused; false when c was cut or the proxy
// closed meanwhile.
func (p *Proxy) gate(c *proxyConn) bool {
	for {
		p.mu.Lock()
		resume := p.resume
		p.mu.Unlock()
		if resume == nil {
			select {
			case <-c.gone:
				return false
			default:
				return true
			}
		}
		select {
		case <-resume:
		case <-c.gone:
			return false
		case <-p.done:
			return false
		}
	}
}
