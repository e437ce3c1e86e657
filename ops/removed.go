package ops

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor/queue"
)

// replayed gives take the recorded events of f (Recorded), of this queue,
// for at most recordWait; events that cannot be read tell nothing.
func (s *Service) replayed(ctx context.Context, f events.Filter, take func(events.Event)) {
	if s.Recorded == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, recordWait)
	defer cancel()
	_ = s.Recorded(ctx, s.OfQueue(ctx, f), func(ev events.Event) error { take(ev); return nil })
}

// RemovedBy says who removed batch or job id from the queue, and when, as
// the operators' recorded actions tell: " by alice at T (delete)" for the
// delete (the CLI's, the API's or the dashboard's) that removed it, or a
// cleanup that listed the batch; "" when none is recorded (Merritt's sweep
// publishes none) or the events cannot be read. It reads the subjects of
// those two actions only, not the items' moves: a batch may have a
// million. Both subjects are read within one recordWait: a stream that
// does not answer holds a show, a 404 or a page up that long, not twice.
func (s *Service) RemovedBy(ctx context.Context, id string) string {
	ctx, cancel := context.WithTimeout(ctx, recordWait)
	defer cancel()
	var by events.Event
	for _, action := range []string{"delete", "cleanup"} {
		subject := events.Event{Kind: events.KindAdmin, To: action}.Subject()
		s.replayed(ctx, events.Filter{Subject: subject}, func(ev events.Event) {
			if removes(ev, id) {
				by = ev
			}
		})
		if by.To != "" {
			return fmt.Sprintf(" by %s at %s (%s)", cmp.Or(by.Actor, "an operator not named"), stamp(by.Time), by.To)
		}
	}
	return ""
}

// Removed is err, the not found of batch or job id, naming who removed it
// and when (RemovedBy) when the recorded actions tell.
func (s *Service) Removed(ctx context.Context, id string, err error) error {
	what := map[string]string{"jid": "job", "bid": "batch"}[id[:min(3, len(id))]]
	if what == "" || !errors.Is(err, queue.ErrNotFound) || s.CheckEverMade(ctx, id, what) != nil {
		return err // a number never given out: no replay of the stream for a mistyped or probed id
	}
	if by := s.RemovedBy(ctx, id); by != "" {
		return queue.Missing("%s %s was removed from the queue%s", what, id, by)
	}
	return err
}

// removes tells whether operator's action ev removed batch or job id.
func removes(ev events.Event, id string) bool {
	switch {
	case ev.To == "delete" && strings.HasPrefix(id, "jid"):
		return ev.JobID == id && ev.Attrs["removed"] == true // else moved to Deleted, kept
	case ev.To == "delete":
		return ev.BatchID == id && ev.JobID == "" && ev.AccessID == ""
	case ev.To == "cleanup":
		bids, _ := ev.Attrs["removed"].([]any)
		return slices.Contains(bids, any(id))
	}
	return false
}

// BatchReported is the state batch bid last reported (Completed or
// Failed), as its recorded moves tell; "" when none is recorded or the
// events cannot be read. It reads the batch's own subjects only.
func (s *Service) BatchReported(ctx context.Context, bid string) string {
	var to string
	s.replayed(ctx, events.Filter{Subject: "ingestq.batch.*." + bid, BatchID: bid}, func(ev events.Event) {
		if ev.To == string(queue.Completed) || ev.To == string(queue.Failed) {
			to = ev.To
		}
	})
	return to
}
