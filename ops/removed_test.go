package ops

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/internal/natstest"
)

// RemovedBy names the operator whose recorded action removed a batch or a
// job: a batch's delete or a cleanup listing it, a job's delete that
// removed it (not one that moved it to Deleted, nor a delete of one of the
// batch's jobs); nothing when no action is recorded.
func TestRemovedByNamesTheOperatorsAction(t *testing.T) {
	t.Parallel()
	q, bus, _ := accessSetup(t, "ark:/99999/fk4removed")
	s := &Service{Q: q, Publish: bus.Publish, Recorded: bus.Replay, Actor: "carol"}
	ctx := t.Context()
	s.Announce(ctx, "delete", events.Event{BatchID: "bid0000000007", JobID: "jid0000000001", Attrs: map[string]any{"removed": true}})
	s.Announce(ctx, "delete", events.Event{JobID: "jid0000000002", Attrs: map[string]any{"removed": false}})
	s.Announce(ctx, "delete", events.Event{BatchID: "bid0000000001"})
	s.Actor = "dave"
	s.Announce(ctx, "cleanup", events.Event{Attrs: map[string]any{"removed": []string{"bid0000000002", "bid0000000003"}}})
	if err := bus.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{
		"bid0000000001": " by carol at ", "bid0000000003": " by dave at ", "jid0000000001": " by carol at ",
		"bid0000000007": "", "jid0000000002": "", "bid0000000009": "",
	} {
		got := s.RemovedBy(ctx, id)
		if want == "" && got != "" || !strings.HasPrefix(got, want) {
			t.Errorf("RemovedBy(%s) = %q, want it to start %q", id, got, want)
		}
	}
	if got := s.RemovedBy(ctx, "bid0000000002"); !strings.HasSuffix(got, " (cleanup)") {
		t.Errorf("RemovedBy of a batch cleanup removed = %q, want it to name cleanup", got)
	}
}

// RemovedBy gives up within recordWait when the event stream does not
// answer (NATS down, the bus reconnecting): a removed batch's show, API 404
// and dashboard page wait that long at most. Before, the delete subject's
// replay and the cleanup subject's each had recordWait of their own: 20 s.
func TestRemovedByWaitsOneRecordWaitForAStreamDown(t *testing.T) {
	t.Parallel()
	q, _, _ := accessSetup(t, "ark:/99999/fk4down")
	ns := natstest.Run(t, &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true,
		StoreDir: t.TempDir(), NoSigs: true, NoLog: true})
	bus, err := events.Open(t.Context(), events.Config{URL: ns.ClientURL(), Host: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bus.Close() })
	ns.Shutdown()
	s := &Service{Q: q, Publish: bus.Publish, Recorded: bus.Replay}
	began := time.Now()
	if got := s.RemovedBy(t.Context(), "bid0000000001"); got != "" {
		t.Errorf("RemovedBy with the stream down = %q, want nothing", got)
	}
	if took := time.Since(began); took > recordWait+3*time.Second {
		t.Errorf("RemovedBy with the stream down took %v, want at most recordWait (%v) and a little", took.Round(time.Second), recordWait)
	}
}
