package reactor

import (
	"encoding/json"
	"slices"

	"github.com/ingestq/ingestq/reactor/queue"
)

// NeedsFiles tells whether a state's step works on the job's downloaded
// files: the states after Downloading.
func NeedsFiles(s queue.State) bool {
	return slices.Index(JobStates, s) > slices.Index(JobStates, queue.Downloading)
}

// heldElsewhere tells whether j's step in s belongs to another daemon: the
// host its configuration names as holding its files (working_host), while
// that host lives and works s. The job is then passed over here until that
// host's node changes or goes (it died: this daemon may take the job over
// and fetch the files again), or the rescan. A job whose host is gone, or
// does not work s, is taken here.
func (r *Reactor) heldElsewhere(s queue.State, j *queue.Job) bool {
	h := j.Config.WorkingHost
	if h == "" || h == r.cfg.Host || !NeedsFiles(s) {
		return false
	}
	host, alive, wait, err := r.q.LiveHost(r.work, h)
	if err != nil {
		// Unknown: not taken over on a read error; looked at again soon.
		r.log.Warn("reactor: cannot tell whether the host holding a job's files lives", "job", j.ID, "files_on", h, "err", err)
		r.passOverJob(s, j.ID, r.cfg.Backoff)
		return true
	}
	if !alive || !works(host.Data, s) {
		return false // taken here: said by tookOver once the lock is won
	}
	r.passOverUntil(s, j.ID, "host "+h, wait)
	return true
}

// works tells whether a host node's description lists state s. One that
// cannot be read is taken to work every state: its daemon is alive, and a
// job is not taken from a live host over an unreadable description.
func works(data []byte, s queue.State) bool {
	var h HostInfo
	if err := json.Unmarshal(data, &h); err != nil || h.States == nil {
		return true
	}
	return h.Works(s)
}
