package reactor

import (
	"log/slog"
	"testing"

	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// The holds read at start give way to the watcher's listing when that came
// first: it is the newer (a hold released meanwhile must not come back).
// Without one, what load read stands.
func TestHoldsLoadLeavesTheWatchersView(t *testing.T) {
	q, err := queue.New(zktest.Connect(t), zktest.Root(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Init(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := q.HoldQueue(t.Context(), queue.QueueIngest); err != nil {
		t.Fatal(err)
	}
	if _, err := q.HoldCollection(t.Context(), "frozen"); err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	watched := newHolds(q, quiet, func() {})
	watched.queueChanged(zkwatch.Change{Path: q.Path("/locks/queue"), Rescan: true})
	watched.collectionsChanged(zkwatch.Change{Path: q.Path("/locks/collections"), Rescan: true})
	watched.load(t.Context())
	if watched.queueHeld() || watched.cols["frozen"] {
		t.Fatalf("load overrode the watcher's newer view: queue held %v, collections %v", watched.queueHeld(), watched.cols)
	}
	fresh := newHolds(q, quiet, func() {})
	fresh.load(t.Context())
	if !fresh.queueHeld() || !fresh.cols["frozen"] {
		t.Fatalf("load without a watcher's view: queue held %v, collections %v; want both holds", fresh.queueHeld(), fresh.cols)
	}
}
