package fetch

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// limiter is the transport under the retrying client. It holds one of
// perHost slots per host from the request until its body is read to the end
// or closed. Its base fails a request that moves no byte for the Timeout
// (stall.Transport).
type limiter struct {
	base    http.RoundTripper
	perHost int

	mu   sync.Mutex
	sems map[string]chan struct{}

	onQueue func() // tests: called when a request has to wait for a slot

	allow []netip.Prefix // a depositor's URLs: the ranges besides public ones they may name
	guard bool           // false: any address (Config.AnyAddress)
}

func newTransport(cfg Config) *http.Transport {
	dialer := &net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}
	if !cfg.AnyAddress {
		guardDialer(dialer, cfg.Allow)
	}
	return &http.Transport{
		Proxy:             http.ProxyFromEnvironment,
		DialContext:       dialer.DialContext,
		ForceAttemptHTTP2: true,
		// Many small files from few hosts: keep every connection a host may
		// use open between requests.
		MaxIdleConns:          max(100, 4*cfg.PerHost),
		MaxIdleConnsPerHost:   cfg.PerHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   cfg.Timeout,
		ExpectContinueTimeout: time.Second,
		// Digests are of the bytes as served; never let the transport
		// ask for gzip and inflate behind our back.
		DisableCompression: true,
	}
}

func (l *limiter) sem(host string) chan struct{} {
	host = strings.ToLower(host)
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.sems[host]
	if !ok {
		s = make(chan struct{}, l.perHost)
		l.sems[host] = s
	}
	return s
}

func (l *limiter) RoundTrip(req *http.Request) (*http.Response, error) {
	if l.guard {
		if err := checkLiteral(req, l.allow); err != nil {
			if req.Body != nil {
				req.Body.Close()
			}
			return nil, err
		}
	}
	sem := l.sem(req.URL.Host)
	select {
	case sem <- struct{}{}:
	default:
		if l.onQueue != nil {
			l.onQueue()
		}
		select {
		case sem <- struct{}{}:
		case <-req.Context().Done():
			if req.Body != nil {
				req.Body.Close()
			}
			return nil, fmt.Errorf("waiting for a slot on %s: %w", req.URL.Host, req.Context().Err())
		}
	}
	release := sync.OnceFunc(func() { <-sem })

	resp, err := l.base.RoundTrip(req)
	if err != nil {
		release()
		return nil, err
	}
	resp.Body = &slotBody{rc: resp.Body, release: release}
	return resp, nil
}

// slotBody gives the host's slot back at the end of the body.
type slotBody struct {
	rc      io.ReadCloser
	release func()
	closed  atomic.Bool
}

func (b *slotBody) Read(p []byte) (int, error) {
	if b.closed.Load() {
		// retryablehttp drains a body we already closed; an EOF keeps it
		// from logging a spurious error.
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.release()
	}
	return n, err
}

func (b *slotBody) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	err := b.rc.Close()
	b.release()
	return err
}
