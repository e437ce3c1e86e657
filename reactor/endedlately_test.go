package reactor

import (
	"maps"
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

// A recovered end's counts are the status-report's, given only when they
// are all the batch's jobs.
func TestRecoveredReportAttrs(t *testing.T) {
	report := &queue.StatusReport{SuccessfulJobs: []string{"jid0000000001", "jid0000000002"}, FailedJobs: []string{"jid0000000003"}}
	for _, c := range []struct {
		state    queue.State
		jobCount int
		want     map[string]any
	}{
		{queue.Completed, 3, map[string]any{"successful_count": 2, "failed_count": 1}},
		{queue.Failed, -1, map[string]any{"successful_count": 2, "failed_count": 1}}, // no count recorded: another library made the jobs
		{queue.Completed, 100, nil}, // a windowed batch: its archived jobs are not in the status-report
		{queue.Reporting, 3, nil},   // not an end
	} {
		b := &queue.Batch{Status: queue.BatchStatus{Status: c.state}, Report: report, JobCount: c.jobCount}
		if got := recoveredReportAttrs(b); !maps.Equal(got, c.want) {
			t.Errorf("%s with %d jobs: %v, want %v", c.state, c.jobCount, got, c.want)
		}
	}
}
