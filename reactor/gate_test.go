package reactor_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/internal/queuetest"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// A batch's gate job (its first, made by this daemon's batch handler) is
// acquired from the view its batch's move hands over (decision 213): it is
// not read before its first step. Let go before the batch's move, it was
// taken from the Pending folder's listing instead (its status, lock and
// nine more nodes read, then its batch's state). That race went either
// way, so the test runs a dozen one-object batches; the daemon's queue
// logs each request it sends at debug level.
func TestGateJobTakenFromItsView(t *testing.T) {
	e := newEnv(t)
	batches := e.outside("ingestq.batch.>")
	var requests logtest.Buffer
	readBefore := make(chan bool, 1)
	e.daemon("host-a", func(c *reactor.Config) {
		c.Queue = queuetest.Queue(t, c.Session, e.root, slog.New(slog.NewTextHandler(&requests, &slog.HandlerOptions{Level: slog.LevelDebug})))
		next := c.Jobs[queue.Estimating]
		c.Jobs[queue.Estimating] = reactor.JobHandlerFunc(func(ctx context.Context, s *reactor.Step) (reactor.Result, error) {
			readBefore <- strings.Contains(requests.String(), "/jobs/"+s.Job.ID+"/status")
			return next.Handle(ctx, s)
		})
	})
	for i := range 12 {
		b := e.submit(map[string]any{"profile_name": "demo", "payload_url": "passthrough:1"})
		if <-readBefore {
			t.Fatalf("batch %d: its gate job was read before its first step", i)
		}
		if rep := e.waitBatch(batches, b.ID); rep.To != "Completed" {
			t.Fatalf("batch %s", rep.To)
		}
	}
	if !strings.Contains(requests.String(), `msg="zookeeper request" op=get path=`) {
		t.Fatal("the queue logged no request at debug level: the test saw nothing")
	}
}
