package reactor

import (
	"fmt"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor/queue"
)

// tookOver says, once this daemon has won j's lock in state s, that it
// takes the job over from another daemon. Said before the lock, as it was
// in the admission, every host that tried the job said it, the winner or
// not.
//
// A job whose files are on a host that is gone (or does not work s; the
// admission let it through, heldElsewhere) is logged. A job its previous
// holder (queue.Job.TakenFrom) took in s and did not move on is taken over
// when that holder's session has ended, its host gone or back with another
// session: logged, and published as the job's progress event, so that
// replay and the timeline explain the silence since its last progress and
// a step run again from its start. A holder whose session lives let the
// job go itself (a wait, a back end away): an ordinary take, not said.
func (r *Reactor) tookOver(s queue.State, j *queue.Job) {
	if h := j.Config.WorkingHost; h != "" && h != r.cfg.Host && NeedsFiles(s) {
		r.log.Info("reactor: taking over a job whose files are on a host that is gone or does not work its state",
			"job", j.ID, "state", s, "files_on", h)
	}
	from := j.TakenFrom
	if from == nil {
		return
	}
	host, alive, _, err := r.q.LiveHost(r.work, from.Host)
	if err != nil {
		r.log.Warn("reactor: cannot tell whether a job's previous holder lives", "job", j.ID, "state", s, "held_by", from.Host, "err", err)
		return
	}
	if alive && host.Session == from.Session {
		return
	}
	msg := fmt.Sprintf("taken over from %s (its session ended) in %s", from.Host, s)
	if from.Host == r.cfg.Host { // this daemon's session expired, and it took the job back
		msg = fmt.Sprintf("taken over from %s's earlier session (it ended) in %s", from.Host, s)
	}
	r.log.Info("reactor: "+msg, "job", j.ID, "state", s, "taken_over_from", from.Host, "session", fmt.Sprintf("0x%x", from.Session))
	r.bus.Publish(events.Event{Kind: events.KindProgress, BatchID: j.BatchID, JobID: j.ID, To: string(s), Message: msg,
		Attrs: map[string]any{"taken_over_from": from.Host}})
}
