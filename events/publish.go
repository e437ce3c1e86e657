package events

// The publish path: events stamped and queued, then sent in order by the
// bus's one publisher goroutine, with what counts as lost.

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ingestq/ingestq/internal/backoff"
)

// Publish stamps the event (ID, Time, Host when empty) and hands it to the
// publisher goroutine, which publishes it to JetStream asynchronously. It
// never waits for NATS and never panics. When a burst fills the queue it
// waits for room, at most a few milliseconds; if NATS is stuck it drops.
//
// An event is counted lost when it cannot be queued (bus closed, queue
// full), when NATS refuses it for good, or when it is still not
// acknowledged a minute after its first try failed and the events held
// so already fill the kept file's cap (64 MiB): a publish with no ack
// within 15 s, no stream answering, or the connection down is sent again
// under its ID meanwhile (resend.go), then held until the stream takes
// events (parked.go); one still unanswered when the stream announces a new
// leader is sent again at once. While NATS reconnects, events wait in the
// client's 8 MB reconnect buffer. Events counted lost may still be
// recorded when the buffer is sent on reconnect. Lost is an upper bound.
// What is unacknowledged at Close is kept for the next start (kept.go),
// not counted lost. Of a job's progress events held or kept, only the
// latest is: the others are superseded (Stats.Superseded), not lost.
func (b *Bus) Publish(e Event) {
	if b == nil {
		return
	}
	b.publish(e, nil)
}

// PublishAcked is Publish, and returns a channel closed once the stream has
// acknowledged the event, or the event is counted lost (or the bus is
// closing): what a caller waits on before a change that must not outrun
// the record of the one before it.
func (b *Bus) PublishAcked(e Event) <-chan struct{} {
	acked := make(chan struct{})
	if b == nil {
		close(acked)
		return acked
	}
	b.publish(e, acked)
	return acked
}

func (b *Bus) publish(e Event, acked chan struct{}) {
	if e.ID == "" {
		e.ID = NewID()
	}
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	if e.Host == "" && e.RecoveredBy == "" {
		e.Host = b.cfg.Host
	}
	data, err := marshal(e)
	if err != nil {
		b.lose(err)
		closeAcked(acked)
		return
	}
	b.enqueue(outMsg{subject: e.Subject(), id: e.ID, data: data, acked: acked})
}

// acked closes the channel a PublishAcked of event id waits on, if any.
func (b *Bus) acked(id string) {
	if ch, ok := b.acks.LoadAndDelete(id); ok {
		close(ch.(chan struct{}))
	}
}

func closeAcked(ch chan struct{}) {
	if ch != nil {
		close(ch)
	}
}

// Signal publishes data on core NATS at SignalSubject(Config.Host,
// subject), for internal wake-ups: only this bus's SubscribeSignal hears
// it, so on a NATS cluster a daemon's signals stay its own. Signals are
// never recorded. They do not queue behind
// recorded events (whose JetStream publishes can take milliseconds each):
// a core publish only writes to the connection's buffer, so Signal never
// waits for NATS either. A signal that cannot be sent is counted lost.
func (b *Bus) Signal(subject string, data []byte) {
	if b == nil {
		return
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		b.lose(errClosed)
		return
	}
	if err := b.nc.Publish(SignalSubject(b.cfg.Host, subject), data); err != nil {
		b.lose(err)
	}
}

// enqueue hands m to the publisher goroutine. A full queue slows the
// caller to the publisher's pace for at most queueWait; if no room opens
// in that time the publisher is stuck, and callers drop at once (instead
// of each waiting queueWait) until it sends something again.
func (b *Bus) enqueue(m outMsg) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	b.enqueueLocked(m)
}

// enqueueLocked is enqueue with b.mu read-locked.
func (b *Bus) enqueueLocked(m outMsg) {
	if b.closed {
		b.drop(m, errClosed)
		return
	}
	select {
	case b.queue <- m:
		return
	default:
	}
	if b.congested.Load() {
		b.drop(m, errQueueFull)
		return
	}
	t := time.NewTimer(queueWait)
	defer t.Stop()
	select {
	case b.queue <- m:
	case <-t.C:
		b.congested.Store(true)
		b.drop(m, errQueueFull)
	}
}

// drop counts m lost: it will not be sent. A resend's waiter, if any, is
// told so too.
func (b *Bus) drop(m outMsg, err error) {
	b.lose(err)
	closeAcked(m.acked)
	if m.resent {
		b.resolved(m.id)
	}
}

// publisher sends queued messages in order until Close, then sends what
// is left (within a bound) and ends.
func (b *Bus) publisher() {
	defer close(b.done)
	var retry <-chan time.Time // a failed reconfiguration's next try
	tries := 0
	probe := time.NewTicker(b.cfg.parkedProbe) // while events are parked, whether the stream takes events
	defer probe.Stop()
	for {
		// A reconfiguration asked for goes before the events queued
		// after it: a Flush after SetRoutes returns once it is done.
		select {
		case <-b.reconf:
			retry = b.runReconfigure(&tries, b.cfg.settleWait)
			continue
		default:
		}
		select {
		case m := <-b.queue:
			b.send(m)
			if b.congested.Load() {
				b.congested.Store(false)
			}
		case <-b.reconf:
			retry = b.runReconfigure(&tries, b.cfg.settleWait)
		case <-b.elected:
			// Not cut short when Close begins (it cancels b.ctx): the events
			// sent again here are those its wait for answers takes.
			b.resendUnanswered(context.WithoutCancel(b.ctx))
		case <-b.unpark:
			b.sendParked()
		case <-probe.C:
			b.probeParked()
		case <-retry:
			retry = b.runReconfigure(&tries, askTimeout)
		case <-b.stop:
			// Send what is left until Close's deadline: with NATS down
			// each send may stall (200 ms at 4,000 unacknowledged).
			for {
				select {
				case m := <-b.queue:
					if time.Now().Before(b.stopBy) {
						b.send(m)
					} else if m.flushed != nil {
						close(m.flushed)
					} else {
						b.unsent = append(b.unsent, m) // Close keeps it, and tells its waiter
					}
				default:
					b.awaitAnswers()
					return
				}
			}
		}
	}
}

// awaitAnswers waits, until Close's deadline, for the stream to answer
// every event sent. A leader elected meanwhile gets the unanswered ones
// again at once: a daemon stopped right after the stream's leader moved
// does not count them lost.
func (b *Bus) awaitAnswers() {
	ctx, cancel := context.WithDeadline(context.Background(), b.stopBy)
	defer cancel()
	for {
		select {
		case <-b.flying.done():
			return
		case <-b.elected:
			b.resendUnanswered(ctx)
		case <-ctx.Done():
			return
		}
	}
}

// runReconfigure reconfigures the embedded server and returns when to try
// again after a failure (nil: no need). After a change the events wait up
// to 30 s (settleTimeout) for the cluster to settle; a retry holds them up no
// longer than a request takes.
func (b *Bus) runReconfigure(tries *int, patience time.Duration) <-chan time.Time {
	err := b.reconfigure(b.ctx, patience)
	if err == nil || b.ctx.Err() != nil || errors.Is(err, errSuperseded) {
		*tries = 0
		return nil
	}
	*tries++
	d := backoff.Delay(retryFirst, retryMax, *tries)
	b.log.Warn("events: NATS cluster not settled; trying again", "in", d, "err", err)
	return time.After(d)
}

// send sends m (a marker: tells its waiter); a publish's error is
// returned, as handled by failed.
func (b *Bus) send(m outMsg) error {
	switch {
	case m.flushed != nil:
		close(m.flushed)
		return nil
	default:
		msg := &nats.Msg{Subject: m.subject, Data: m.data, Header: nats.Header{}}
		msg.Header.Set(jetstream.MsgIDHeader, m.id)
		if m.kept {
			msg.Header.Set(keptHeaderKey, "1")
		}
		if m.acked != nil {
			b.acks.Store(m.id, m.acked)
		}
		b.flying.add(m.id, msg)
		return b.publishAsync(msg)
	}
}

// Lost counts an event that will not be published because the change it
// would announce has an unknown outcome: a commit whose reply was lost and
// whose retry found the item moved on may still have been applied. The
// stream's promise (each change at most once, and Stats.Lost counting every
// change it may lack) stays true.
func (b *Bus) Lost(reason error) {
	if b != nil {
		b.lose(reason)
	}
}

// lose counts one lost event and warns at most once per lostWarnEvery.
func (b *Bus) lose(reason error) {
	if n := b.lost.Add(1); b.lostWarn.Allow() {
		b.log.Warn("events: events not recorded", "lost_total", n, "reason", reason)
	}
}

// warnLimit lets one warning through per lostWarnEvery.
type warnLimit struct{ last atomic.Int64 } // unix nanoseconds of the last one

// Allow tells whether a warning may be logged now.
func (w *warnLimit) Allow() bool {
	now := time.Now().UnixNano()
	last := w.last.Load()
	return (last == 0 || now-last >= int64(lostWarnEvery)) && w.last.CompareAndSwap(last, now)
}
