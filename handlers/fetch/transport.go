package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// errStalled is the cancel cause of a request whose body went quiet.
var errStalled = errors.New("response body stalled")

// limiter is the transport under the retrying client. It holds one of
// perHost slots per host from the request until its body is read to the end
// or closed, and cancels a request whose body sends nothing for idle.
type limiter struct {
	base    http.RoundTripper
	idle    time.Duration
	perHost int

	mu   sync.Mutex
	sems map[string]chan struct{}

	onQueue func() // tests: called when a request has to wait for a slot
}

func newTransport(cfg Config) *http.Transport {
	dialer := &net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}
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
		ResponseHeaderTimeout: cfg.Timeout,
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

	ctx, cancel := context.WithCancelCause(req.Context())
	resp, err := l.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel(nil)
		release()
		return nil, err
	}
	b := &idleBody{rc: resp.Body, ctx: ctx, idle: l.idle, done: func() { cancel(nil); release() }}
	b.timer = time.AfterFunc(l.idle, func() { cancel(errStalled) })
	b.timer.Stop()
	resp.Body = b
	return resp, nil
}

// idleBody fails a read that waits longer than idle for data, and gives the
// host's slot back at the end of the body.
type idleBody struct {
	rc     io.ReadCloser
	ctx    context.Context
	idle   time.Duration
	timer  *time.Timer
	done   func()
	closed atomic.Bool
}

func (b *idleBody) Read(p []byte) (int, error) {
	if b.closed.Load() {
		// retryablehttp drains a body we already closed; an EOF keeps it
		// from logging a spurious error.
		return 0, io.EOF
	}
	b.timer.Reset(b.idle)
	n, err := b.rc.Read(p)
	b.timer.Stop()
	switch {
	case err == io.EOF:
		b.done()
	case err != nil && errors.Is(context.Cause(b.ctx), errStalled):
		err = fmt.Errorf("%w: no data for %v", errStalled, b.idle)
	}
	return n, err
}

func (b *idleBody) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	b.timer.Stop()
	err := b.rc.Close()
	b.done()
	return err
}
