package reactor

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

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
// session (takenOver): logged, and published as the job's progress event, so that
// replay and the timeline explain the silence since its last progress and
// a step run again from its start. A holder whose session lives let the
// job go itself (a wait, a back end away): an ordinary take, not said. A
// job this host held before its restart is resumed (resumeAfterRestart).
func (r *Reactor) tookOver(s queue.State, j *queue.Job) {
	if h := j.Config.WorkingHost; h != "" && h != r.cfg.Host && NeedsFiles(s) {
		r.log.Info("reactor: taking over a job whose files are on a host that is gone or does not work its state",
			"job", j.ID, "state", s, "files_on", h)
	}
	if held := j.Status.Holder; held != nil {
		r.sessions.LoadOrStore(held.Session, true)
	}
	from := j.TakenFrom
	if from != nil && from.Host == r.cfg.Host {
		if _, ours := r.sessions.Load(from.Session); !ours {
			r.resumeAfterRestart(s, j, from)
			return
		}
	}
	if msg := r.takenOver(from, s, "job", j.ID); msg != "" {
		r.bus.Publish(events.Event{Kind: events.KindProgress, BatchID: j.BatchID, JobID: j.ID, To: string(s), Message: msg,
			Attrs: map[string]any{"taken_over_from": from.Host}})
	}
}

// takenOver tells whether this daemon, having acquired an item (named by
// item, a log attribute pair) in state s from holder from (its status
// named that holder, queue's TakenFrom), takes it over: from's session
// has ended. It logs it and returns the words its event says; "" when
// from is nil or its session lives (it let the item go itself).
func (r *Reactor) takenOver(from *queue.JobHolder, s queue.State, item ...any) string {
	if from == nil {
		return ""
	}
	host, alive, _, err := r.q.LiveHost(r.work, from.Host)
	if err != nil {
		r.log.Warn("reactor: cannot tell whether the previous holder lives", append(item, "state", s, "held_by", from.Host, "err", err)...)
		return ""
	}
	if alive && host.Session == from.Session {
		return ""
	}
	msg := fmt.Sprintf("taken over from %s (its session ended) in %s", from.Host, s)
	if from.Host == r.cfg.Host { // this daemon's session expired, and it took the item back
		msg = fmt.Sprintf("taken over from %s's earlier session (it ended) in %s", from.Host, s)
	}
	r.log.Info("reactor: "+msg, append(item, "state", s, "taken_over_from", from.Host, "session", fmt.Sprintf("0x%x", from.Session))...)
	return msg
}

// resumeAfterRestart says that this host resumes j in s, which it held
// under from, a session of the process it ran before its restart (a stop,
// a crash): the job's progress event says so, for replay and the timeline
// (its step runs again from its start), and the log says how many jobs
// were resumed together, in one line (resumed). Each said it was taken
// over from this very host: a line and an event per job of a restart.
func (r *Reactor) resumeAfterRestart(s queue.State, j *queue.Job, from *queue.JobHolder) {
	session := fmt.Sprintf("0x%x", from.Session)
	msg := fmt.Sprintf("resumed after this host's restart in %s", s)
	r.log.Debug("reactor: "+msg, "job", j.ID, "state", s, "session", session)
	r.bus.Publish(events.Event{Kind: events.KindProgress, BatchID: j.BatchID, JobID: j.ID, To: string(s), Message: msg,
		Attrs: map[string]any{"resumed_from_session": session}})
	r.resumed.add(r.log)
}

// resumedWindow is how long after the first job resumed after a restart
// the count is said: a restart's pools take every job they can at their
// first listing, well within it. A job taken later (its state's workers
// busy till then) starts a count of its own.
const resumedWindow = 5 * time.Second

// resumed counts the jobs resumed after this host's restart, said in one
// log line resumedWindow after the first, or at the reactor's stop.
type resumed struct {
	mu    sync.Mutex
	n     int
	timer *time.Timer
}

func (c *resumed) add(log *slog.Logger) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	if c.timer == nil {
		c.timer = time.AfterFunc(resumedWindow, func() { c.say(log) })
	}
}

// say logs the count, if any, and starts a new one.
func (c *resumed) say(log *slog.Logger) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.n > 0 {
		log.Info("reactor: resumed the jobs this host held before its restart", "jobs", c.n)
	}
	c.n, c.timer = 0, nil
}
