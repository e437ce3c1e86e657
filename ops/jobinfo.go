package ops

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// StepAttempts is how a job's current step stands with the reactor's own
// retries (--attempts): Failed of Limit attempts failed, and the step is
// tried again after a backoff. It is read from the status message the
// reactor writes meanwhile ("retrying after error (attempt N of M): …").
// retry_count is another number: the requeues by an operator (mrt-zk's
// meaning), which a step's retries never change.
type StepAttempts struct {
	Failed int `json:"failed"`
	Limit  int `json:"limit"`
}

func (a *StepAttempts) String() string {
	if a == nil {
		return ""
	}
	return fmt.Sprintf("%d of %d failed; retrying", a.Failed, a.Limit)
}

// AttemptsOf reads a job's step attempts from its message: nil unless its
// step is being retried.
func AttemptsOf(j *queue.Job) *StepAttempts {
	msg := j.Status.Message
	if !reactor.Retrying(msg) {
		return nil
	}
	var a StepAttempts
	if _, err := fmt.Sscanf(strings.TrimPrefix(msg, reactor.RetryingPrefix), " (attempt %d of %d)", &a.Failed, &a.Limit); err != nil {
		return nil
	}
	return &a
}

// Situation is what a listing reads once to say more of each item than its
// nodes do: which live host holds a lock (by its session), and the holds in
// force.
type Situation struct {
	hosts map[int64]string // session → host name
	holds []queue.Hold
}

// Situation reads the live hosts and the holds. A part that cannot be read
// is left empty: what it would add is missing, nothing else.
func (s *Service) Situation(ctx context.Context) Situation {
	x := Situation{hosts: map[int64]string{}}
	if hosts, err := s.Q.Hosts(ctx); err == nil {
		for _, h := range hosts {
			x.hosts[h.Session] = h.Name
		}
	}
	x.holds, _ = s.Q.Holds(ctx)
	return x
}

// LockedBy names who holds a locked job's lock: the live ingestq host whose
// session owns it (its host node and the lock have the same ephemeral
// owner), or the session, for another program or a host gone; "" when the
// job is not locked.
func (x Situation) LockedBy(j *queue.Job) string {
	if !j.Locked {
		return ""
	}
	if name, ok := x.hosts[j.LockSession]; ok {
		return name
	}
	return fmt.Sprintf("session 0x%x (no live ingestq host)", j.LockSession)
}

// hold is the hold of a collection, or of the ingest queue.
func (x Situation) hold(kind, name string) (time.Time, bool) {
	for _, h := range x.holds {
		if h.Kind == kind && h.Name == name {
			return h.Since, true
		}
	}
	return time.Time{}, false
}

// HoldOf says why a Held job or batch (kind "job" or "batch") is held and
// what releases it; "" for any other state.
func (x Situation) HoldOf(kind, id string, state queue.State, profile string) string {
	if state != queue.Held {
		return ""
	}
	var out string
	if since, ok := x.hold("collection", profile); ok && profile != "" {
		out = fmt.Sprintf("its collection %s is held since %s: `ingestq release collection %s`, then `ingestq release %s %s`",
			profile, since.Local().Format(time.DateTime), profile, kind, id)
	} else {
		out = fmt.Sprintf("held by an operator, or by a hold of its collection lifted since: `ingestq release %s %s`", kind, id)
	}
	if since, ok := x.hold("queue", queue.QueueIngest); ok {
		out += fmt.Sprintf("; the ingest queue is held too, since %s (`ingestq release queue`)", since.Local().Format(time.DateTime))
	}
	return out
}

// Rows makes the listing rows of jobs, with who holds each lock, why each
// Held job is held, and each retried step's attempts.
func (s *Service) Rows(ctx context.Context, jobs []*queue.Job) []JobRow {
	x := s.Situation(ctx)
	rows := make([]JobRow, len(jobs))
	for i, j := range jobs {
		rows[i] = x.Row(j)
	}
	return rows
}

// Row is the job's listing row, with what x knows.
func (x Situation) Row(j *queue.Job) JobRow {
	r := Row(j)
	r.LockedBy = x.LockedBy(j)
	r.Hold = x.HoldOf("job", j.ID, j.State(), j.Profile())
	return r
}

// collectionHeld refuses to release a Held batch or job (kind, id) while its
// collection is held: a daemon would send it back to Held at once.
func (s *Service) collectionHeld(ctx context.Context, kind, id, profile string) error {
	if profile == "" {
		return nil
	}
	holds, err := s.Q.Holds(ctx)
	if err != nil {
		return err
	}
	since, ok := Situation{holds: holds}.hold("collection", profile)
	if !ok {
		return nil
	}
	what := map[string]string{"job": "jobs", "batch": "batches"}[kind]
	return queue.Advised(
		fmt.Errorf("%w: %s %s is Held because its collection %s is held (since %s); released now, a daemon would hold it again at once",
			queue.ErrRefused, kind, id, profile, since.Local().Format(time.DateTime)),
		fmt.Sprintf("`ingestq release collection %s` first, then `ingestq release %s %s`", profile, kind, id),
		fmt.Sprintf("DELETE /api/v1/holds/collections/%s first, then POST /api/v1/%s/%s/release", profile, what, id))
}
