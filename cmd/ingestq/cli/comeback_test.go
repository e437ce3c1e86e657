package cli

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// newQueue is a queue made anew under a root of its own.
func newQueue(t *testing.T) *queue.Queue {
	t.Helper()
	q, err := queue.New(zktest.Connect(t), zktest.Root(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Init(t.Context()); err != nil {
		t.Fatal(err)
	}
	return q
}

// A forgotten host that starts again drops its NATS cluster store only when
// a daemon noted that the cluster removed its server; otherwise (no daemon
// was in a cluster meanwhile) its store may hold the only copy of the
// events, and stays. Either way the note goes.
func TestComeBackDropsTheStoreOnlyOnceRemoved(t *testing.T) {
	t.Parallel()
	q := newQueue(t)
	removed := time.Now().UTC().Truncate(time.Second)
	for _, c := range []struct {
		note     ops.ForgottenNote
		wantKept bool
	}{
		{ops.ForgottenNote{By: "alice", At: removed}, true},
		{ops.ForgottenNote{By: "alice", At: removed, Removed: &removed, RemovedBy: "h1"}, false},
	} {
		dataDir := t.TempDir()
		kept := filepath.Join(events.ClusterStore(dataDir), "jetstream", "kept")
		if err := os.MkdirAll(filepath.Dir(kept), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(kept, []byte("events"), 0o640); err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(c.note)
		if err := q.ForgetHost(t.Context(), "h2", data); err != nil {
			t.Fatal(err)
		}
		n := &natsRoutes{q: q, host: "h2", log: slog.New(slog.DiscardHandler)}
		if err := n.comeBack(t.Context(), dataDir); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(kept); (err == nil) != c.wantKept {
			t.Errorf("note %s: store kept %v, want %v", data, err == nil, c.wantKept)
		}
		if _, forgotten, err := q.Forgotten(t.Context(), "h2"); err != nil || forgotten {
			t.Errorf("note %s: still forgotten %v (%v), want the note gone", data, forgotten, err)
		}
	}
}
