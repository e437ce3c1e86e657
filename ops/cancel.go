package ops

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// CancelOutcome is what cancelling a batch did to its jobs.
type CancelOutcome struct {
	Outcome
	Cancelled []string `json:"cancelled"` // jobs now Failed, "cancelled by …"
	Finishing []string `json:"finishing"` // jobs past Processing, left to finish
	Problems  []string `json:"problems"`  // jobs that could not be cancelled, and why
}

// cancelWorkers is how many jobs are cancelled at once.
const cancelWorkers = 16

// CancelBatch stops a batch for who: its jobs that have not reached Storing
// end Failed with "cancelled by who" (a daemon working on one abandons its
// step), those past that finish, and the batch then reports as usual (when
// its last job is done). A batch whose jobs are not made yet ends Deleted.
func (s *Service) CancelBatch(ctx context.Context, id, who string) (CancelOutcome, error) {
	b, err := s.FindBatch(ctx, id)
	if err != nil {
		return CancelOutcome{}, err
	}
	if who != "" {
		ctx = WithActor(ctx, who)
	}
	msg := reactor.CancelledPrefix + s.actor(ctx)
	// Each move is published as it lands (moving): each cancelled job's, as
	// a daemon's would be (its timeline, a waiting submit's count), and a
	// Pending batch's; then the operator's action.
	moves := s.moving(ctx, "cancel")
	out := CancelOutcome{Outcome: Outcome{ID: b.ID, State: b.State()}, Cancelled: []string{}, Finishing: []string{}, Problems: []string{}}
	switch {
	case slices.Contains([]queue.State{queue.Pending, queue.Held, queue.Processing, queue.UpdateReporting}, b.State()):
	case b.State() == queue.Reporting && !b.Locked:
		// Merritt's batch handler leaves its batch so while the jobs run.
	case b.State() == queue.Reporting:
		return out, fmt.Errorf("%w: batch %s is Reporting: its jobs are done, there is nothing to cancel", queue.ErrRefused, b.ID)
	default:
		return out, fmt.Errorf("%w: batch %s is %s: it is done, there is nothing to cancel", queue.ErrRefused, b.ID, b.State())
	}
	pending := b.State() == queue.Pending || b.State() == queue.Held
	if pending {
		// First, so that no daemon makes its jobs meanwhile (a batch a
		// daemon is making them for is refused: it is locked).
		changed, err := s.Q.CancelPendingBatch(moves, b.ID, msg)
		if err != nil {
			return out, err
		}
		out.State, out.Changed = queue.Deleted, changed
	}
	if !pending {
		// A windowed batch makes no more jobs (decision 174); then the
		// ones it has are cancelled.
		if err := s.Q.StopFeeding(ctx, b.ID, msg); err != nil {
			return out, err
		}
	}
	// A Pending batch has jobs only when a daemon died while making them.
	buckets, err := s.Q.BatchJobs(ctx, b.ID)
	if err != nil {
		return out, err
	}
	s.cancelJobs(moves, buckets[queue.BucketProcessing], msg, &out)
	out.Changed = out.Changed || len(out.Cancelled) > 0
	out.Message = fmt.Sprintf("batch %s: %s cancelled (Failed: %s), %s past Processing left to finish; the batch reports when its last job is done",
		b.ID, count(len(out.Cancelled), "job"), msg, count(len(out.Finishing), "job"))
	if pending {
		out.Message = fmt.Sprintf("batch %s cancelled before its jobs were made: it is Deleted", b.ID)
	}
	if len(out.Problems) > 0 {
		out.Message += fmt.Sprintf("; %s not cancelled: %s", count(len(out.Problems), "job"), strings.Join(out.Problems, "; "))
	}
	s.Announce(ctx, "cancel", events.Event{BatchID: b.ID, Message: out.Message,
		Attrs: map[string]any{"cancelled": len(out.Cancelled), "finishing": len(out.Finishing)}})
	return out, nil
}

// cancelJobs cancels each job, a few at a time, sorting them into out.
func (s *Service) cancelJobs(ctx context.Context, jids []string, msg string, out *CancelOutcome) {
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(cancelWorkers)
	for _, jid := range jids {
		g.Go(func() error {
			state, cancelled, err := s.Q.CancelJob(ctx, jid, msg)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, queue.ErrNotFound):
			case err != nil:
				out.Problems = append(out.Problems, jid+": "+err.Error())
			case cancelled:
				out.Cancelled = append(out.Cancelled, jid)
			case !done(state):
				out.Finishing = append(out.Finishing, jid)
			}
			return nil
		})
	}
	_ = g.Wait() // the jobs' errors are in out.Problems
	slices.Sort(out.Cancelled)
	slices.Sort(out.Finishing)
	slices.Sort(out.Problems)
}

// done tells whether a job has left the pipeline.
func done(s queue.State) bool {
	return s == queue.Completed || s == queue.Failed || s == queue.Deleted
}

// count is "1 job", "3 jobs".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
