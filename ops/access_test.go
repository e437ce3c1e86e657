package ops

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/internal/queuetest"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// An access request's event (→ Pending) names its actor as an operator's
// other changes do: the context's (WithActor: the API's and the
// dashboard's token name), else the Service's (the CLI's user).
func TestAccessRequestEventNamesItsActor(t *testing.T) {
	t.Parallel()
	const ark = "ark:/99999/fk4ops"
	q, bus, inv := accessSetup(t, ark)
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

// accessSetup is a queue, an event bus and an inventory holding ark, for a
// test of access requests.
func accessSetup(t *testing.T, ark string) (*queue.Queue, *events.Bus, *inventory.Local) {
	t.Helper()
	inv, err := inventory.OpenLocal(filepath.Join(t.TempDir(), "inventory.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inv.Close() })
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
	return q, bus, inv
}

// What became of a request no longer to be had is read in one replay of
// the request (events.Replay reads its moves' subjects and the operators'
// actions): an operator's requeue of it is no delete, so a request then
// Deleted by another program names no one, and the operator's delete
// names them, by ref and by bare qid. Before, two replays (moves, then
// ingestq.admin.delete) each named its subject.
func TestWhatBecameOfARequestIsOneReplay(t *testing.T) {
	t.Parallel()
	const ark = "ark:/99999/fk4gone"
	q, bus, inv := accessSetup(t, ark)
	var reads []events.Filter
	s := &Service{Q: q, Publish: bus.Publish, Actor: "carol", Inventory: inv,
		Recorded: func(ctx context.Context, f events.Filter, fn func(events.Event) error) error {
			reads = append(reads, f)
			return bus.Replay(ctx, f, fn)
		}}
	ctx := t.Context()
	v, err := s.RequestAccess(ctx, AccessRequest{ARK: ark, RequestedBy: "carol"})
	if err != nil {
		t.Fatal(err)
	}
	fail := func() {
		t.Helper()
		a, err := q.FindAccess(ctx, v.Ref)
		if err != nil {
			t.Fatal(err)
		}
		if a, _, err = q.AcquireAccessWork(ctx, a.Queue, func(x *queue.Access) bool { return x.ID == a.ID }); err != nil {
			t.Fatal(err)
		}
		if a.State() == queue.Pending {
			if err := q.MoveAccess(ctx, a, queue.Processing, "", nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := q.MoveAccess(ctx, a, queue.Failed, "storage has no such object", nil); err != nil {
			t.Fatal(err)
		}
	}
	fail()
	if _, err := s.RequeueAccess(ctx, v.Ref); err != nil {
		t.Fatal(err)
	}
	fail()
	if _, _, err := q.RemoveAccess(ctx, v.Ref); err != nil { // another program's delete: no event
		t.Fatal(err)
	}
	if err := bus.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	deleted, err := s.ShowAccess(ctx, v.Ref)
	if err != nil || deleted.State != queue.Deleted {
		t.Fatalf("ShowAccess: %+v, %v; want Deleted", deleted, err)
	}
	if err := s.AccessGone(ctx, v.Ref, deleted, nil); err == nil || !strings.Contains(err.Error(), "(who deleted it is not recorded)") {
		t.Errorf("Deleted by another program after an operator's requeue: %v; want who deleted it not recorded", err)
	}
	if len(reads) != 1 || reads[0].Subject != "" || reads[0].AccessID != v.Ref {
		t.Errorf("the recorded events were read %d times, with %+v; want once, the request's subjects (no Subject)", len(reads), reads)
	}

	if _, err := s.DeleteAccess(ctx, v.Ref); err != nil { // Deleted → removed
		t.Fatal(err)
	}
	if err := bus.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	qid := v.Ref[strings.IndexByte(v.Ref, '/')+1:]
	for _, ref := range []string{v.Ref, qid} {
		_, err := s.ShowAccess(ctx, ref)
		if !errors.Is(err, queue.ErrNotFound) {
			t.Fatalf("ShowAccess(%s) of a removed request: %v; want not found", ref, err)
		}
		if err := s.AccessGone(ctx, ref, AccessView{}, err); err == nil || !strings.Contains(err.Error(), "was deleted by carol at ") {
			t.Errorf("AccessGone(%s) of a request the operator deleted: %v; want deleted by carol", ref, err)
		}
	}
}

// Show of a Completed folder package whose host is not among the queue's
// live hosts says so (its URL answers nothing: a folder is served by its
// host alone); one whose host lives, or an S3 one, says nothing of it. The
// request being assembled names the daemon assembling it.
func TestShowSaysAFolderPackagesHostIsNotRunning(t *testing.T) {
	t.Parallel()
	const ark = "ark:/99999/fk4host"
	q, _, inv := accessSetup(t, ark)
	ctx := t.Context()
	if err := q.RegisterHost(ctx, "h1", nil); err != nil {
		t.Fatal(err)
	}
	s := &Service{Q: q, Inventory: inv}
	// completed has a request assembled by h1 (q) into a package at where
	// of host, and returns its view.
	completed := func(where, host string) AccessView {
		t.Helper()
		v, err := s.RequestAccess(ctx, AccessRequest{ARK: ark})
		if err != nil {
			t.Fatal(err)
		}
		a := queuetest.TakeAccess(t, q, v.Ref)
		if v, err = s.ShowAccess(ctx, v.Ref); err != nil || v.Holder == nil || v.Holder.Host != "h1" {
			t.Fatalf("show of %s in Processing: %+v %v, want its holder h1", a.Ref(), v, err)
		}
		queuetest.CompleteAccess(t, q, a, where, host)
		if v, err = s.ShowAccess(ctx, v.Ref); err != nil || v.Holder != nil {
			t.Fatalf("show of Completed %s: %+v %v, want no holder", a.Ref(), v, err)
		}
		return v
	}
	if v := completed("folder", "h2"); s.Unreachable(ctx, v) != "its host h2 is not running: the package is reachable again when h2 is back, or ask again" {
		t.Errorf("show of a package of h2, not running: unreachable %q", s.Unreachable(ctx, v))
	}
	for _, v := range []AccessView{completed("folder", "h1"), completed("s3", "h2")} {
		if got := s.Unreachable(ctx, v); got != "" {
			t.Errorf("show of a package %s of %s: unreachable %q, want none", v.Token.Package.Where, v.Token.Package.Host, got)
		}
	}
}
