package ops

import (
	"context"
	"errors"

	"golang.org/x/sync/errgroup"

	"github.com/ingestq/ingestq/reactor/queue"
)

// BatchFilter selects batches; an empty field selects all.
type BatchFilter struct {
	State   queue.State
	Profile string
	// Keep, when set, must also pass a batch (the API's scope of a token).
	Keep func(*queue.Batch) bool
}

// BatchList is a page of batches in creation order, with the batches that
// could not be read left out and named in Problems.
type BatchList struct {
	Batches  []*queue.Batch
	Next     string
	Problems []error
}

// errOtherState passes over, unread, a batch a state filter leaves out.
var errOtherState = errors.New("in another state")

// ListBatches lists the batches that pass f, a page at a time.
func (s *Service) ListBatches(ctx context.Context, f BatchFilter, p Page) (BatchList, error) {
	ids, err := s.Q.BatchIDs(ctx)
	if err != nil {
		return BatchList{}, err
	}
	var out BatchList
	keep := func(_ string, b *queue.Batch, err error) bool {
		if err != nil && !errors.Is(err, queue.ErrNotFound) && err != errOtherState { // a batch deleted while listing is no problem
			out.Problems = append(out.Problems, err)
		}
		return err == nil && (f.State == "" || b.State() == f.State) && (f.Profile == "" || b.Profile() == f.Profile) &&
			(f.Keep == nil || f.Keep(b))
	}
	load := func(bid string) (*queue.Batch, error) {
		// A batch in another state costs one read, not seven. One whose status
		// could not be read is loaded whole: LoadBatch tells a batch gone from
		// one without a status (a problem, and maybe in the state asked).
		if f.State != "" {
			if st, err := s.Q.BatchState(ctx, bid); err == nil && st != f.State {
				return nil, errOtherState
			}
		}
		return s.Q.LoadBatch(ctx, bid)
	}
	out.Batches, out.Next = paginate(ids, p, load, keep)
	return out, nil
}

// BatchRow is a batch in a listing.
type BatchRow struct {
	BID          string              `json:"bid"`
	Status       queue.State         `json:"status"`
	UUID         string              `json:"uuid"`
	Profile      string              `json:"profile"`
	Jobs         map[string][]string `json:"jobs"`     // by bucket; null when unreadable
	Archived     int                 `json:"archived"` // a windowed batch's Completed jobs kept in the batch (decision 174)
	Unmade       int                 `json:"unmade"`   // a windowed batch's objects with no job yet
	LastModified string              `json:"last_modified"`
	// Message is the batch's status message: a Pending batch's says why it
	// is not taken yet (its payload server busy, its intake retried), where
	// its 0 jobs alone read as stuck.
	Message string `json:"message"`
}

// BatchRows makes the batches' listing rows, reading each one's buckets (a
// few at a time). A batch whose buckets cannot be read has no jobs, and its
// error at the same index.
func (s *Service) BatchRows(ctx context.Context, batches []*queue.Batch) ([]BatchRow, []error) {
	rows := make([]BatchRow, len(batches))
	errs := make([]error, len(batches))
	var g errgroup.Group
	g.SetLimit(16)
	for i, b := range batches {
		rows[i] = BatchRow{BID: b.ID, Status: b.State(), UUID: b.UUID(), Profile: b.Profile(), LastModified: b.Status.LastModified,
			Message: b.Status.Message}
		g.Go(func() error {
			if rows[i].Jobs, errs[i] = s.Q.BatchJobs(ctx, b.ID); errs[i] == nil {
				rows[i].Archived, errs[i] = s.Q.Archived(ctx, b.ID)
			}
			if errs[i] == nil {
				rows[i].Unmade, errs[i] = s.unmade(ctx, b.ID, rows[i])
			}
			return nil
		})
	}
	_ = g.Wait() // the errors are in errs
	return rows, errs
}

// unmade counts a windowed batch's objects that have no job yet: its feed's
// objects less the jobs made (in a bucket or archived). None once the feed
// has stopped: those objects will have no job.
func (s *Service) unmade(ctx context.Context, bid string, row BatchRow) (int, error) {
	f, err := s.Q.LoadFeed(ctx, bid)
	if err != nil || f == nil || f.Stopped != "" {
		return 0, err
	}
	made := row.Archived
	for _, jids := range row.Jobs {
		made += len(jids)
	}
	return max(f.Objects-made, 0), nil
}
