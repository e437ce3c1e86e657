package events

// Events parked. An event the stream has not acknowledged resendFor after
// its first failure (a daemon cut off from its stream's quorum: a NATS
// split with ZooKeeper reachable) is held in memory instead of counted
// lost, up to the kept file's cap, and sent again once the stream answers:
// at its next leader election, at the next acknowledgement of any publish,
// or at a probe every parkedProbeEvery. It is sent with the kept mark, as
// it may come past the stream's duplicate window (Replay leaves out a copy
// of an event stored before). Close keeps those still parked with the rest
// (kept.go); a process killed loses them, as all it holds in memory.

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	// parkedProbeEvery is how often the publisher asks, while events are
	// parked and nothing else says the stream is back, whether it takes
	// events: one request of at most askTimeout.
	parkedProbeEvery = 10 * time.Second
	// parkedPerTurn bounds what one turn of the publisher sends again, less
	// what is on its way: a quarter of nats.go's 4,000 unanswered
	// publishes, past which each publish stalls 200 ms. The acknowledgements
	// of one turn start the next.
	parkedPerTurn = 1000
)

// parkedEvent is one event held past resendFor.
type parkedEvent struct {
	m     outMsg
	first time.Time // its first failure
}

// parking holds the parked events in the order parked, within a cap on
// their bytes (as written to the kept file).
type parking struct {
	mu     sync.Mutex
	events []parkedEvent
	bytes  int
	n      atomic.Int64 // len(events), read without the lock
	full   bool         // the cap was said since the set was last emptied
	resent bool         // their resend was said since the last park: a drain of many turns says it once
}

// add holds e unless its bytes would pass max. It tells whether e is the
// first held since the set was last emptied, and, when refused, whether
// this is the first refusal since then (the caller says each once).
func (p *parking) add(e parkedEvent, max int) (held, first, firstRefused bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	size := len(e.m.data) + 1
	if p.bytes+size > max {
		firstRefused, p.full = !p.full, true
		return false, false, firstRefused
	}
	p.putLocked(e, size)
	p.resent = false
	return true, len(p.events) == 1, false
}

// sayResent tells whether the resend of the events held is to be said: the
// first turn since the last park.
func (p *parking) sayResent() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	say := !p.resent
	p.resent = true
	return say
}

// putBack holds again events taken and not sent, whatever the cap: they
// were within it.
func (p *parking) putBack(es []parkedEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range es {
		p.putLocked(e, len(e.m.data)+1)
	}
}

func (p *parking) putLocked(e parkedEvent, size int) {
	p.events = append(p.events, e)
	p.bytes += size
	p.n.Store(int64(len(p.events)))
}

// take takes the first n events held (all when n < 0).
func (p *parking) take(n int) []parkedEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n < 0 || n > len(p.events) {
		n = len(p.events)
	}
	out := p.events[:n:n]
	p.events = p.events[n:]
	for _, e := range out {
		p.bytes -= len(e.m.data) + 1
	}
	if len(p.events) == 0 {
		p.events, p.full = nil, false
	}
	p.n.Store(int64(len(p.events)))
	return out
}

func (p *parking) len() int { return int(p.n.Load()) }

// oldest returns the earliest first failure of the events held, and how
// many are held.
func (p *parking) oldest() (time.Time, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var oldest time.Time
	for _, e := range p.events {
		if oldest.IsZero() || e.first.Before(oldest) {
			oldest = e.first
		}
	}
	return oldest, len(p.events)
}

// park holds m, event id's copy that failed resendFor after its first
// failure, until the stream takes events; its waiter is told now, as Close
// tells a kept event's. It tells whether it did: past the cap the caller
// counts it lost.
func (b *Bus) park(m *nats.Msg, id string) bool {
	first := time.Now()
	if v, ok := b.failing.Load(id); ok {
		r := v.(*resend)
		r.mu.Lock()
		first = r.first
		r.mu.Unlock()
	}
	e := parkedEvent{m: outMsg{subject: m.Subject, id: id, data: m.Data, resent: true, kept: true}, first: first}
	held, firstHeld, firstRefused := b.parked.add(e, b.cfg.keptMax)
	if !held {
		if firstRefused {
			b.log.Warn("events: the events held until the stream takes events again reached "+sizeText(b.cfg.keptMax)+
				" (the cap of the file that keeps them at a stop); events past it are counted lost until the stream takes events",
				"held", b.parked.len(), "lost_total", b.lost.Load()+1)
		}
		return false
	}
	b.failing.Delete(id)
	b.acked(id)
	if firstHeld {
		b.log.Warn(fmt.Sprintf("events: the stream has not acknowledged events sent again for %v (%s); holding them "+
			"until it takes events again (kept at a stop, lost if the process is killed)", b.cfg.resendFor, b.unacked()))
	}
	return true
}

// unparkSoon asks the publisher to send the parked events again: the
// stream acknowledged a publish. One signal however many answers come.
func (b *Bus) unparkSoon() {
	if b.parked.len() == 0 {
		return
	}
	select {
	case b.unpark <- struct{}{}:
	default:
	}
}

// probeParked asks, while events are parked, whether the stream takes
// events, and sends them again if it does. On the publisher goroutine.
func (b *Bus) probeParked() {
	if b.parked.len() > 0 && b.streamTakes(b.ctx) {
		b.sendParked()
	}
}

// sendParked sends again the parked events, at most parkedPerTurn less
// what is on its way; on the publisher goroutine. One that fails again is
// parked again at once (its first failure is kept), for the next turn. The
// first turn since the last park says so; the others, started by the
// answers to the turn before, do not.
func (b *Bus) sendParked() {
	room := parkedPerTurn - b.flying.len()
	if room <= 0 {
		return // the answers of those on their way start the next turn
	}
	es := b.parked.take(room)
	sent := 0
	for i, e := range es {
		b.failing.Store(e.m.id, &resend{first: e.first})
		if err := b.send(e.m); errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			b.parked.putBack(es[i+1:]) // each would stall 200 ms; this one is parked again
			break
		}
		sent++
	}
	if sent > 0 && b.parked.sayResent() {
		b.log.Info("events: the stream takes events again; sent again events held until it did",
			"events", sent, "still_held", b.parked.len())
	}
}

// sizeText says n bytes in MiB when it is a whole number of them.
func sizeText(n int) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// parkedTaken takes the parked events at Close, for the caller to keep;
// their waiters were told when they were parked.
func (b *Bus) parkedTaken() []outMsg {
	var out []outMsg
	for _, e := range b.parked.take(-1) {
		b.resolved(e.m.id)
		out = append(out, e.m)
	}
	return out
}
