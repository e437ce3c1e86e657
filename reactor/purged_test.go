package reactor_test

import (
	"strings"
	"testing"

	"github.com/ingestq/ingestq/events"
)

// A batch whose only job failed and was purged, reported again, does not
// claim Completed with no jobs: it ends Failed, saying every job was
// removed.
func TestBatchOfPurgedJobsDoesNotReportCompleted(t *testing.T) {
	e := newEnv(t)
	batches := e.outside("ingestq.batch.>")
	e.daemon("host-a")
	b, got := e.failedBatch(batches, 1, 0)
	if len(got.Report.FailedJobs) != 1 {
		t.Fatalf("report %+v, want one failed job", got.Report)
	}
	if removed, _, err := e.q.DeleteJob(t.Context(), got.Report.FailedJobs[0], true); err != nil || !removed {
		t.Fatalf("purge: removed %v, %v", removed, err)
	}
	if _, err := e.q.ReportBatch(t.Context(), b.ID); err != nil {
		t.Fatal(err)
	}
	e.bus.Publish(events.Event{Kind: events.KindAdmin, To: "report", BatchID: b.ID})
	if rep := e.waitBatch(batches, b.ID); rep.To != "Failed" {
		t.Fatalf("the batch of no jobs left reported %s → %s, want Failed", rep.From, rep.To)
	}
	got, err := e.q.LoadBatch(t.Context(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got.Status.Message, "every job of the batch was removed") {
		t.Errorf("message %q: want it to say why", got.Status.Message)
	}
	e.clean()
}
