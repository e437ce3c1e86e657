package events

// Events sent again after a publish that got no acknowledgement: while a
// clustered stream elects a leader (its leader's host died: seconds), every
// publish times out, and counting those lost lost a live host's moves for
// good (a walk-through lost 40 to 210 of 1,200 when it killed the leading
// host). The same ID is sent again: JetStream keeps one copy per ID within
// its duplicate window (two minutes), so a resend of an event that did
// land is dropped, and acknowledged as a duplicate.

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ingestq/ingestq/internal/backoff"
)

const (
	resendFor   = time.Minute            // an event is sent again until this long after its first failure (well within the two-minute window)
	resendFirst = 250 * time.Millisecond // pause before the first resend
	resendMax   = 5 * time.Second
)

// resend is one event waiting to be sent again.
type resend struct {
	mu    sync.Mutex
	first time.Time // its first failure
	tries int
}

// retryable tells whether a publish that failed may land if sent again:
// no acknowledgement in time, no stream answering (an election), JetStream
// unavailable for a moment, the same ID being stored already (JetStream
// settles it, and a resend is then acknowledged as a duplicate), too many
// publishes waiting, or the connection down (the embedded server swapped).
func retryable(err error) bool {
	var api *jetstream.APIError
	switch {
	case errors.Is(err, jetstream.ErrAsyncPublishTimeout), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, jetstream.ErrTooManyStalledMsgs), errors.Is(err, nats.ErrNoResponders), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrDisconnected), errors.Is(err, nats.ErrConnectionReconnecting):
		return true
	case errors.As(err, &api):
		return api.Code == http.StatusServiceUnavailable || api.Code == http.StatusConflict
	}
	return false
}

// failed handles a publish that JetStream did not acknowledge: sent again
// after a pause while it may still land, else counted lost.
func (b *Bus) failed(m *nats.Msg, err error) {
	id := m.Header.Get(jetstream.MsgIDHeader)
	if retryable(err) && !b.closing.Load() && b.scheduleResend(m, id) {
		return
	}
	if !b.settled.Load() {
		b.lose(err)
	}
	b.resolved(id)
}

// resolved ends event id's way: acknowledged, or counted lost. It is sent
// no more (a resend's record goes), and its waiter, if any, is told.
func (b *Bus) resolved(id string) {
	b.failing.Delete(id)
	b.acked(id)
}

// scheduleResend sends m again after a pause, unless its first failure is
// resendFor old; it tells whether it will. While it pauses the event is in
// b.pausing, which Close empties, counting what it takes lost: the event
// is then either sent or counted, once.
func (b *Bus) scheduleResend(m *nats.Msg, id string) bool {
	v, _ := b.failing.LoadOrStore(id, &resend{first: time.Now()})
	r := v.(*resend)
	r.mu.Lock()
	if time.Since(r.first) > resendFor {
		r.mu.Unlock()
		return false
	}
	r.tries++
	pause := backoff.Delay(resendFirst, resendMax, r.tries)
	r.mu.Unlock()
	if n := b.retried.Add(1); b.resendWarn.Allow() {
		b.log.Warn("events: the stream did not acknowledge events in time; sending them again ("+b.unacked()+")",
			"retried_total", n)
	}
	subject, data := m.Subject, m.Data
	b.pausing.Store(id, struct{}{})
	time.AfterFunc(pause, func() {
		if _, ok := b.pausing.LoadAndDelete(id); ok {
			b.enqueue(outMsg{subject: subject, id: id, data: data, resent: true})
		}
	})
	return true
}

// unacked says why the stream acknowledges nothing: what the bus knows
// (NATS refuses its credentials), else the likeliest cause.
func (b *Bus) unacked() string {
	if b.badCreds.Load() {
		return "NATS refuses this daemon's credentials"
	}
	return "a NATS cluster electing a stream leader?"
}

// pausingLost takes the events waiting out a pause at Close: counted lost
// by the caller, their waiters told.
func (b *Bus) pausingLost() int {
	n := 0
	b.pausing.Range(func(id, _ any) bool {
		if _, ok := b.pausing.LoadAndDelete(id); ok {
			b.resolved(id.(string))
			n++
		}
		return true
	})
	return n
}

// count counts a sync.Map's entries.
func count(m *sync.Map) int {
	n := 0
	m.Range(func(_, _ any) bool { n++; return true })
	return n
}

// stuckAfter is how long an event may wait to be sent again before
// Recording says the stream takes none.
const stuckAfter = 30 * time.Second

// Recording is nil while the stream takes this bus's events, and an error
// once an event has waited stuckAfter to be sent again: the stream has no
// leader (an election that does not end, a cluster that lost its quorum),
// which a connection check does not see. For /readyz.
func (b *Bus) Recording() error {
	oldest, n := time.Time{}, 0
	b.failing.Range(func(_, v any) bool {
		r := v.(*resend)
		r.mu.Lock()
		if oldest.IsZero() || r.first.Before(oldest) {
			oldest = r.first
		}
		r.mu.Unlock()
		n++
		return true
	})
	if n == 0 || time.Since(oldest) < stuckAfter {
		return nil
	}
	return fmt.Errorf("the event stream has taken none of %d events for %v (a NATS cluster whose stream has no leader?); "+
		"each is sent again for %v, then counted lost", n, time.Since(oldest).Round(time.Second), resendFor)
}
