package reactor

import (
	"github.com/ingestq/ingestq/reactor/queue"
)

// logJobEnd says in the log how a job ended, once it is committed: INFO for
// Completed (with its batch and ARK), WARN for Failed (with the state it
// failed in and why). Other moves are in the event stream only.
func (r *Reactor) logJobEnd(j *queue.Job, from queue.State) {
	switch j.State() {
	case queue.Completed:
		args := []any{"job", j.ID, "batch", j.BatchID}
		if j.Identifiers != nil && j.Identifiers.PrimaryID != "" {
			args = append(args, "ark", j.Identifiers.PrimaryID)
		}
		r.log.Info("reactor: job completed", args...)
	case queue.Failed:
		r.log.Warn("reactor: job failed", "job", j.ID, "batch", j.BatchID, "state", from, "message", j.Status.Message)
	}
}

// logBatchEnd says in the log how a batch's report ended: INFO when it is
// Completed, WARN when Failed, with its jobs' counts.
func (r *Reactor) logBatchEnd(b *queue.Batch) {
	st := b.State()
	if st != queue.Completed && st != queue.Failed {
		return
	}
	args := []any{"batch", b.ID, "state", st}
	if b.Report != nil {
		args = append(args, "completed", len(b.Report.SuccessfulJobs), "failed", len(b.Report.FailedJobs))
	}
	if b.Status.Message != "" {
		args = append(args, "message", b.Status.Message)
	}
	if st == queue.Completed {
		r.log.Info("reactor: batch reported", args...)
	} else {
		r.log.Warn("reactor: batch reported", args...)
	}
}
