package reactor

import (
	"testing"
	"time"

	"github.com/ingestq/ingestq/reactor/queue"
)

// The ends a look at every batch checks: Completed or Failed, moved
// between recoverAfter and publishedKeep ago.
func TestEndedLately(t *testing.T) {
	now := time.Now()
	at := func(s queue.State, ago time.Duration) *queue.Batch {
		return &queue.Batch{ID: "bid0000000001", Status: queue.BatchStatus{Status: s, LastModified: now.Add(-ago).Format(queue.TimeLayout)}}
	}
	for _, c := range []struct {
		b    *queue.Batch
		want bool
	}{
		{at(queue.Completed, time.Minute), true},
		{at(queue.Failed, 9*time.Minute), true},
		{at(queue.Completed, 2*time.Second), false}, // its maker's publish may be on its way
		{at(queue.Completed, time.Hour), false},     // past what a daemon remembers of its own
		{at(queue.Reporting, time.Minute), false},   // not an end
		{&queue.Batch{Status: queue.BatchStatus{Status: queue.Completed, LastModified: "yesterday"}}, false},
	} {
		if got := endedLately(c.b, now); got != c.want {
			t.Errorf("%s at %q: ended lately %v, want %v", c.b.State(), c.b.Status.LastModified, got, c.want)
		}
	}
}
