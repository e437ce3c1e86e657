package ops

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Pace learns how fast the queue moves from the job events it is shown
// (the daemon's event stream, every host's), for estimates of the time
// left (docs/decisions.md), and from the progress events how far running
// downloads have come. It knows only what it has seen since it started:
// until jobs have moved, its estimates are unknown (nil).
type Pace struct {
	mu        sync.Mutex
	now       func() time.Time
	entered   map[string]entry                // jid → the state it entered last, and when
	steps     map[queue.State][]time.Duration // the latest step durations out of each state
	leaves    map[queue.State][]time.Time     // when jobs last left each state
	finishes  []time.Time                     // when jobs last finished (Completed or Failed)
	downloads map[string]int64                // jid → bytes its running download has fetched
}

type entry struct {
	state queue.State
	at    time.Time
}

const (
	paceSamples = 50               // samples kept per measure
	paceWindow  = 15 * time.Minute // a rate counts what happened this recently
	paceJobs    = 100_000          // jobs in flight remembered, at most
)

// NewPace makes a Pace that has seen nothing.
func NewPace() *Pace {
	return &Pace{now: time.Now, entered: map[string]entry{},
		steps: map[queue.State][]time.Duration{}, leaves: map[queue.State][]time.Time{}, downloads: map[string]int64{}}
}

// ETA is an estimate of the time left.
type ETA struct {
	Seconds float64   `json:"seconds"`
	At      time.Time `json:"at"`
	Basis   string    `json:"basis"` // how it was reckoned
}

// Observe takes one event: a download's progress, or a job's move; other
// events are ignored, and so is the pace of the moves operators' actions
// made (attrs.action: a thousand jobs failed at once by a cancel are no
// pace, nor is a requeue).
func (p *Pace) Observe(ev events.Event) {
	if p == nil || ev.JobID == "" || ev.Kind != events.KindJob && ev.Kind != events.KindProgress {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if ev.Kind == events.KindProgress {
		if n, ok := ev.Attrs["bytes_done"].(float64); ok && ev.To == string(queue.Downloading) {
			if len(p.downloads) >= paceJobs {
				clear(p.downloads) // downloads whose end was never seen
			}
			p.downloads[ev.JobID] = int64(n)
		}
		return
	}
	delete(p.downloads, ev.JobID) // a move ends the step the progress was of
	if ev.Attrs["action"] != nil {
		return
	}
	from, to := queue.State(ev.From), queue.State(ev.To)
	if from != "" {
		p.leaves[from] = keepLatest(p.leaves[from], ev.Time)
	}
	if e, ok := p.entered[ev.JobID]; ok && e.state == from && ev.Time.After(e.at) {
		p.steps[from] = keepLatest(p.steps[from], ev.Time.Sub(e.at))
	}
	if to == queue.Completed || to == queue.Failed {
		p.finishes = keepLatest(p.finishes, ev.Time)
	}
	if done(to) {
		delete(p.entered, ev.JobID)
		return
	}
	if len(p.entered) >= paceJobs {
		clear(p.entered) // jobs whose end was never seen; their steps are lost
	}
	p.entered[ev.JobID] = entry{to, ev.Time}
}

func keepLatest[T any](s []T, v T) []T {
	if len(s) == paceSamples {
		s = slices.Delete(s, 0, 1)
	}
	return append(s, v)
}

// Downloaded is how many bytes job jid's running download has fetched, as
// its last progress event said (published every half second at most, not
// kept in ZooKeeper); false when none was seen since its last move.
func (p *Pace) Downloaded(jid string) (int64, bool) {
	if p == nil {
		return 0, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	n, ok := p.downloads[jid]
	return n, ok
}

// rate is how many per second the times say, over the window: nil with
// fewer than two in it.
func (p *Pace) rate(times []time.Time) (float64, bool) {
	cut := p.now().Add(-paceWindow)
	recent := slices.DeleteFunc(slices.Clone(times), func(t time.Time) bool { return t.Before(cut) })
	if len(recent) < 2 {
		return 0, false
	}
	slices.SortFunc(recent, func(a, b time.Time) int { return a.Compare(b) })
	span := recent[len(recent)-1].Sub(recent[0])
	if span <= 0 {
		return 0, false
	}
	return float64(len(recent)-1) / span.Seconds(), true
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// JobETA estimates when a job in state, place-th in its state's queue
// (1 first), completes: the time its state's queue takes to drain that
// far, at the rate jobs left it recently, and then the median time recent
// jobs spent in each later state. A job whose step is deferred until
// nextTry (a busy server asked to be asked again then; zero: none) leaves
// its state no sooner than that: the queue's rate alone put the ETA of a
// job waiting an hour for its server seconds away, before its next try.
// nil when a state has no recent measure, and for a job waiting on an
// operator (Held, Failed) or done.
func (p *Pace) JobETA(state queue.State, place int, nextTry time.Time) *ETA {
	if p == nil || place < 1 || state == queue.Held || done(state) {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.rate(p.leaves[state])
	if !ok {
		return nil
	}
	left := time.Duration(float64(place) / r * float64(time.Second))
	basis := fmt.Sprintf("place %d in %s, which jobs left at %.2f/s over the last %v", place, state, r, paceWindow)
	if wait := nextTry.Sub(p.now()); wait > left {
		left = wait
		basis = fmt.Sprintf("its next try in %s at %s (a busy server asked for it)", state, nextTry.UTC().Format(time.RFC3339))
	}
	for s, ok := nextStep(state); ok && s != queue.Completed; s, ok = nextStep(s) {
		if len(p.steps[s]) == 0 {
			return nil
		}
		left += median(p.steps[s])
	}
	return p.eta(left, fmt.Sprintf("%s; then the median time of the last %d steps of each later state", basis, paceSamples))
}

// BatchETA estimates when a batch with unfinished jobs left reports: at the
// rate jobs finished recently (every batch's), the time they take. It
// assumes that rate goes to this batch: with other batches ahead of it,
// it is later. Of its unfinished jobs, deferred wait for a busy server,
// the latest until nextTry (zero: none): it reports no sooner than that.
// The finish rate alone put the ETA of a batch whose last job waited 15
// minutes for its server 12 s away.
func (p *Pace) BatchETA(unfinished, deferred int, nextTry time.Time) *ETA {
	if p == nil || unfinished < 1 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.rate(p.finishes)
	if !ok {
		return nil
	}
	left := time.Duration(float64(unfinished) / r * float64(time.Second))
	basis := fmt.Sprintf("%s at the rate jobs finished over the last %v (%.2f/s)", count(unfinished, "unfinished job"), paceWindow, r)
	if wait := nextTry.Sub(p.now()); wait > left {
		left = wait
		basis = fmt.Sprintf("not before the latest next try of its jobs that wait for a busy server (%d of %s), at %s, which the server asked for",
			deferred, count(unfinished, "unfinished job"), nextTry.UTC().Format(time.RFC3339))
	}
	return p.eta(left, basis)
}

// nextStep is where a job goes from s when all is well: Pending's way on
// is an admin edge of the machine (the daemon takes it), the others its
// success edges.
func nextStep(s queue.State) (queue.State, bool) {
	if s == queue.Pending {
		return queue.Estimating, true
	}
	return queue.JobMachine.Success(s)
}

func (p *Pace) eta(left time.Duration, basis string) *ETA {
	left = left.Round(time.Second)
	return &ETA{Seconds: left.Seconds(), At: p.now().Add(left).UTC().Truncate(time.Second), Basis: basis}
}
