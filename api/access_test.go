package api_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/internal/queuetest"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// withObject gives a bundle's API a local inventory holding ark, with a
// version of one file (producer/a.txt) of each size.
func withObject(t *testing.T, ark string, sizes ...int64) func(*options) {
	return withObjects(t, map[string]string{ark: "demo"}, sizes...)
}

// withObjects is withObject for several objects, by ARK their profile.
func withObjects(t *testing.T, profileOf map[string]string, sizes ...int64) func(*options) {
	t.Helper()
	inv, err := inventory.OpenLocal(filepath.Join(t.TempDir(), "inventory.db"))
	must(t, err)
	t.Cleanup(func() { _ = inv.Close() })
	for ark, prof := range profileOf {
		for v, size := range sizes {
			must(t, inv.Record(t.Context(), inventory.Record{ARK: ark, Profile: prof, Version: v + 1, Created: time.Now().UTC().Truncate(time.Second),
				Batch: "bid0000000001", Job: "jid0000000001",
				Files: []inventory.FileRow{{Name: "producer/a.txt", Size: size, SHA256: strings.Repeat("ab", 32)}}}))
		}
	}
	return func(o *options) { o.inventory = inv }
}

// Access requests through the API: estimated from the inventory, on the
// small or the large queue, refused with the CLI's messages for what the
// inventory lacks; listed, read, requeued and deleted by queue/qid, each
// with its role.
func TestAccessRoutes(t *testing.T) {
	t.Parallel()
	const ark = "ark:/99999/fk4acc"
	b := setup(t, withObject(t, ark, 3, 2<<30)) // v2 is over the default threshold of 1 GiB

	b.do("POST", "access", "", map[string]any{"ark": ark}).problem(t, 401, "unauthorized")
	b.do("POST", "access", readToken, map[string]any{"ark": ark}).problem(t, 403, "forbidden")
	var small, large ops.AccessView
	a := b.do("POST", "access", operateToken, map[string]any{"ark": ark, "version": 1, "format": "tar.gz"})
	a.ok(t, http.StatusCreated, &small)
	if small.Queue != queue.AccessSmall || small.State != queue.Pending || small.Token.ContentBytes != 3 || small.Token.RequestedBy != "alice" ||
		small.Token.Format != queue.FormatTarGz || a.header.Get("Location") != "/api/v1/access/"+small.Ref {
		t.Fatalf("small request: %+v, Location %s", small, a.header.Get("Location"))
	}
	b.do("POST", "access", operateToken, map[string]any{"ark": ark}).ok(t, http.StatusCreated, &large)
	if large.Queue != queue.AccessLarge || large.Token.ContentBytes != 3+2<<30 || large.Token.Version != 0 {
		t.Fatalf("whole object: %+v, want the large queue", large)
	}
	b.do("POST", "access", operateToken, map[string]any{"ark": "ark:/99999/fk4none"}).problem(t, 404, "not-found", "object ark:/99999/fk4none is not in the inventory")
	b.do("POST", "access", operateToken, map[string]any{"ark": ark, "version": 5}).problem(t, 404, "not-found", "has no version 5 (it has versions 1 to 2)")
	b.do("POST", "access", operateToken, map[string]any{"ark": ark, "files": []string{"producer/b.txt"}}).problem(t, 404, "not-found", `has no file "producer/b.txt"`)
	b.do("POST", "access", operateToken, map[string]any{"ark": ark, "format": "rar"}).problem(t, 400, "invalid", `format "rar"`)
	// 0 and below are no version; leaving version out asks for every one.
	for _, v := range []int{0, -1} {
		b.do("POST", "access", operateToken, map[string]any{"ark": ark, "version": v}).problem(t, 400, "invalid",
			fmt.Sprintf("version %d: want 1 or more", v))
	}
	b.do("POST", "access", operateToken, map[string]any{"ark": ark, "size": 1}).problem(t, 400, "invalid", "size")

	var page struct {
		Items []ops.AccessView `json:"items"`
	}
	b.do("GET", "access", readToken, nil).ok(t, http.StatusOK, &page)
	if len(page.Items) != 2 || page.Items[0].Ref != small.Ref || page.Items[1].Ref != large.Ref {
		t.Fatalf("list: %+v", page.Items)
	}
	b.do("GET", "access?state=pending", readToken, nil).ok(t, http.StatusOK, &page)
	if len(page.Items) != 2 {
		t.Fatalf("pending: %+v", page.Items)
	}
	b.do("GET", "access?state=Lost", readToken, nil).problem(t, 400, "invalid", "unknown access state")
	var got ops.AccessView
	b.do("GET", "access/"+large.Ref, readToken, nil).ok(t, http.StatusOK, &got)
	if got.Ref != large.Ref || got.Token.ARK != ark {
		t.Fatalf("get: %+v", got)
	}
	b.do("GET", "access/medium/qid0000000000", readToken, nil).problem(t, 400, "invalid", "small/qid…, large/qid… or qid…")
	b.do("GET", "access/small/qid0000000099", readToken, nil).problem(t, 404, "not-found", "qid0000000099")
	b.do("POST", "access/"+small.Ref+"/requeue", operateToken, nil).problem(t, 409, "refused", "is Pending; only a Failed request can be requeued")
	b.do("DELETE", "access/"+small.Ref, operateToken, nil).problem(t, 403, "forbidden")
	b.do("DELETE", "access/"+small.Ref, adminToken, nil).problem(t, 409, "refused", "only a Failed, Completed or Deleted request can be deleted")
}

// An access request's event (→ Pending) names who asked, by the token's
// name, as every other change through the API does: in the event stream,
// and in what events replay reads. requested_by, whom the package is for,
// does not replace it.
func TestAccessRequestNamesItsActor(t *testing.T) {
	t.Parallel()
	const ark = "ark:/99999/fk4actor"
	b := setup(t, withObject(t, ark, 3))

	var mine, forBob ops.AccessView
	b.do("POST", "access", operateToken, map[string]any{"ark": ark}).ok(t, http.StatusCreated, &mine)
	b.do("POST", "access", adminToken, map[string]any{"ark": ark, "requested_by": "bob"}).ok(t, http.StatusCreated, &forBob)
	flush(t, b.bus)
	for ref, want := range map[string]string{mine.Ref: "alice", forBob.Ref: "admin token"} {
		s := b.openStream("since=1h&access=" + ref)
		if ev := s.next(t); ev.Kind != events.KindAccess || ev.To != string(queue.Pending) || ev.Actor != want {
			t.Errorf("%s: event %+v; want its → Pending by %q", ref, ev, want)
		}
		s.cancel()
	}
	var replayed []events.Event
	must(t, events.Replay(t.Context(), b.bus.Conn(), "", events.Filter{AccessID: forBob.Ref}, func(ev events.Event) error {
		replayed = append(replayed, ev)
		return nil
	}))
	if len(replayed) != 1 || replayed[0].Actor != "admin token" || replayed[0].Attrs["ark"] != ark {
		t.Errorf("replayed %+v; want the request's event by \"admin token\"", replayed)
	}
}

// failedAccess asks for ark through the API and has it fail, as a daemon
// that cannot assemble it does; it returns the request.
func (b *bundle) failedAccess(ark string) ops.AccessView {
	b.t.Helper()
	var v ops.AccessView
	b.do("POST", "access", operateToken, map[string]any{"ark": ark}).ok(b.t, http.StatusCreated, &v)
	a, err := b.q.FindAccess(b.t.Context(), v.Ref)
	must(b.t, err)
	a, _, err = b.q.AcquireAccessWork(b.t.Context(), a.Queue, func(x *queue.Access) bool { return x.ID == a.ID })
	must(b.t, err)
	must(b.t, b.q.MoveAccess(b.t.Context(), a, queue.Processing, "", nil))
	must(b.t, b.q.MoveAccess(b.t.Context(), a, queue.Failed, "storage has no such object", nil))
	return v
}

// deletedAt is when request ref became Deleted, as the API says it.
func (b *bundle) deletedAt(ref string) string {
	b.t.Helper()
	a, err := b.q.FindAccess(b.t.Context(), ref)
	must(b.t, err)
	at, ok := queue.NodeTime(a.Status.LastModified)
	if a.State() != queue.Deleted || !ok {
		b.t.Fatalf("access request %s: %s at %q, want Deleted", ref, a.State(), a.Status.LastModified)
	}
	return queue.TextTime(at) // a sentence's time, as every door words it
}

// A request that was made and is no more to be had is 410 Gone, saying
// what became of it and how to ask again: Deleted (the node kept, its
// deleter from the delete's event, else not recorded), deleted by an
// operator and removed (the delete's event), removed by a program that
// records no events, as mrt-zk's delete (its recorded moves tell it was
// made). GET, requeue and DELETE answer so alike. Only a request neither
// the queue nor the events know of is 404.
func TestRemovedAccessRequestIsGone(t *testing.T) {
	t.Parallel()
	const ark = "ark:/99999/fk4gone"
	b := setup(t, withObject(t, ark, 3))
	ctx := t.Context()
	again := `ask again with POST /api/v1/access {"ark": "` + ark + `"}`

	// Deleted by an operator: kept, then removed.
	op := b.failedAccess(ark)
	b.do("DELETE", "access/"+op.Ref, adminToken, nil).ok(t, http.StatusOK, nil)
	flush(t, b.bus)
	deleted := "access request " + op.Ref + " was deleted by admin token at " + b.deletedAt(op.Ref)
	b.do("GET", "access/"+op.Ref, readToken, nil).problem(t, http.StatusGone, "gone", deleted, again)
	var listed struct{ Items []ops.AccessView }
	b.do("GET", "access?state=Deleted", readToken, nil).ok(t, http.StatusOK, &listed)
	if len(listed.Items) != 1 || listed.Items[0].Ref != op.Ref {
		t.Errorf("Deleted requests listed: %+v; want %s", listed.Items, op.Ref)
	}
	b.do("DELETE", "access/"+op.Ref, adminToken, nil).ok(t, http.StatusOK, nil)
	flush(t, b.bus)
	removed := b.do("GET", "access/"+op.Ref, readToken, nil).problem(t, http.StatusGone, "gone",
		"access request "+op.Ref+" was deleted by admin token at ", again)
	b.do("POST", "access/"+op.Ref+"/requeue", operateToken, nil).problem(t, http.StatusGone, "gone", removed.Detail)
	b.do("DELETE", "access/"+op.Ref, adminToken, nil).problem(t, http.StatusGone, "gone", removed.Detail)

	// Deleted by another program: no delete event names who.
	other := b.failedAccess(ark)
	a, err := b.q.FindAccess(ctx, other.Ref)
	must(t, err)
	_, _, err = b.q.RemoveAccess(ctx, a.Ref())
	must(t, err)
	b.do("GET", "access/"+other.Ref, readToken, nil).problem(t, http.StatusGone, "gone",
		"access request "+other.Ref+" was deleted at "+b.deletedAt(other.Ref)+" (who deleted it is not recorded)", again)

	// Removed as mrt-zk's delete does (the node and its children), with
	// no event: the request's recorded moves tell it was made.
	var pending ops.AccessView
	b.do("POST", "access", operateToken, map[string]any{"ark": ark}).ok(t, http.StatusCreated, &pending)
	flush(t, b.bus)
	conn := zktest.Connect(t)
	removeTree := func(ref string) {
		p := b.q.Path("/access/" + ref)
		kids, _, err := conn.Children(p)
		must(t, err)
		for _, k := range kids {
			must(t, conn.Delete(p+"/"+k, -1))
		}
		must(t, conn.Delete(p, -1))
	}
	removeTree(pending.Ref)
	b.do("GET", "access/"+pending.Ref, readToken, nil).problem(t, http.StatusGone, "gone",
		"access request "+pending.Ref+" is no longer in the queue, and no event records who removed it (its last recorded move: Pending at ", again)

	// A request of another program, removed by it: nothing is known.
	foreign, err := b.q.CreateAccess(ctx, queue.AccessSmall, map[string]any{"token": "merritt"})
	must(t, err)
	removeTree(foreign.Ref())
	b.do("GET", "access/"+foreign.Ref(), readToken, nil).problem(t, http.StatusNotFound, "not-found", foreign.ID)
	b.do("GET", "access/small/qid0000000099", readToken, nil).problem(t, http.StatusNotFound, "not-found", "qid0000000099")

	// A delete event that names no one (an older ingestq's) says so.
	unnamed := b.failedAccess(ark)
	removeTree(unnamed.Ref)
	b.bus.Publish(events.Event{Kind: events.KindAdmin, To: "delete", AccessID: unnamed.Ref})
	flush(t, b.bus)
	b.do("GET", "access/"+unnamed.Ref, readToken, nil).problem(t, http.StatusGone, "gone",
		"access request "+unnamed.Ref+" was deleted at ", " (who deleted it is not recorded)", again)

	// Events older than the queue are another queue's (a stream kept while
	// its queue was made anew): a request only they name is not found.
	b.bus.Publish(events.Event{Time: time.Now().Add(-2 * time.Hour), Kind: events.KindAccess, AccessID: "small/qid0000000098",
		To: "Completed", Attrs: map[string]any{"ark": ark}})
	flush(t, b.bus)
	b.do("GET", "access/small/qid0000000098", readToken, nil).problem(t, http.StatusNotFound, "not-found", "qid0000000098")
}

// GET /access with a state reads each request's status alone, and the
// rest of the requests in that state only: 2 listings, 40 statuses and 4
// nodes of each of the 2 Failed requests; it read every node of all 40.
func TestAccessListReadsWhatItLists(t *testing.T) {
	t.Parallel()
	const ark = "ark:/99999/fk4reads"
	b := setup(t, withObject(t, ark, 3))
	var failed []string
	for i := range 40 {
		if i%20 == 0 {
			failed = append(failed, b.failedAccess(ark).Ref)
			continue
		}
		_, err := b.q.CreateAccess(t.Context(), queue.AccessSmall, queue.AccessToken{Token: fmt.Sprint(i), ARK: ark}.Map(nil))
		must(t, err)
	}
	reads0, _ := b.q.Requests()
	var page struct{ Items []ops.AccessView }
	b.do("GET", "access?state=Failed", readToken, nil).ok(t, http.StatusOK, &page)
	reads, _ := b.q.Requests()
	if len(page.Items) != 2 || page.Items[0].Ref != failed[0] || page.Items[1].Ref != failed[1] {
		t.Fatalf("Failed requests: %+v; want %v", page.Items, failed)
	}
	if want := uint64(2 + 40 + 4*2); reads-reads0 != want {
		t.Errorf("GET /access?state=Failed read %d nodes; want %d", reads-reads0, want)
	}
}

// GET of a request names the host assembling it while it is Processing,
// and says when its Completed package's folder is on a host that is not
// running.
func TestAccessSaysWhoAssemblesItAndWhetherItsHostRuns(t *testing.T) {
	t.Parallel()
	const ark = "ark:/99999/fk4who"
	b := setup(t, withObject(t, ark, 3))
	ctx := t.Context()
	var v, got ops.AccessView
	b.do("POST", "access", operateToken, map[string]any{"ark": ark}).ok(t, http.StatusCreated, &v)
	dq, err := queue.New(zktest.Connect(t), b.root) // a daemon's, on host h1
	must(t, err)
	must(t, dq.RegisterHost(ctx, "h1", nil))
	a := queuetest.TakeAccess(t, dq, v.Ref)
	b.do("GET", "access/"+v.Ref, readToken, nil).ok(t, http.StatusOK, &got)
	if got.State != queue.Processing || got.Holder == nil || got.Holder.Host != "h1" || got.Unreachable != "" {
		t.Fatalf("GET in Processing: %+v, want holder h1", got)
	}
	queuetest.CompleteAccess(t, dq, a, "folder", "h9")
	got = ops.AccessView{}
	b.do("GET", "access/"+v.Ref, readToken, nil).ok(t, http.StatusOK, &got)
	if want := "its host h9 is not running: the package is reachable again when h9 is back, or ask again"; got.Holder != nil || got.Unreachable != want {
		t.Fatalf("GET of a package of h9: %+v, want no holder, unreachable %q", got, want)
	}
}

// A body over the limit says what to send instead: an access request's is
// its list of files, so fewer files a request, or a whole version; any
// other, less in each request. Before, it said "body over 1048576 bytes".
func TestABodyTooLargeSaysWhatToSendInstead(t *testing.T) {
	t.Parallel()
	b := setup(t, withObject(t, "ark:/99999/fk4big", 3))
	files := make([]string, 60_000)
	for i := range files {
		files[i] = fmt.Sprintf("producer/file-%06d.txt", i)
	}
	b.do("POST", "access", operateToken, map[string]any{"ark": "ark:/99999/fk4big", "files": files}).problem(t, http.StatusRequestEntityTooLarge,
		"too-large", "body over 1048576 bytes (1 MiB): name fewer files in each request (ask in several), or leave files out to ask for a whole version")
	b.do("POST", "batches", operateToken, map[string]any{"profile": "demo", "payload": strings.Repeat("x", 1<<20)}).problem(t,
		http.StatusRequestEntityTooLarge, "too-large", "body over 1048576 bytes (1 MiB): send less in each request")
}
