package ops

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// An access request's event (→ Pending) names its actor as an operator's
// other changes do: the context's (WithActor: the API's and the
// dashboard's token name), else the Service's (the CLI's user).
func TestAccessRequestEventNamesItsActor(t *testing.T) {
	t.Parallel()
	inv, err := inventory.OpenLocal(filepath.Join(t.TempDir(), "inventory.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inv.Close() })
	const ark = "ark:/99999/fk4ops"
	if err := inv.Record(t.Context(), inventory.Record{ARK: ark, Profile: "demo", Version: 1, Created: time.Now().UTC().Truncate(time.Second),
		Batch: "bid0000000001", Job: "jid0000000001", Files: []inventory.FileRow{{Name: "producer/a.txt", Size: 3, SHA256: strings.Repeat("ab", 32)}}}); err != nil {
		t.Fatal(err)
	}
	q, err := queue.New(zktest.Connect(t), zktest.Root(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Init(t.Context()); err != nil {
		t.Fatal(err)
	}
	bus, err := events.Open(context.Background(), events.Config{DataDir: t.TempDir(), Host: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bus.Close() })
	s := &Service{Q: q, Publish: bus.Publish, Actor: "carol", Inventory: inv}

	byCLI, err := s.RequestAccess(t.Context(), AccessRequest{ARK: ark, RequestedBy: "carol"})
	if err != nil {
		t.Fatal(err)
	}
	byToken, err := s.RequestAccess(WithActor(t.Context(), "deposit-tool"), AccessRequest{ARK: ark, RequestedBy: "dave"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := bus.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	actors := map[string]string{}
	if err := events.Replay(ctx, bus.Conn(), "", events.Filter{}, func(ev events.Event) error {
		if ev.Kind == events.KindAccess && ev.To == string(queue.Pending) {
			actors[ev.AccessID] = ev.Actor
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(actors) != 2 || actors[byCLI.Ref] != "carol" || actors[byToken.Ref] != "deposit-tool" {
		t.Errorf("actors of the requests' events %v; want %s by carol (the Service's), %s by deposit-tool (the context's)",
			actors, byCLI.Ref, byToken.Ref)
	}
}
