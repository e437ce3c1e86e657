package ops

import (
	"cmp"
	"context"
	"fmt"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Job actions lock the job for the length of one change (reactor/queue's
// admin actions): a job a daemon is working on is refused, saying what
// would work.

// HoldJob moves a Pending job to Held.
func (s *Service) HoldJob(ctx context.Context, jid string) (Outcome, error) {
	return s.holdJob(ctx, jid, true)
}

// ReleaseJob moves a Held job back to Pending.
func (s *Service) ReleaseJob(ctx context.Context, jid string) (Outcome, error) {
	return s.holdJob(ctx, jid, false)
}

func (s *Service) holdJob(ctx context.Context, jid string, hold bool) (Outcome, error) {
	if err := checkID(jid, "jid", "job"); err != nil {
		return Outcome{}, err
	}
	change, to := s.Q.ReleaseJob, queue.Pending
	if hold {
		change, to = s.Q.HoldJob, queue.Held
	} else if j, err := s.Q.LoadJob(ctx, jid); err == nil && j.State() == queue.Held {
		if err := s.collectionHeld(ctx, "job", jid, j.Profile()); err != nil {
			return Outcome{}, err
		}
	}
	changed, err := change(s.moving(ctx, holdAction(hold)), jid)
	if err != nil {
		return Outcome{}, err
	}
	if changed {
		s.Announce(ctx, holdAction(hold), events.Event{JobID: jid})
	}
	return holdOutcome("job", hold, Outcome{ID: jid, Changed: changed, State: to}), nil
}

// holdAction names the admin event of a hold or a release.
func holdAction(hold bool) string {
	if hold {
		return "hold"
	}
	return "release"
}

// RequeueJob sends a Failed job back to the step after its last successful
// one.
func (s *Service) RequeueJob(ctx context.Context, jid string) (Outcome, error) {
	if err := checkID(jid, "jid", "job"); err != nil {
		return Outcome{}, err
	}
	to, err := s.Q.RequeueJob(s.moving(ctx, "requeue"), jid, "requeued by "+s.actor(ctx))
	if err != nil {
		return Outcome{}, err
	}
	msg := fmt.Sprintf("job %s requeued: it resumes at %s", jid, to)
	o := Outcome{ID: jid, Changed: true, State: to}
	if j, err := s.Q.LoadJob(ctx, jid); err == nil && j.State() == to {
		msg += fmt.Sprintf(" (retry %d)", j.Status.RetryCount)
		if lss := j.Status.LastSuccessfulStatus; to == queue.Pending && lss != nil && *lss == queue.Failed {
			// mrt-zk's admin requeue (setStatusWithRetry) writes it; a
			// requeue leaves it so (a move from Failed is no success).
			msg += "; it starts over: its last_successful_status is Failed (as Merritt's requeue writes it), which does not say where it stopped"
		}
		if refetches(j) {
			msg += "; its object manifest is fetched again, so a fixed manifest is read " +
				"(files already verified are kept)"
		}
		if st, err := s.Q.BatchState(ctx, j.BatchID); err == nil && (st == queue.Completed || st == queue.Failed) {
			// The batch reported already: the job's end will not change
			// that. The event says the fact; each door its way to report.
			msg += fmt.Sprintf("; its batch %s has reported (%s)", j.BatchID, st)
			said := ": once the job is done, "
			o.API = msg + said + "POST /api/v1/batches/" + j.BatchID + "/report reports it again"
			o.Message = msg + said + "`ingestq report " + j.BatchID + "` reports it again"
		}
	}
	s.Announce(ctx, "requeue", events.Event{JobID: jid, Message: msg})
	o.Message = cmp.Or(o.Message, msg)
	return o, nil
}

// refetches tells whether a requeued job fetches its object manifest
// again: it resumes at a step up to Downloading (the handlers' rule).
func refetches(j *queue.Job) bool {
	switch j.State() {
	case queue.Pending, queue.Estimating, queue.Provisioning, queue.Downloading:
		return j.Config.PayloadType == "object_manifest"
	}
	return false
}

// FailJob moves a job to Failed with message ("" for "failed by ACTOR", as
// a cancel writes "cancelled by ACTOR"; the events name the actor either
// way). With force it does so even while a daemon works on it: the daemon's
// view goes stale and it abandons its step.
func (s *Service) FailJob(ctx context.Context, jid, message string, force bool) (Outcome, error) {
	if err := checkID(jid, "jid", "job"); err != nil {
		return Outcome{}, err
	}
	message = cmp.Or(message, "failed by "+s.actor(ctx))
	if err := s.Q.FailJob(s.moving(ctx, "fail"), jid, message, force); err != nil {
		return Outcome{}, err
	}
	s.Announce(ctx, "fail", events.Event{JobID: jid, Message: message})
	return Outcome{ID: jid, Changed: true, State: queue.Failed, Message: fmt.Sprintf("job %s is Failed: %s", jid, message)}, nil
}

// DeleteJob retires a Held or Failed job (Deleted); with purge it removes a
// Held, Failed, Completed or Deleted job from ZooKeeper.
func (s *Service) DeleteJob(ctx context.Context, jid string, purge bool) (Outcome, error) {
	if err := checkID(jid, "jid", "job"); err != nil {
		return Outcome{}, err
	}
	removed, changed, err := s.Q.DeleteJob(s.moving(ctx, "delete"), jid, purge)
	switch {
	case err != nil:
		return Outcome{}, err
	case !changed:
		return Outcome{ID: jid, State: queue.Deleted,
			Message: fmt.Sprintf("job %s was already Deleted (`ingestq delete --purge %s` removes it from ZooKeeper)", jid, jid),
			API:     fmt.Sprintf("job %s was already Deleted (DELETE /api/v1/jobs/%s?purge=true removes it from ZooKeeper)", jid, jid)}, nil
	}
	s.Announce(ctx, "delete", events.Event{JobID: jid, Attrs: map[string]any{"removed": removed}})
	if removed {
		return Outcome{ID: jid, Changed: true, Message: fmt.Sprintf("job %s removed", jid)}, nil
	}
	return Outcome{ID: jid, Changed: true, State: queue.Deleted, Message: fmt.Sprintf("job %s moved to Deleted", jid)}, nil
}
