package events

// Events sent again after a publish that got no acknowledgement: while a
// clustered stream elects a leader (its leader's host died: seconds), every
// publish times out, and counting those lost lost a live host's moves for
// good (a walk-through lost 40 to 210 of 1,200 when it killed the leading
// host). The same ID is sent again: JetStream keeps one copy per ID within
// its duplicate window (two minutes), so a resend of an event that did
// land is dropped, and acknowledged as a duplicate. A publish that reaches
// the stream while its leadership moves is dropped unanswered: when the
// stream announces its new leader, what is unanswered is sent again at
// once, not after its 15 s ack timeout.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ingestq/ingestq/internal/backoff"
)

const (
	defaultResendFor = time.Minute            // an event is sent again until this long after its first failure (well within the two-minute window), then parked (parked.go)
	resendFirst      = 250 * time.Millisecond // pause before the first resend
	resendMax        = 5 * time.Second
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
	case errors.Is(err, context.DeadlineExceeded):
		return false // the caller's own deadline ran out: not sent again (a replay counts it as unavailable)
	case unavailable(err), errors.Is(err, jetstream.ErrAsyncPublishTimeout), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, jetstream.ErrTooManyStalledMsgs):
		return true
	case errors.As(err, &api):
		return api.Code == http.StatusConflict
	}
	return false
}

// unavailable tells whether err is JetStream not answering for a while: no
// responders or no answer in time (an election), a 503 (JetStream
// temporarily unavailable), or the connection down.
func unavailable(err error) bool {
	var api *jetstream.APIError
	switch {
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, nats.ErrDisconnected), errors.Is(err, nats.ErrConnectionReconnecting):
		return true
	case errors.As(err, &api):
		return api.Code == http.StatusServiceUnavailable
	}
	return false
}

// failed handles a publish that JetStream did not acknowledge: sent again
// after a pause while it may still land, then parked until the stream
// takes events (within the cap), else counted lost. A copy's failure while
// another copy is on its way is left to that one's answer.
func (b *Bus) failed(m *nats.Msg, err error) {
	id := m.Header.Get(jetstream.MsgIDHeader)
	b.flying.failed(id, m, func() {
		if retryable(err) && !b.closing.Load() && (b.scheduleResend(m, id) || b.park(m, id)) {
			return
		}
		b.lose(err)
		b.resolved(id)
	})
}

// resolved ends event id's way: acknowledged, counted lost, or kept at
// Close. It is sent no more (a resend's record goes), and its waiter, if
// any, is told.
func (b *Bus) resolved(id string) {
	b.keptDone(id, false)
	b.failing.Delete(id)
	b.acked(id)
}

// scheduleResend sends m again after a pause, unless its first failure is
// resendFor old (the caller parks it); it tells whether it will. While it
// pauses the event is in b.pausing, which Close empties, keeping what it
// takes: the event is then either sent or kept, once.
func (b *Bus) scheduleResend(m *nats.Msg, id string) bool {
	v, _ := b.failing.LoadOrStore(id, &resend{first: time.Now()})
	r := v.(*resend)
	r.mu.Lock()
	if time.Since(r.first) > b.cfg.resendFor {
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
	again := outMsg{subject: m.Subject, id: id, data: m.Data, resent: true, kept: m.Header.Get(keptHeaderKey) != ""}
	b.pausing.Store(id, again)
	time.AfterFunc(pause, func() { b.resendDue(id) })
	return true
}

// resendDue queues event id again, its pause over, unless Close has begun:
// then it stays in b.pausing, which Close keeps. One read lock spans the
// check, the take and the queueing, so Close (which sets closed under the
// write lock) finds the event either queued, which the publisher drains,
// or pausing: never between the two, in neither (an event lost unsaid).
func (b *Bus) resendDue(id string) {
	if b.cfg.pauseEnded != nil {
		b.cfg.pauseEnded()
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return
	}
	if m, ok := b.pausing.LoadAndDelete(id); ok {
		b.enqueueLocked(m.(outMsg))
	}
}

// unacked says why the stream acknowledges nothing: what the bus knows
// (NATS refuses its credentials), else the likeliest cause.
func (b *Bus) unacked() string {
	if b.badCreds.Load() {
		return "NATS refuses this daemon's credentials"
	}
	return "a NATS cluster electing a stream leader?"
}

// pausingTaken takes the events waiting out a pause at Close, for the
// caller to keep; their waiters are told. Once closed is set nothing but
// this takes them (resendDue).
func (b *Bus) pausingTaken() []outMsg {
	var out []outMsg
	b.pausing.Range(func(id, _ any) bool {
		if m, ok := b.pausing.LoadAndDelete(id); ok {
			b.resolved(id.(string))
			out = append(out, m.(outMsg))
		}
		return true
	})
	return out
}

// answered handles the stream's acknowledgement of m: its event is
// recorded. The first of its copies' acknowledgements counts.
func (b *Bus) answered(m *nats.Msg) {
	id := m.Header.Get(jetstream.MsgIDHeader)
	b.flying.acked(id, func() {
		b.published.Add(1)
		b.keptDone(id, true)
		b.resolved(id)
	})
	b.unparkSoon() // the stream takes events: those parked go again
}

// publishAsync sends m, a copy of its event, to JetStream; an error is
// handled as its failure, and returned.
func (b *Bus) publishAsync(m *nats.Msg) error {
	_, err := b.js.PublishMsgAsync(m)
	if err != nil {
		b.failed(m, err)
	}
	return err
}

// leaderElected asks the publisher to send again what the stream has not
// answered, and what is parked: it has a new leader
// ($JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED).
func (b *Bus) leaderElected(*nats.Msg) {
	select {
	case b.elected <- struct{}{}:
	default:
	}
}

// resendUnanswered sends again at once, under its ID, every event sent and
// not answered, once the stream's new leader takes events: a publish that
// reached the stream while its leadership moved was dropped, and would wait
// out its 15 s ack timeout. A copy that did land is dropped as a duplicate.
// The parked events go again too. The stream's leader subscribes only
// after it announces itself, so the copies wait until it takes this
// server's publishes (a probe), at most a request's time; else the ack
// timeouts send them again (the parked ones, the next answer or probe). It
// runs on the publisher goroutine, also while Close waits for
// acknowledgements.
func (b *Bus) resendUnanswered(ctx context.Context) {
	if b.flying.len() == 0 && b.parked.len() == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	if err := b.waitStreamTakes(ctx, time.Now().Add(askTimeout)); err != nil {
		b.log.Debug("events: the stream has a new leader, which takes no event from this server yet; "+
			"its unanswered events wait for their ack timeout", "err", err)
		return
	}
	n := 0
	for _, m := range b.flying.all() {
		again := &nats.Msg{Subject: m.Subject, Data: m.Data, Header: m.Header}
		if !b.flying.again(m.Header.Get(jetstream.MsgIDHeader), again) {
			continue // answered meanwhile
		}
		err := b.publishAsync(again)
		if errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			break // 4,000 unanswered: each copy would wait 200 ms; the rest wait for their timeout
		}
		if err == nil {
			n++
		}
	}
	b.sendParked()
	if n == 0 {
		return
	}
	b.resentAtElection.Add(uint64(n))
	b.log.Info("events: the stream has a new leader; sent again at once the events it had not acknowledged", "events", n)
}

// flights are the events sent and not yet answered, each with its copies
// on their way (one, or more once sent again at a leader change). The
// first acknowledgement of any copy ends the event's flight: one count,
// one waiter told; a later answer (the first copy's timeout) is ignored. A
// copy that fails while another is out is left to the other (a copy
// refused as "in process" while the one before it is being stored).
type flights struct {
	mu     sync.Mutex
	events map[string]*flight // by event ID
	sent   uint64             // events added so far
	idle   chan struct{}      // closed once events is empty; nil while nobody waits
}

type flight struct {
	order  uint64 // its place in the order sent
	copies []*nats.Msg
}

// add records m as event id's copy on its way.
func (f *flights) add(id string, m *nats.Msg) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.events == nil {
		f.events = map[string]*flight{}
	}
	if e := f.events[id]; e != nil {
		e.copies = append(e.copies, m)
		return
	}
	f.sent++
	f.events[id] = &flight{order: f.sent, copies: []*nats.Msg{m}}
}

// again records m as one more copy of event id, if it is still on its
// way, and tells whether it was.
func (f *flights) again(id string, m *nats.Msg) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.events[id]
	if e == nil {
		return false
	}
	e.copies = append(e.copies, m)
	return true
}

// acked ends event id's flight on an acknowledgement of any of its copies,
// if it is on its way, after count: whoever waits until none is on its way
// finds it counted.
func (f *flights) acked(id string, count func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.events[id] != nil {
		count()
		f.end(id)
	}
}

// failed takes m, a copy of event id, off its way. When it was the last
// one, the event's failure is handled, then its flight ends.
func (f *flights) failed(id string, m *nats.Msg, handle func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.events[id]
	if e == nil || !slices.Contains(e.copies, m) {
		return
	}
	if len(e.copies) > 1 {
		e.copies = slices.DeleteFunc(e.copies, func(c *nats.Msg) bool { return c == m })
		return
	}
	handle()
	f.end(id)
}

// takeAll ends every flight, for Close, and returns a copy of each event
// that was on its way, in the order sent: in one step, so that an answer or
// a failure comes either before (and the event is not among them) or after
// (and is ignored), never both counted and kept, nor neither.
func (f *flights) takeAll() []*nats.Msg {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.allLocked()
	for id := range f.events {
		f.end(id)
	}
	return out
}

// end forgets event id; f.mu is held.
func (f *flights) end(id string) {
	delete(f.events, id)
	if len(f.events) == 0 && f.idle != nil {
		close(f.idle)
		f.idle = nil
	}
}

func (f *flights) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.events)
}

// all returns a copy of each event on its way, in the order they were sent.
func (f *flights) all() []*nats.Msg {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.allLocked()
}

// allLocked is all with f.mu held.
func (f *flights) allLocked() []*nats.Msg {
	es := slices.SortedFunc(maps.Values(f.events), func(a, b *flight) int { return cmp.Compare(a.order, b.order) })
	out := make([]*nats.Msg, len(es))
	for i, e := range es {
		out[i] = e.copies[0]
	}
	return out
}

// done is closed once no event is on its way.
func (f *flights) done() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.events) == 0 {
		return closedChan
	}
	if f.idle == nil {
		f.idle = make(chan struct{})
	}
	return f.idle
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

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
// once an event has waited stuckAfter to be sent again, or is parked: the
// stream has no leader (an election that does not end, a cluster that lost
// its quorum), which a connection check does not see. For /readyz.
func (b *Bus) Recording() error {
	oldest, parked := b.parked.oldest()
	n := parked
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
		"each is sent again for %v, then held until the stream takes events (%d held, %s; past %s, counted lost)",
		n, time.Since(oldest).Round(time.Second), b.cfg.resendFor, parked, b.keptWhere(), sizeText(b.cfg.keptMax))
}
