package ops

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor/queue"
)

// A batch is named by its bid or by its uuid (submission.batchID).

// IsBatchID tells whether id is a bid ("bid" and digits). Anything else
// names a batch by its uuid, Merritt's too ("bid-" and a UUID).
func IsBatchID(id string) bool { return checkID(id, "bid", "batch") == nil }

// BatchID resolves a bid, or a batch uuid, to a bid. A bid is not looked
// up: an action on it finds out whether it exists.
func (s *Service) BatchID(ctx context.Context, id string) (string, error) {
	if IsBatchID(id) {
		return id, nil
	}
	if err := notAJob(id); err != nil {
		return "", err
	}
	b, err := s.Q.FindBatch(ctx, id)
	if err != nil {
		return "", err
	}
	return b.ID, nil
}

// CheckEverMade refuses, as not found, a batch or job id (bid…, jid…), or
// an access request's ref (small/qid…, qid…), the queue never made:
// neither there nor removed (queue.EverMade). what is "batch", "job" or
// "access request", for the message.
func (s *Service) CheckEverMade(ctx context.Context, id, what string) error {
	made, err := s.Q.EverMade(ctx, id)
	if err != nil {
		return err
	}
	if !made {
		return NeverMade(id, what)
	}
	return nil
}

// NeverMade is the not found of a batch or job id, or an access request
// ref, the queue never made.
func NeverMade(id, what string) error {
	return queue.Missing("%s %s: no such %s (this queue has not made it)", what, id, what)
}

// madeSkew is how much earlier than its queue an event may be stamped and
// still be its: the publishers' clocks against ZooKeeper's.
const madeSkew = time.Minute

// OfQueue narrows a replay's filter to the events this queue can have
// made: none older than the queue (madeSkew aside). A stream kept while
// its queue was made anew (ZooKeeper's data thrown away, the data folder
// kept) holds the old queue's events under the same bids, jids and qids.
// A stream that records another queue's events (a NATS of another queue's
// daemons) is refused. When the queue cannot be read, f is as given.
func (s *Service) OfQueue(ctx context.Context, f events.Filter) events.Filter {
	if made, err := s.Q.Made(ctx); err == nil && made.Add(-madeSkew).After(f.Since) {
		f.Since = made.Add(-madeSkew)
	}
	f.Queue, _ = s.Q.Identity(ctx) // another queue's stream is refused, not read as this one's
	return f
}

// FindBatch reads a batch named by its bid or, failing that, its uuid.
func (s *Service) FindBatch(ctx context.Context, id string) (*queue.Batch, error) {
	if IsBatchID(id) {
		return s.Q.LoadBatch(ctx, id)
	}
	if err := notAJob(id); err != nil {
		return nil, err
	}
	return s.Q.FindBatch(ctx, id)
}

// notAJob refuses a job id where a batch is wanted: looked up as a batch
// uuid, it would only be "not found".
func notAJob(id string) error {
	if strings.HasPrefix(id, "jid") && checkID(id, "jid", "job") == nil {
		return invalid(fmt.Sprintf("%s is a job id; a batch is named by its bid (bid…) or its uuid", id))
	}
	return nil
}

// HoldBatch moves a Pending batch to Held: no daemon makes its jobs.
func (s *Service) HoldBatch(ctx context.Context, id string) (Outcome, error) {
	return s.holdBatch(ctx, id, true)
}

// ReleaseBatch moves a Held batch back to Pending.
func (s *Service) ReleaseBatch(ctx context.Context, id string) (Outcome, error) {
	return s.holdBatch(ctx, id, false)
}

func (s *Service) holdBatch(ctx context.Context, id string, hold bool) (Outcome, error) {
	bid, err := s.BatchID(ctx, id)
	if err != nil {
		return Outcome{}, err
	}
	change, to := s.Q.ReleaseBatch, queue.Pending
	if hold {
		change, to = s.Q.HoldBatch, queue.Held
	} else if b, err := s.Q.LoadBatch(ctx, bid); err == nil && b.State() == queue.Held {
		if err := s.collectionHeld(ctx, "batch", bid, b.Profile()); err != nil {
			return Outcome{}, err
		}
	}
	changed, err := change(s.moving(ctx, holdAction(hold)), bid)
	if err != nil {
		return Outcome{}, err
	}
	if changed {
		s.Announce(ctx, holdAction(hold), events.Event{BatchID: bid})
	}
	return holdOutcome("batch", hold, Outcome{ID: bid, Changed: changed, State: to}), nil
}

// ReportBatch moves a Failed batch to UpdateReporting: a daemon reports it
// again once its requeued jobs are done.
func (s *Service) ReportBatch(ctx context.Context, id string) (Outcome, error) {
	bid, err := s.BatchID(ctx, id)
	if err != nil {
		return Outcome{}, err
	}
	if err := s.nothingToReport(ctx, bid); err != nil {
		return Outcome{}, err
	}
	changed, err := s.Q.ReportBatch(s.moving(ctx, "report"), bid)
	if err != nil {
		return Outcome{}, err
	}
	o := Outcome{ID: bid, Changed: changed, State: queue.UpdateReporting}
	if !changed {
		o.Message = fmt.Sprintf("batch %s was already asked to report again (%s)", bid, queue.UpdateReporting)
		return o, nil
	}
	s.Announce(ctx, "report", events.Event{BatchID: bid})
	o.Message = fmt.Sprintf("batch %s is %s: a daemon will report it again", bid, queue.UpdateReporting)
	return o, nil
}

// DeleteBatch removes a Completed, Failed, Deleted or Held batch with all
// its jobs.
func (s *Service) DeleteBatch(ctx context.Context, id string) (Outcome, error) {
	bid, err := s.BatchID(ctx, id)
	if err != nil {
		return Outcome{}, err
	}
	if err := s.Q.DeleteBatch(ctx, bid); err != nil {
		return Outcome{}, err
	}
	s.Announce(ctx, "delete", events.Event{BatchID: bid})
	return Outcome{ID: bid, Changed: true, Message: fmt.Sprintf("batch %s removed with its jobs", bid)}, nil
}

// nothingToReport refuses to report again a Failed batch that has no job
// left: every job its report named was removed (delete --purge). Reported
// again it could only say so (decision 248).
func (s *Service) nothingToReport(ctx context.Context, bid string) error {
	b, err := s.Q.LoadBatch(ctx, bid)
	if err != nil || b.State() != queue.Failed || b.Report == nil || len(b.Report.SuccessfulJobs)+len(b.Report.FailedJobs) == 0 {
		return nil // the queue's ReportBatch answers
	}
	buckets, err := s.Q.BatchJobs(ctx, bid)
	if err != nil {
		return err
	}
	for _, jids := range buckets {
		if len(jids) > 0 {
			return nil
		}
	}
	if archived, err := s.Q.Archived(ctx, bid); err != nil || archived > 0 {
		return err
	}
	return queue.Advised(
		fmt.Errorf("%w: batch %s has no job left to report: every job its report names was removed (delete --purge), and its report stands as it was sent",
			queue.ErrRefused, bid),
		fmt.Sprintf("`ingestq delete %s` removes the batch", bid),
		fmt.Sprintf("DELETE /api/v1/batches/%s removes the batch", bid), "")
}
