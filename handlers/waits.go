package handlers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ingestq/ingestq/internal/backoff"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
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

// errObjectBusy is another job or program working on the step's object:
// the step waits for it. why says for what, after "waiting ".
type errObjectBusy struct{ why string }

func (e errObjectBusy) Error() string { return e.why }

// waitWhileObjectBusy is the step's Result while err is an errObjectBusy:
// the job stays in its state and is tried again after the backoff of its
// waits in a row here, its message saying why; ok false for any other err,
// which also ends the job's waits.
func (p *Pipeline) waitWhileObjectBusy(ctx context.Context, s *reactor.Step, err error) (res reactor.Result, ok bool) {
	var w errObjectBusy
	if !errors.As(err, &w) {
		p.endWaits(s.Job.ID)
		return res, false
	}
	n := 1
	if v, ok := p.objectWaits.Load(s.Job.ID); ok {
		n = v.(int) + 1
	}
	p.objectWaits.Store(s.Job.ID, n)
	// A job failed or deleted while it waits takes no step here again: the
	// watch of its end (tend) ends its waits. Its folder may be another
	// host's, on a shared working area.
	p.tend(s.Job.ID, p.workDir(s.Job))
	wait := backoff.Delay(objectWaitBase, time.Minute, n)
	p.sayWhyItWaits(ctx, s, "waiting "+w.why)
	p.log.Info("waiting for another job or program working on the object", "job", s.Job.ID, "state", s.Job.State(), "why", w.why, "retest_in", wait)
	return reactor.Result{Wait: wait}, true
}

// endWaits forgets job jid's waits in a row: at its step's first outcome
// that is no wait, and once it has failed or ended (tend).
func (p *Pipeline) endWaits(jid string) { p.objectWaits.Delete(jid) }

// lockedElsewhere is the wait for ark's lock of what ("storage",
// "inventory"), held as l says.
func (p *Pipeline) lockedElsewhere(ctx context.Context, what, ark string, l queue.ObjectLock) errObjectBusy {
	why := fmt.Sprintf("for the %s lock of %s, held by ", what, ark)
	if l.Session == 0 {
		return errObjectBusy{fmt.Sprintf("%sno session since %s: a persistent lock (as Merritt's storage service took one, "+
			"and left when it stopped), which stays until deleted; if no Merritt storage service is storing %s, delete its "+
			"ZooKeeper node (`zkCli.sh delete %s`; `ingestq check` lists it) and this job goes on", why, queue.TextTime(l.Since), ark, l.Path)}
	}
	if l.Job != "" {
		why += "job " + l.Job + " on "
	}
	return errObjectBusy{fmt.Sprintf("%s%s since %s; this job goes on once it is let go", why, p.q.SessionHolder(ctx, l.Session), queue.TextTime(l.Since))}
}

// sayWhyItWaits writes msg, why the step's job waits, into its status, for
// `ingestq ls` and `show`; only when it changes (MiB and whole percents
// keep a wait for room's steady), a note of the job's kept.
func (p *Pipeline) sayWhyItWaits(ctx context.Context, s *reactor.Step, msg string) {
	if s.Job.Status.Message != queue.KeepNote(msg, s.Job.Status.Message) {
		if err := s.Checkpoint(ctx, "why it waits", queue.JobChange{Message: msg}); err != nil {
			p.log.Warn("waiting message not written", "job", s.Job.ID, "state", s.Job.State(), "err", err)
		}
	}
}
