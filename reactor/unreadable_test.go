package reactor_test

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/internal/queuetest"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// Jobs a foreign writer broke (a status that is not JSON, a state no one
// knows, a ref whose job does not exist, a job without its batch) are read
// once each while batches run beside them, and passed over until their
// status changes or the rescan. Each round read and logged them again, and
// a round passing over one a worker was reading woke every pool, so that
// the pools kept each other reading them, thousands of times a second, for
// seconds after the last job ended.
func TestUnreadableJobsAreReadOnceUntilTheyChange(t *testing.T) {
	e := newEnv(t)
	broken := map[string]string{ // jid → its ref
		"jid0000900001": "/jobs/states/pending/05-jid0000900001",
		"jid0000900002": "/jobs/states/pending/05-jid0000900002",
		"jid0000900003": "/jobs/states/pending/05-jid0000900003", // no job
		"jid0000900004": "/jobs/states/estimating/05-jid0000900004",
	}
	conn := zktest.Connect(t)
	for _, n := range [][2]string{ // as a foreign writer leaves them, parents first
		{"/jobs/jid0000900001", ""}, {"/jobs/jid0000900001/status", `{"status": "Pending", `},
		{"/jobs/jid0000900002", ""}, {"/jobs/jid0000900002/status", `{"status": "Frobnicating"}`},
		{"/jobs/jid0000900004", ""}, {"/jobs/jid0000900004/status", `{"status": "Estimating"}`}, // no bid
		{"/jobs/states/estimating", ""}, {broken["jid0000900001"], ""}, {broken["jid0000900002"], ""},
		{broken["jid0000900003"], ""}, {broken["jid0000900004"], ""},
	} {
		if _, err := conn.Create(e.q.Path(n[0]), []byte(n[1]), 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(n[0], err)
		}
	}
	batches := e.outside("ingestq.batch.>")
	var logs logtest.Buffer
	e.daemon("host-a", func(c *reactor.Config) {
		c.Queue = queuetest.Queue(t, c.Session, e.root, slog.New(slog.NewTextHandler(io.MultiWriter(&logs, tWriter{t}), nil)))
		c.Rescan = time.Hour // no rescan reads them again
	})
	for range 5 {
		b := e.submit(map[string]any{"payload_url": "passthrough:4"})
		if rep := e.waitBatch(batches, b.ID); rep.To != "Completed" {
			t.Fatalf("batch %s beside the broken jobs: %s", b.ID, rep.To)
		}
	}
	for jid, ref := range broken {
		if n := len(logs.Lines("queue: skipping", "ref="+ref)); n != 1 {
			t.Errorf("job %s was found unreadable %d times, want once", jid, n)
		}
	}
	// A change of its status is a mend to try at once, not at the rescan.
	if _, err := conn.Set(e.q.Path("/jobs/jid0000900002/status"), []byte(`{"status": "Mended"}`), -1); err != nil {
		t.Fatal(err)
	}
	logs.WaitFor(t, "queue: skipping", "ref="+broken["jid0000900002"], `unknown job state \"Mended\"`)
}
