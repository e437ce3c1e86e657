package reactor

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ingestq/ingestq/internal/backoff"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Unavailable marks a step's error as an outage of a back end the job
// needs (what: "the inventory of profile P", "storage target s3://…"), not
// a fault of the job: the job is not failed for it, nor are its attempts
// spent. It waits in its state until the back end's next try, with a wait
// that grows while the back end stays out, up to outageMax, and no shorter
// than the back end asked (err with a NotBefore: an HTTP Retry-After).
func Unavailable(what string, err error) error {
	if err == nil {
		return nil
	}
	return &unavailableError{what: what, err: err}
}

// UnavailableToAll is Unavailable for a back end every job of the state
// needs (the daemon's own inventory or storage, where a profile names none
// of its own): the state then takes no job on this daemon until the back
// end's next try, instead of every waiting job finding it out.
func UnavailableToAll(what string, err error) error {
	if err == nil {
		return nil
	}
	return &unavailableError{what: what, everyJob: true, err: err}
}

type unavailableError struct {
	what     string
	everyJob bool
	err      error
}

func (e *unavailableError) Error() string {
	return fmt.Sprintf("%s is unavailable: %v", e.what, e.err)
}
func (e *unavailableError) Unwrap() error { return e.err }

// IsUnavailable tells whether err is (or wraps) an Unavailable error.
func IsUnavailable(err error) bool {
	var u *unavailableError
	return errors.As(err, &u)
}

// outageMax is the longest wait between two tries of a back end that is
// out: one that comes back is used again within it.
const outageMax = time.Minute

// WaitingPrefix starts the status message of a job whose step waits for a
// back end to come back.
const WaitingPrefix = "waiting for a back end"

// outages are the back ends this daemon's steps found out (decision 252).
// Each has its next try: the jobs that found it out wait until then, and a
// state that every job needs it for takes no job meanwhile. Several steps
// finding one back end out at once count once. An outage ends, for every
// job waiting on it here, when this daemon next gets an answer from the back
// end (a step that named it with Step.Doing succeeds, or a step of a job
// that waited for it ends with a move), or when no job it saw waiting for it
// still waits in its state (another host finished it, an operator failed or
// deleted it). Another daemon, which may reach it, is not held back.
type outages struct {
	mu        sync.Mutex
	backEnds  map[string]*outage
	waitingOn map[string]waitingJob // jid → the back end it waits for
	// answeredOthers are the jobs whose back end answered another job's
	// step while they waited for it (jid → the back end): one that then
	// finds it out again, while no other step does, waits alone (down).
	answeredOthers map[string]waitingJob
	// Each state's folder as its watch last listed it (sorted), and how
	// many listings of it came: a job found waiting is judged gone from
	// its state only by a listing taken after it arrived (waitingJob).
	last     map[queue.State][]string
	listings map[queue.State]int
	tell     func(what string, out bool)
	// wait defers job jid of state s until t; a zero t ends its deferral.
	// Called under mu: an end that came between a finding and its
	// deferral was undone by it, and the job waited out the back end's
	// next try.
	wait func(s queue.State, jid string, t time.Time)
}

// waitingJob is a job this daemon saw wait for a back end, in state.
// A listing that lacks it ends its wait when it was taken after the job
// arrived: a job handed on to a worker here finds its back end out before
// the watch's listing comes, which may have been taken before the job
// arrived (that one ended the back end's outage while it was still out).
// So it is judged by the next listing when the last one before its finding
// showed it (seen), else by the listing after the next one (listing),
// taken after that one came.
type waitingJob struct {
	backEnd string
	state   queue.State
	streak  int    // in answeredOthers: its findings since
	ref     string // in state's folder
	seen    bool   // in the listing of state's folder before it was found waiting
	listing int    // the listings of state's folder come when it was found waiting
}

// waitingIn is job ref waiting for back end what in state s, as listings
// of s have shown it so far.
func (o *outages) waitingIn(s queue.State, ref, what string) waitingJob {
	_, seen := slices.BinarySearch(o.last[s], ref)
	return waitingJob{backEnd: what, state: s, ref: ref, seen: seen, listing: o.listings[s]}
}

// BackEndObserver is an Observer also told when this daemon's steps find a
// back end out, and when it is back: the metrics' gauge of back ends out.
type BackEndObserver interface {
	BackEnd(what string, out bool)
}

type outage struct {
	until  time.Time
	streak int                  // tries in a row that found it out
	states map[queue.State]bool // states that take no job until then
}

func newOutages(obs Observer, wait func(s queue.State, jid string, t time.Time)) *outages {
	o := &outages{backEnds: map[string]*outage{}, waitingOn: map[string]waitingJob{}, answeredOthers: map[string]waitingJob{},
		last: map[queue.State][]string{}, listings: map[queue.State]int{}, tell: func(string, bool) {}, wait: wait}
	if b, ok := obs.(BackEndObserver); ok {
		o.tell = b.BackEnd
	}
	return o
}

// down notes that job ref's step in s found err's back end out, defers the
// job until the back end's next try, and returns it: base after the first
// finding, doubled at each later one, at most outageMax. alone: the back
// end answered other jobs' steps since this job first found it out, and
// no other finds it out now (an object S3 answers 503 for, whatever the
// key, forever; decision 891): the job waits by itself, its own finding
// neither the back end's outage (the gauge) nor a pause of its state,
// which held every other job of the state up to a minute at a time.
func (o *outages) down(s queue.State, ref string, err error, base time.Duration) (until time.Time, alone bool) {
	jid := jidOf(ref)
	var u *unavailableError
	errors.As(err, &u)
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	asked := askedWait(err)
	if mine := o.answeredOthers[jid]; mine.backEnd == u.what && o.backEnds[u.what] == nil {
		streak := mine.streak + 1
		mine = o.waitingIn(s, ref, u.what)
		mine.streak = streak
		o.answeredOthers[jid] = mine
		until = backoff.NotBeforeAsked(now.Add(backoff.Delay(base, outageMax, mine.streak)), asked, now, outageMax)
		o.wait(s, jid, until)
		return until, true
	}
	delete(o.answeredOthers, jid) // out for others too: it waits with them
	b := o.backEnds[u.what]
	if b == nil {
		b = &outage{states: map[queue.State]bool{}}
		o.backEnds[u.what] = b
		o.tell(u.what, true)
	}
	if !now.Before(b.until) { // a finding during the wait is the same finding
		b.streak++
		b.until = now.Add(backoff.Delay(base, outageMax, b.streak))
	}
	b.until = backoff.NotBeforeAsked(b.until, asked, now, outageMax)
	if u.everyJob {
		b.states[s] = true
	}
	before, waited := o.waitingOn[jid]
	o.waitingOn[jid] = o.waitingIn(s, ref, u.what)
	o.wait(s, jid, b.until)
	if waited && before.backEnd != u.what {
		o.endUnlessWaitedFor(before.backEnd) // this job waits for it no more; the step may not have reached it (Storing reads the inventory before storage)
	}
	return b.until, false
}

// askedWait is when err's back end asked to be tried again (an HTTP
// Retry-After, as fetch.StatusError's NotBefore); zero when it did not say.
func askedWait(err error) time.Time {
	var asked interface{ NotBefore() time.Time }
	if !errors.As(err, &asked) {
		return time.Time{}
	}
	return asked.NotBefore()
}

// up notes that job jid's step ended with an answer: the back end it
// waited for, if any, is back.
func (o *outages) up(jid string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.answeredOthers, jid)
	if w, ok := o.waitingOn[jid]; ok {
		o.end(w.backEnd)
	}
}

// answered notes that a step got an answer from each of backEnds: those
// out are back.
func (o *outages) answered(backEnds []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, what := range backEnds {
		if _, out := o.backEnds[what]; out {
			for jid, w := range o.waitingOn {
				if w.backEnd == what {
					o.answeredOthers[jid] = w
				}
			}
			o.end(what)
		}
	}
}

// listed takes state s's folder as its watch listed it (refs, sorted): a
// job seen waiting in s (or waiting alone) that it lacks waits here no
// more, when the listing was taken after the job arrived (waitingJob), and
// a back end no job waits for any longer is no longer known out.
func (o *outages) listed(s queue.State, refs []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.last[s] = refs
	o.listings[s]++
	unlisted := map[string]bool{}
	for _, jobs := range []map[string]waitingJob{o.waitingOn, o.answeredOthers} {
		for jid, w := range jobs {
			if w.state != s {
				continue
			}
			if _, there := slices.BinarySearch(refs, w.ref); !there && (w.seen || w.listing < o.listings[s]-1) {
				unlisted[jid] = true
			}
		}
	}
	for jid := range unlisted {
		o.goneLocked(jid)
	}
}

// gone notes that job jid waits here no more without an answer from its
// back end: it is no longer this worker's.
func (o *outages) gone(jid string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.goneLocked(jid)
}

func (o *outages) goneLocked(jid string) {
	delete(o.answeredOthers, jid)
	if w, ok := o.waitingOn[jid]; ok {
		delete(o.waitingOn, jid)
		o.endUnlessWaitedFor(w.backEnd)
	}
}

// endUnlessWaitedFor ends back end what's outage, with o.mu held, when no
// job waits for it any more.
func (o *outages) endUnlessWaitedFor(what string) {
	for _, w := range o.waitingOn {
		if w.backEnd == what {
			return
		}
	}
	o.end(what)
}

// end ends back end what's outage, with o.mu held: the gauge clears, its
// states take jobs again, and the jobs still waiting for it are released.
func (o *outages) end(what string) {
	if _, out := o.backEnds[what]; out {
		delete(o.backEnds, what)
		o.tell(what, false)
	}
	for jid, w := range o.waitingOn {
		if w.backEnd == what {
			delete(o.waitingOn, jid)
			o.wait(w.state, jid, time.Time{})
		}
	}
}

// paused tells whether s takes no job now: a back end every job of s
// needs is out until its next try.
func (o *outages) paused(s queue.State) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	for _, b := range o.backEnds {
		if b.states[s] && now.Before(b.until) {
			return true
		}
	}
	return false
}
