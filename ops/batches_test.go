package ops

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/internal/queuetest"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// newQueue is a queue of its own and the session it is on.
func newQueue(t *testing.T) (*queue.Queue, *zkwatch.Session) {
	log := slog.New(slog.DiscardHandler)
	s := queuetest.Session(t, log)
	return queuetest.Queue(t, s, zktest.Root(t), log), s
}

// Merritt's batch uuids start with "bid" (mrt-ingest's MintUtil: "bid-"
// and a UUID): such a uuid finds its batch (show, the API, the dashboard),
// and is not refused as a malformed bid.
func TestMerrittBatchUUIDFindsItsBatch(t *testing.T) {
	t.Parallel()
	q, _ := newQueue(t)
	const uuid = "bid-2b1e7c0a-4f3d-4c61-9a0e-5d7b8c9e1f20"
	b, err := q.CreateBatch(t.Context(), queue.SubmissionOf(map[string]any{"batchID": uuid, "profile": "demo", "type": "batchManifest"}))
	if err != nil {
		t.Fatal(err)
	}
	s := &Service{Q: q}
	for _, id := range []string{uuid, b.ID} {
		found, err := s.FindBatch(t.Context(), id)
		if err != nil || found.ID != b.ID {
			t.Errorf("FindBatch(%s) = %v, %v; want %s", id, found, err, b.ID)
		}
		bid, err := s.BatchID(t.Context(), id)
		if err != nil || bid != b.ID {
			t.Errorf("BatchID(%s) = %q, %v; want %s", id, bid, err, b.ID)
		}
	}
}

// Merritt's batch handler (mrt-ingest's BatchConsumer) moves its batch to
// Reporting and unlocks it as soon as the jobs are made, while they run:
// such a batch can be cancelled, its unfinished jobs end Failed.
func TestCancelABatchMerrittsHandlerLeftReporting(t *testing.T) {
	t.Parallel()
	q, s := newQueue(t)
	conn := s.Conn
	if _, err := q.CreateBatch(t.Context(), queue.SubmissionOf(map[string]any{"profile": "demo"})); err != nil {
		t.Fatal(err)
	}
	b, _, err := q.AcquirePendingBatch(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	j, err := q.CreateJob(t.Context(), b, queue.JobSpec{Priority: 5})
	if err != nil {
		t.Fatal(err)
	}
	// mrt-zk's setStatus(Reporting), then unlock, as Java writes them.
	status := fmt.Sprintf(`{"message":"","status":"Reporting","last_modified":%q}`, time.Now().Format(queue.TimeLayout))
	if _, err := conn.Set(q.Path("/batches/"+b.ID+"/status"), []byte(status), -1); err != nil {
		t.Fatal(err)
	}
	if err := conn.Delete(q.Path("/batches/"+b.ID+"/lock"), -1); err != nil {
		t.Fatal(err)
	}
	out, err := (&Service{Q: q, Actor: "carol"}).CancelBatch(t.Context(), b.ID, "")
	if err != nil || !slices.Equal(out.Cancelled, []string{j.ID}) {
		t.Fatalf("cancel: %+v, %v; want %s cancelled", out, err, j.ID)
	}
	got, err := q.LoadJob(t.Context(), j.ID)
	if err != nil || got.State() != queue.Failed || !strings.HasPrefix(got.Status.Message, "cancelled") {
		t.Fatalf("job %v %v, want Failed, cancelled", got, err)
	}
}
