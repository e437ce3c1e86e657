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

// LockedBy names who holds a locked job's lock (queue.Holder); "" when the
// job is not locked.
func (x Situation) LockedBy(j *queue.Job) string {
	if !j.Locked {
		return ""
	}
	return queue.Holder(x.hosts[j.LockSession], j.LockSession)
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

// collection is the hold of a job's or batch's collection (its profile),
// when there is one.
func (x Situation) collection(profile string) (time.Time, bool) {
	if profile == "" {
		return time.Time{}, false
	}
	return x.hold("collection", profile)
}

// Releases is how a caller at d releases a Held job or batch (kind): its
// collection's hold first while that is in force (a daemon would hold it
// again at once, and the release is refused), then the item's.
func (x Situation) Releases(kind, id, profile string, d Door) string {
	if _, ok := x.collection(profile); ok {
		return ReleaseOf("collection", profile, d) + ", then " + ReleaseOf(kind, id, d)
	}
	return ReleaseOf(kind, id, d)
}

// HoldOf says of a job or batch (kind) in state that it is Held, since
// when (its last_modified: the move to Held writes it, and nothing else
// does while it is Held), what that stops and how a caller at d releases
// it; "" unless it is Held.
func (x Situation) HoldOf(kind, id string, state queue.State, profile, lastModified string, d Door) string {
	if state != queue.Held {
		return ""
	}
	out := "held"
	if t, ok := queue.NodeTime(lastModified); ok {
		out += " since " + stamp(t)
	}
	out += ": " + HoldEffect(kind, id)
	if since, ok := x.collection(profile); ok {
		out += "; its collection " + profile + " is held too (since " + stamp(since) + "): " +
			quoted(ReleaseOf("collection", profile, d), d) + ", then " + quoted(ReleaseOf(kind, id, d), d)
	} else {
		out += " until " + quoted(ReleaseOf(kind, id, d), d)
	}
	if since, ok := x.hold("queue", queue.QueueIngest); ok {
		out += "; the ingest queue is held too (since " + stamp(since) + "): " + quoted(ReleaseOf("queue", queue.QueueIngest, d), d)
	}
	return out
}

// stamp is an absolute time as text gives it (decision 261).
func stamp(t time.Time) string { return queue.TextTime(t) }

// Rows makes the listing rows of jobs, with who holds each lock, why each
// Held job is held (for a caller at d), and each retried step's attempts.
func (s *Service) Rows(ctx context.Context, jobs []*queue.Job, d Door) []JobRow {
	x := s.Situation(ctx)
	rows := make([]JobRow, len(jobs))
	for i, j := range jobs {
		rows[i] = x.Row(j, d)
	}
	return rows
}

// Row is the job's listing row, with what x knows.
func (x Situation) Row(j *queue.Job, d Door) JobRow {
	r := Row(j)
	r.LockedBy = x.LockedBy(j)
	r.Hold = x.HoldOf("job", j.ID, j.State(), j.Profile(), j.Status.LastModified, d)
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
	since, ok := Situation{holds: holds}.collection(profile)
	if !ok {
		return nil
	}
	first := func(d Door) string {
		return quoted(ReleaseOf("collection", profile, d), d) + " first, then " + quoted(ReleaseOf(kind, id, d), d)
	}
	return queue.Advised(
		fmt.Errorf("%w: %s %s is Held because its collection %s is held (since %s); released now, a daemon would hold it again at once",
			queue.ErrRefused, kind, id, profile, stamp(since)), first(CLI), first(HTTP), first(Dashboard))
}
