package events

// Events parked. An event the stream has not acknowledged resendFor after
// its first failure (a daemon cut off from its stream's quorum: a NATS
// split with ZooKeeper reachable) is held in memory instead of counted
// lost, up to the kept file's cap, and sent again once the stream answers:
// at its next leader election, at the next acknowledgement of any publish,
// or at a probe every parkedProbeEvery. It is sent with the kept mark, as
// it may come past the stream's duplicate window (Replay leaves out a copy
// of an event stored before). Close keeps those still parked with the rest
// (kept.go); while it runs they are written to that file as they are
// parked (keptwriter.go), so that a process killed outright (SIGKILL, an
// OOM kill) sends them at its next start all the same. Of a
// job's progress events (two a second of a download, on one subject) only
// the latest is held: the others are superseded, neither sent nor lost, so
// that hours of downloads through a split do not fill the cap that its
// moves need.

import (
	"errors"
	"fmt"
	"math"
	"strings"
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
	at    time.Time // a progress event's time: of two of a job, the later is held
}

// parking holds the parked events in the order parked, within a cap on
// their bytes as the kept file counts them (keptSize), and at most one
// progress event a job.
type parking struct {
	mu     sync.Mutex
	events []parkedEvent
	from   int            // events taken since the set was last emptied: events[i] is the from+i'th held
	jobs   map[string]int // a progress subject → where its job's progress event is held (counted as from is)
	bytes  int
	n      atomic.Int64 // len(events), read without the lock
	full   bool         // the cap was said since the set was last emptied
	// The hold was said since the resend was last said: the two lines take
	// turns, so a drain of many turns says the resend once, and a park after
	// it (a copy sent again, unanswered) says the hold again first.
	heldSaid bool
	// A turn is sending (takeTurn to turnEnded), and an event was held
	// meanwhile: its hold is said at the turn's end, after the turn's
	// resend, which would otherwise take it for its own.
	turning, heldInTurn bool
}

// parked is what parking.add did with an event.
type parked struct {
	held         bool   // held, in the place of a superseded progress event of its job if there was one
	superseded   string // the ID of a progress event left out for a later one of its job: the one given, or the one it replaced
	sayHeld      bool   // held, the first since the resend was last said (or ever)
	firstRefused bool   // refused past the cap, the first refusal since the set was last emptied
}

// add holds e unless its bytes would pass max, or it is a progress event
// of a job whose later one is held. It says what it did, and when to say
// so (the caller says the hold and the first refusal once each).
func (p *parking) add(e parkedEvent, max int) parked {
	p.mu.Lock()
	defer p.mu.Unlock()
	held, superseded := p.holdLocked(e, max)
	if !held {
		if superseded != "" {
			return parked{superseded: superseded}
		}
		firstRefused := !p.full
		p.full = true
		return parked{firstRefused: firstRefused}
	}
	if p.turning {
		p.heldInTurn = true
		return parked{held: true, superseded: superseded}
	}
	say := !p.heldSaid
	p.heldSaid = true
	return parked{held: true, superseded: superseded, sayHeld: say}
}

// holdLocked holds e within max bytes, as add says. A progress event of a
// job whose progress event is held keeps the later of the two, in the held
// one's place (and with the earlier first failure): no search, no gap left
// in the order. The one left out is superseded.
func (p *parking) holdLocked(e parkedEvent, max int) (held bool, superseded string) {
	size := keptSize(e.m)
	at, had := p.jobs[e.m.subject]
	if !had {
		if p.bytes+size > max {
			return false, ""
		}
		if isProgress(e.m.subject) {
			if p.jobs == nil {
				p.jobs = map[string]int{}
			}
			p.jobs[e.m.subject] = p.from + len(p.events)
		}
		p.events = append(p.events, e)
		p.bytes += size
		p.n.Store(int64(len(p.events)))
		return true, ""
	}
	old := &p.events[at-p.from]
	if e.at.Before(old.at) {
		return false, e.m.id
	}
	if p.bytes-keptSize(old.m)+size > max {
		return false, ""
	}
	p.bytes += size - keptSize(old.m)
	superseded = old.m.id
	if old.first.Before(e.first) {
		e.first = old.first
	}
	*old = e
	return true, superseded
}

// isProgress tells whether subject is a job's progress subject.
func isProgress(subject string) bool { return strings.HasPrefix(subject, progressSubjectPrefix) }

// takeTurn takes the first n events held, for a turn that sends them again
// and then calls turnEnded.
func (p *parking) takeTurn(n int) []parkedEvent {
	es := p.take(n)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.turning = true
	return es
}

// turnEnded tells whether the resend of the events held is to be said (the
// first turn that sent any since the hold was said), and then whether the
// hold is (an event held during the turn, none said since the resend).
func (p *parking) turnEnded(sent bool) (sayResent, sayHeld bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sayResent = sent && p.heldSaid
	if sayResent {
		p.heldSaid = false
	}
	sayHeld = p.heldInTurn && !p.heldSaid
	if p.heldInTurn {
		p.heldSaid = true
	}
	p.turning, p.heldInTurn = false, false
	return sayResent, sayHeld
}

// putBack holds again events taken and not sent, whatever the cap: they
// were within it. It returns the progress events superseded meanwhile by a
// later one of their job.
func (p *parking) putBack(es []parkedEvent) (superseded []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range es {
		if _, id := p.holdLocked(e, math.MaxInt); id != "" {
			superseded = append(superseded, id)
		}
	}
	return superseded
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
	p.from += n
	for _, e := range out {
		p.bytes -= keptSize(e.m)
		delete(p.jobs, e.m.subject) // a progress event held is its job's one
	}
	if len(p.events) == 0 {
		p.events, p.from, p.full = nil, 0, false
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
// tells a kept event's. It tells whether it did, or left it out as a
// progress event superseded: past the cap the caller counts it lost.
func (b *Bus) park(m *nats.Msg, id string) bool {
	first := time.Now()
	if v, ok := b.failing.Load(id); ok {
		r := v.(*resend)
		r.mu.Lock()
		first = r.first
		r.mu.Unlock()
	}
	e := parkedEvent{m: outMsg{subject: m.Subject, id: id, data: m.Data, resent: true, kept: true}, first: first}
	if isProgress(m.Subject) {
		ev, _ := decode(m.Data)
		e.at = ev.Time
	}
	r := b.parked.add(e, b.cfg.keptMax)
	if r.held {
		b.keptFile.add(e.m, false) // before the progress event it replaces, if any, leaves the file
	}
	if r.superseded != "" {
		b.supersede(r.superseded)
	}
	if !r.held {
		if r.superseded == id {
			return true
		}
		if r.firstRefused {
			b.log.Warn("events: the events held until the stream takes events again reached "+sizeText(b.cfg.keptMax)+
				" (the cap of the file that keeps them at a stop); events past it are counted lost until the stream takes events",
				"held", b.parked.len(), "lost_total", b.lost.Load()+1)
		}
		return false
	}
	b.failing.Delete(id)
	b.acked(id)
	b.keptWriteSoon()
	if r.sayHeld {
		b.sayHeld()
	}
	return true
}

// sayHeld says that events are held.
func (b *Bus) sayHeld() {
	b.log.Warn(fmt.Sprintf("events: the stream has not acknowledged events sent again for %v (%s); holding them "+
		"until it takes events again (%s)", b.cfg.resendFor, b.unacked(), b.keptWhere()))
}

// keptWhere says where the events held are kept for the next start.
func (b *Bus) keptWhere() string {
	if path := b.cfg.keptPath(); path != "" {
		return "kept in " + path + " for the next start, also after a kill"
	}
	return "in memory only: without a data folder they are lost at a stop"
}

// supersede ends the way of progress event id, left out for a later one of
// its job: never sent again, counted superseded (not lost), its waiter told.
func (b *Bus) supersede(id string) {
	b.superseded.Add(1)
	if b.keptFile.fromStart(id) {
		b.keptSuperseded.Add(1) // before keptDone, which may have the kept events' end said
	}
	b.resolved(id)
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

// probeParked asks, while events are parked and none is queued, whether
// the stream takes events, and sends them again if it does. On the
// publisher goroutine, which a probe of a silent stream holds for
// askTimeout: the events queued go first, their acknowledgements unparking
// as well; a probe taken between them held each up a probe or more.
func (b *Bus) probeParked() {
	if b.parked.len() > 0 && len(b.queue) == 0 && b.streamTakes(b.ctx) {
		b.sendParked()
	}
}

// sendParked sends again the parked events, at most parkedPerTurn less
// what is on its way; on the publisher goroutine. One that fails again is
// parked again at once (its first failure is kept), for the next turn. The
// first turn since the hold was said says the resend; the others, started
// by the answers to the turn before, do not. A copy unanswered in its ack
// timeout is the stream taking no events again: its park says the hold
// again, so each "takes events again" said follows a hold said; one parked
// while the turn sends is said after the turn's resend.
func (b *Bus) sendParked() {
	room := parkedPerTurn - b.flying.len()
	if room <= 0 {
		return // the answers of those on their way start the next turn
	}
	es := b.parked.takeTurn(room)
	sent := 0
	for i, e := range es {
		b.failing.Store(e.m.id, &resend{first: e.first})
		if err := b.send(e.m); errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			for _, id := range b.parked.putBack(es[i+1:]) { // each would stall 200 ms; this one is parked again
				b.supersede(id)
			}
			break
		}
		sent++
	}
	sayResent, sayHeld := b.parked.turnEnded(sent > 0)
	if sayResent {
		b.log.Info("events: the stream takes events again; sent again events held until it did",
			"events", sent, "still_held", b.parked.len())
	}
	if sayHeld {
		b.sayHeld()
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
