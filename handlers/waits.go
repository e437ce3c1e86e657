package handlers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers/fetch"
	"github.com/ingestq/ingestq/internal/backoff"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/reactor/stalled"
)

// A step waits, spending no attempt, while another job or program works on
// its object: one holds the object's storage or inventory lock (a large
// object's Storing holds it for hours), or stored a version it has not
// recorded yet (unrecorded.go). A retryable error would spend the job's
// attempts in seconds and fail a job that only had to wait its turn.

// objectWaitBase is the first wait for another holder of the object: a
// Recording takes milliseconds, a Storing up to hours; the waits double up
// to a minute.
const objectWaitBase = 100 * time.Millisecond

// errObjectHeld is another job or program working on the step's object:
// the step waits for it. why says for what, after "waiting ".
type errObjectHeld struct{ why string }

func (e errObjectHeld) Error() string { return e.why }

// waitWhileObjectHeld is the step's Result while err is an errObjectHeld:
// the job stays in its state and is tried again after the backoff of its
// waits in a row here, its message saying why; ok false for any other err,
// which also ends the job's waits.
func (p *Pipeline) waitWhileObjectHeld(ctx context.Context, s *reactor.Step, err error) (res reactor.Result, ok bool) {
	var w errObjectHeld
	if !errors.As(err, &w) {
		p.endWaits(s.Job.ID)
		return res, false
	}
	n := p.nextWait(s.Job.ID, nil).n
	// A job failed or deleted while it waits takes no step here again: the
	// watch of its end (tend) ends its waits. Its folder may be another
	// host's, on a shared working area.
	p.tend(s.Job.ID, p.workDir(s.Job))
	wait := backoff.Delay(objectWaitBase, time.Minute, n)
	p.sayWhyItWaits(ctx, s, "waiting "+w.why, nil)
	p.log.Info("waiting for another job or program working on the object", "job", s.Job.ID, "state", s.Job.State(), "why", w.why, "retest_in", wait)
	return reactor.Result{Wait: wait}, true
}

// waitsInRow are a job's waits in a row at its step: how many, since
// when, the latest, and, for a download waiting for a busy server, the
// files its last try verified (or downloaded).
type waitsInRow struct {
	n        int
	since    time.Time
	last     time.Time
	verified *digests
}

// nextWait counts one more wait of job jid in a row, with the files its
// try verified (nil but for a download's wait for a busy server), and
// returns them.
func (p *Pipeline) nextWait(jid string, verified *digests) waitsInRow {
	now := time.Now()
	p.forgetLeftWaits(now)
	w := waitsInRow{n: 1, since: now, last: now, verified: verified}
	if v, ok := p.waits.Load(jid); ok {
		prev := v.(waitsInRow)
		w.n, w.since = prev.n+1, prev.since
	}
	p.waits.Store(jid, w)
	return w
}

// waitsLeftAfter is how long past BusyLimit the waits in a row of a job or
// batch that waited no more are kept: a wait is a minute at most, so one
// still waiting here has waited again long before.
const waitsLeftAfter = 10 * time.Minute

// forgetLeftWaits forgets, at most once a waitsLeftAfter, the waits in a
// row of the jobs and batches that waited here last more than BusyLimit
// and waitsLeftAfter before now: they never came back to this daemon
// (cancelled, deleted, finished on another host, failed by their attempts
// between busy answers), and nothing else ends them; a daemon that runs
// for months kept each until its restart. One coming back after that
// starts its clock again, as it does on another host.
func (p *Pipeline) forgetLeftWaits(now time.Time) {
	last := p.waitsSwept.Load()
	if now.UnixNano()-last < int64(waitsLeftAfter) || !p.waitsSwept.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	stale := now.Add(-p.cfg.BusyLimit - waitsLeftAfter)
	p.waits.Range(func(id, v any) bool {
		if _, running := p.trying.Load(id); !running && v.(waitsInRow).last.Before(stale) {
			p.waits.CompareAndDelete(id, v)
		}
		return true
	})
}

// tryAfterWaits is what job jid's last try here verified before it waited
// for a busy server (nil when it is not waiting so here), for a download's
// try of it: a file still as it was then (size, inode and modification
// time) is not read again. Reading them all at each try held a Downloading
// worker for as long (2 s a GiB by MD5 here), at each of dozens of tries
// an hour. The job's waits in a row are kept until done is called, however
// long the try runs: one that downloads a big file while another stays
// busy outlasts the sweep's bound (forgetLeftWaits), and forgotten at its
// end, the job's busy clock started again.
func (p *Pipeline) tryAfterWaits(jid string) (verified *digests, done func()) {
	p.trying.Store(jid, struct{}{})
	if v, ok := p.waits.Load(jid); ok {
		verified = v.(waitsInRow).verified
	}
	return verified, func() { p.trying.Delete(jid) }
}

// endWaits forgets job jid's waits in a row: at its step's first outcome
// that is no wait, and once it has failed or ended (tend).
func (p *Pipeline) endWaits(jid string) { p.waits.Delete(jid) }

// lockedElsewhere is the wait for ark's lock of what ("storage",
// "inventory"), held as l says.
func (p *Pipeline) lockedElsewhere(ctx context.Context, what, ark string, l queue.ObjectLock) errObjectHeld {
	why := fmt.Sprintf("for the %s lock of %s, held by ", what, ark)
	if l.Session == 0 {
		return errObjectHeld{fmt.Sprintf("%sno session since %s: a persistent lock (as Merritt's storage service took one, "+
			"and left when it stopped), which stays until deleted; if no Merritt storage service is storing %s, delete its "+
			"ZooKeeper node (`zkCli.sh delete %s`; `ingestq check` lists it) and this job goes on", why, queue.TextTime(l.Since), ark, l.Path)}
	}
	if l.Job != "" {
		why += "job " + l.Job + " on "
	}
	return errObjectHeld{fmt.Sprintf("%s%s since %s; this job goes on once it is let go", why, p.q.SessionHolder(ctx, l.Session), queue.TextTime(l.Since))}
}

// sayWhyItWaits writes msg, why the step's job waits, into its status, for
// `ingestq ls` and `show`; only when it changes (MiB and whole percents
// keep a wait for room's steady), a note of the job's kept. deferred, when
// not nil, is written with it: a wait every daemon honours (reactor). Each
// message written is the job's progress event too, so that a depositor
// following the job's events hears why it stands still (an hour, for a
// busy server) without reading its status; but a wait for room's numbers
// move with every download of the daemon, so its message is written at
// nearly every test (--provision-wait), and a busy server's at every try
// (its next try), so their event is said again only when what holds the
// job back changes (sameWait).
func (p *Pipeline) sayWhyItWaits(ctx context.Context, s *reactor.Step, msg string, deferred *queue.Deferral) {
	was := s.Job.Status.Message
	if was == queue.KeepNote(msg, was) && deferred == nil {
		return
	}
	if err := s.Checkpoint(ctx, "why it waits", queue.JobChange{Message: msg, Deferred: deferred}); err != nil {
		p.log.Warn("waiting message not written", "job", s.Job.ID, "state", s.Job.State(), "err", err)
		return
	}
	var next time.Time
	if deferred != nil {
		next = deferred.Until
	}
	p.publishWait(was, events.Event{BatchID: s.Job.BatchID, JobID: s.Job.ID, To: string(s.Job.State()), Message: msg}, next)
}

// publishWait publishes ev, whose Message is a job's or a batch's wait
// replacing its message was, as its progress event: attrs.waiting, and
// attrs.next_try when next is not zero. Not when it waits for what was
// waited for (sameWait), nor without a bus.
func (p *Pipeline) publishWait(was string, ev events.Event, next time.Time) {
	if p.cfg.Bus == nil || sameWait(was, ev.Message) {
		return
	}
	ev.Kind, ev.Attrs = events.KindProgress, map[string]any{"waiting": true}
	if !next.IsZero() {
		ev.Attrs["next_try"] = next.UTC().Format(time.RFC3339)
	}
	p.cfg.Bus.Publish(ev)
}

// sameWait tells whether msg, a job's or batch's wait, waits for what
// was, the message it replaces, waited for: the same limit of room
// (RoomLimit), or the same file's same busy answer (busyWaitFor). Its
// event is not said again: a wait for room's MiB, a busy server's next
// try and Retry-After change at every test or try, 70 to 180 events an
// hour per job, and a thousand jobs on one busy server made about 17 a
// second.
func sameWait(was, msg string) bool {
	for _, waitsFor := range []func(string) string{RoomLimit, busyWaitFor} {
		if w := waitsFor(was); w != "" && w == waitsFor(msg) {
			return true
		}
	}
	return false
}

// busyTally is what a busy wait's message says of its requests and other
// files, which change from try to try while the same file waits for the
// same answer.
var busyTally = regexp.MustCompile(`( \(\d+ requests\))?( \(and \d+ other files\))?$`)

// busyWaitFor is the file and answer a busy-server wait's message (busyWait)
// waits for, "waiting for a busy server: producer/a.txt: download URL: HTTP
// 503 Service Unavailable", without when it asked to be asked again or is
// tried next; "" for any other message.
func busyWaitFor(msg string) string {
	if !strings.HasPrefix(msg, stalled.BusyServerPrefix+": ") {
		return ""
	}
	what, _, _ := strings.Cut(msg, "; ")
	return busyTally.ReplaceAllString(what, "")
}

// A depositor's server that answers a download 503 or 429 (busy: S3's
// SlowDown, a CDN's rate limit, a server in maintenance) asks to be asked
// later, often in 30 s to minutes. Spending the job's attempts on it failed
// the job within a minute, and the in-client waits held the state's
// workers, so ten busy URLs stopped every other download of the daemon.
// The job waits instead, as for a busy back end, spending no attempt and
// holding no worker, its other files downloaded meanwhile.

// busyAnswers are the busy answers of a step's requests (a download's
// files, a job's object manifest, a batch's payload): the least of their
// names ("" for the manifest and the payload; the least, so that each try
// of the same files names the same one) and its error, how many, and the
// latest time one asked to be asked again (zero: none said), so that no
// server is asked sooner.
type busyAnswers struct {
	mu     sync.Mutex
	n      int
	name   string
	err    error
	asked  time.Time
	unread atomic.Int64 // files verified by the try before, unchanged, not read again (tryAfterWaits)
}

// add notes err, the error of request name (a file's download; "" for an
// object manifest or a payload), when it is a busy answer, and tells
// whether it was one.
func (b *busyAnswers) add(name string, err error) bool {
	se, ok := fetch.BusyAnswer(err)
	if !ok {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n == 0 || name < b.name { // the same file named at each try, whichever answered first
		b.name, b.err = name, err
	}
	b.n++
	if se.RetryAt.After(b.asked) {
		b.asked = se.RetryAt
	}
	return true
}

// waitForBusyServer is the Result of a job's step whose requests' servers
// answered busy (b: Downloading's files, either step's object manifest):
// the job waits (busyWait), deferred in its status, or fails past
// BusyLimit.
func (p *Pipeline) waitForBusyServer(ctx context.Context, s *reactor.Step, b *busyAnswers, verified *digests) (reactor.Result, error) {
	jid := s.Job.ID
	next, msg, err := p.busyWait(p.nextWait(jid, verified), jid, "job", b)
	if err != nil {
		return reactor.Result{}, err
	}
	// Deferred in the job's status: another daemon would take the job at
	// once, asking the server again sooner than it asked.
	p.sayWhyItWaits(ctx, s, msg, &queue.Deferral{Until: next, Host: p.cfg.Host})
	wait := time.Until(next)
	p.log.Info(strings.ToLower(string(s.Job.State()))+": a depositor's server is busy; job waits", "job", jid, "file", b.name, "err", b.err, "retest_in", wait,
		"kept_unread", b.unread.Load())
	return reactor.Result{Wait: wait}, nil
}

// busyWait is when the job or batch id (noun: "job", "batch"), at its waits
// in a row w, tries its busy servers b again, and its message saying so: as
// long as their Retry-After asks, at most a minute, and no less than the
// backoff of its waits in a row, from the fetch client's first wait. Once
// it has waited BusyLimit, it is a Fatal error naming the file (b.name, ""
// for none).
func (p *Pipeline) busyWait(w waitsInRow, id, noun string, b *busyAnswers) (time.Time, string, error) {
	now := time.Now()
	what := fetch.Plain(b.err)
	if b.name != "" {
		what = b.name + ": " + what
	}
	if b.n > 1 {
		what += fmt.Sprintf(" (and %d other files)", b.n-1)
	}
	if waited := now.Sub(w.since); waited >= p.cfg.BusyLimit {
		p.endWaits(id)
		return time.Time{}, "", reactor.Fatal(fmt.Errorf("%s; its server still answered so after the %s waited %s for it (--fetch-busy-limit)",
			what, noun, waited.Round(time.Second)))
	}
	backedOff := now.Add(backoff.Delay(cmp.Or(p.cfg.Fetch.MinWait, fetch.Defaults.MinWait), time.Minute, w.n))
	wait := backoff.NotBeforeAsked(backedOff, b.asked, now, time.Minute).Sub(now)
	deadline := w.since.Add(p.cfg.BusyLimit)
	wait = min(wait, deadline.Sub(now))
	if !b.asked.IsZero() {
		what += fmt.Sprintf("; it asked to be asked again in %s (Retry-After)", stalled.Short(max(b.asked.Sub(now), 0).Round(time.Second)))
	}
	next := now.Add(wait)
	return next, fmt.Sprintf("%s: %s; next try at %s, spending no attempt; the %s fails if it is still busy at %s (--fetch-busy-limit %s)",
		stalled.BusyServerPrefix, what, queue.TextTime(next), noun, queue.TextTime(deadline), stalled.Short(p.cfg.BusyLimit)), nil
}
