// Package stall is ingestq's one rule for an HTTP request to a server that
// hangs (the fetch client's requests: downloads, storage and inventory
// services, callbacks; and the S3 places'): a request that moves no byte for
// its idle limit fails, a transfer that moves bytes is never cut.
package stall

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// ErrStalled is wrapped by the error of a request that moved no byte for
// its idle limit (errors.Is).
var ErrStalled = errors.New("stalled")

// stallError is a request that moved no byte for idle. It is a timeout
// (net.Error), as a connection's deadline is: a back end that hangs is a
// back end out.
type stallError struct{ idle time.Duration }

func (e *stallError) Error() string        { return fmt.Sprintf("stalled: no byte moved for %v", e.idle) }
func (e *stallError) Timeout() bool        { return true }
func (e *stallError) Temporary() bool      { return true }
func (e *stallError) Is(target error) bool { return target == ErrStalled }

// Transport returns base failing a request that moves no byte for idle:
// from its start while its body is sent (each chunk base takes from it
// moves the deadline on; a server that stops reading stops base taking
// them) until the answer's headers come, then while a read of the answer's
// body waits. A reader slow between its reads is never cut: the clock runs
// only while a read waits. Kept per request, not per connection (a
// deadline moved at each read and write of the connection), because on
// HTTP/2 many requests share a connection: one stalled stream is not seen
// while others move, and the connection's own reader would cut a request
// whose reader pauses.
func Transport(base http.RoundTripper, idle time.Duration) http.RoundTripper {
	return &transport{base: base, idle: idle}
}

type transport struct {
	base http.RoundTripper
	idle time.Duration
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	w := &watch{idle: t.idle, sending: true, timer: time.AfterFunc(t.idle, func() { cancel(ErrStalled) })}
	sent := req.WithContext(ctx)
	if req.Body != nil && req.Body != http.NoBody {
		sent.Body = &sentBody{ReadCloser: req.Body, w: w}
	}
	resp, err := t.base.RoundTrip(sent)
	w.answered()
	if err != nil {
		cancel(nil)
		return nil, w.why(ctx, err)
	}
	resp.Body = &answerBody{rc: resp.Body, ctx: ctx, w: w, cancel: cancel}
	return resp, nil
}

// watch is one request's clock.
type watch struct {
	idle  time.Duration
	timer *time.Timer

	mu      sync.Mutex
	sending bool // until the answer's headers
}

// moved is a chunk of the request's body taken by the transport.
func (w *watch) moved() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sending {
		w.timer.Reset(w.idle)
	}
}

// answered stops the clock: the answer's headers (or an error) came.
func (w *watch) answered() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sending = false
	w.timer.Stop()
}

// why is err, or the stall when the clock cancelled the request.
func (w *watch) why(ctx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), ErrStalled) {
		return &stallError{w.idle}
	}
	return err
}

// sentBody is a request's body, telling the watch of each chunk taken.
type sentBody struct {
	io.ReadCloser
	w *watch
}

func (b *sentBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.w.moved()
	return n, err
}

// answerBody is an answer's body: the clock runs while a read waits.
type answerBody struct {
	rc     io.ReadCloser
	ctx    context.Context
	w      *watch
	cancel context.CancelCauseFunc
}

func (b *answerBody) Read(p []byte) (int, error) {
	b.w.timer.Reset(b.w.idle)
	n, err := b.rc.Read(p)
	b.w.timer.Stop()
	if err == io.EOF {
		b.cancel(nil)
	}
	return n, b.w.why(b.ctx, err)
}

func (b *answerBody) Close() error {
	b.w.timer.Stop()
	err := b.rc.Close()
	b.cancel(nil)
	return err
}
