package s3test

import (
	"bytes"
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP from a loopback port to a server and tampers with the
// bytes on demand: it can flip one byte of what a client sends, and rewrite
// what the server answers. It is for tests of verification: the client
// talks to Addr as if it were the server.
type Proxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	closed  bool
	armed   bool              // flip the next NUL byte sent to the server
	flipped int               // bytes flipped so far
	rewrite map[string]string // server→client replacements, same lengths
}

// StartProxy listens on a free loopback port and forwards each connection
// to target; t.Cleanup closes it.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("s3test: proxy listen: %v", err)
	}
	p := &Proxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}, rewrite: map[string]string{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's "127.0.0.1:port", to give to clients.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// FlipNextZero arms the proxy to turn the next NUL byte a client sends into
// 0x01. An HTTP request's head never holds a NUL, so the byte flipped is in
// a request body: an upload corrupted in flight.
func (p *Proxy) FlipNextZero() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = true
}

// Flipped is how many bytes the proxy has flipped.
func (p *Proxy) Flipped() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.flipped
}

// Rewrite replaces every old with repl (of the same length, so lengths in
// the answer stay right) in what the server sends back. A match split
// between two reads is missed; S3 answers are small enough not to be split
// in practice.
func (p *Proxy) Rewrite(old, repl string) {
	if len(old) != len(repl) {
		panic("s3test: Rewrite needs strings of one length")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rewrite[old] = repl
}

// Close stops listening, closes every connection and waits for the
// forwarding goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close() // the client sees the server down
			continue
		}
		if !p.track(client, server) {
			return
		}
		p.wg.Go(func() { p.pump(server, client, p.tamperRequest) })
		p.wg.Go(func() { p.pump(client, server, p.tamperAnswer) })
	}
}

// track records a connection pair; false (both closed) once the proxy is
// closed.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		if p.closed {
			_ = c.Close()
			continue
		}
		p.conns[c] = struct{}{}
	}
	return !p.closed
}

// pump copies src to dst through tamper and closes both when either ends.
func (p *Proxy) pump(dst, src net.Conn, tamper func([]byte)) {
	defer func() {
		_ = dst.Close()
		_ = src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			tamper(buf[:n])
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) tamperRequest(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.armed {
		return
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b[i] = 1
		p.armed = false
		p.flipped++
	}
}

func (p *Proxy) tamperAnswer(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for old, repl := range p.rewrite {
		copy(b, bytes.ReplaceAll(b, []byte(old), []byte(repl)))
	}
}
