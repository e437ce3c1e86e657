package reactor

import (
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/ingestq/ingestq/internal/queuetest"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// The release of an orphaned job lock (this session's, no worker here on
// the job) holds the job while its requests run, as an acquisition does:
// checked unclaimed and then released, two releases of one orphan, one
// after the other, took the lock a worker here acquired between them for
// the orphan. A worker trying to claim the job while the release reads
// the lock finds it held.
func TestAnOrphansReleaseHoldsItsJob(t *testing.T) {
	r := &Reactor{work: t.Context()}
	var mu sync.Mutex
	var jid string
	claimedDuring := map[bool]int{} // a worker's claim tried during a request on the lock: busy → count
	s := queuetest.Session(t, slog.New(slog.DiscardHandler))
	q, err := queue.New(s.Conn, zktest.Root(t), queue.WithLogger(slog.New(queuetest.OnRequest(func(_, path string) {
		mu.Lock()
		defer mu.Unlock()
		if jid != "" && strings.HasSuffix(path, "/jobs/"+jid+"/lock") {
			if _, busy := r.working.LoadOrStore(jid, new(claim)); !busy {
				r.working.Delete(jid) // the worker's claim, dropped again
				claimedDuring[false]++
			} else {
				claimedDuring[true]++
			}
		}
	}))))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Init(t.Context()); err != nil {
		t.Fatal(err)
	}
	r.q = q
	b, err := q.CreateBatch(t.Context(), queue.SubmissionOf(map[string]any{}))
	if err != nil {
		t.Fatal(err)
	}
	j, err := q.CreateJob(t.Context(), b, queue.JobSpec{Priority: 5})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.LockJob(t.Context(), j.ID); err != nil { // the orphan: this session's, no worker's
		t.Fatal(err)
	}
	mu.Lock()
	jid = j.ID
	mu.Unlock()
	released, err := r.releaseOrphanJob(j.ID)
	if err != nil || !released {
		t.Fatalf("the orphaned lock released: %v, %v; want released", released, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if claimedDuring[false] > 0 || claimedDuring[true] == 0 {
		t.Errorf("a worker's claim of the job during the release's requests on its lock: taken %d times, refused %d; want refused each time",
			claimedDuring[false], claimedDuring[true])
	}
	if _, held := r.working.Load(j.ID); held {
		t.Error("the release's claim was not dropped")
	}
}
