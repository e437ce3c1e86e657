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
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
)

// withObject gives a bundle's API a local inventory holding ark, with a
// version of one file (producer/a.txt) of each size.
func withObject(t *testing.T, ark string, sizes ...int64) func(*options) {
	t.Helper()
	inv, err := inventory.OpenLocal(filepath.Join(t.TempDir(), "inventory.db"))
	must(t, err)
	t.Cleanup(func() { _ = inv.Close() })
	for v, size := range sizes {
		must(t, inv.Record(t.Context(), inventory.Record{ARK: ark, Profile: "demo", Version: v + 1, Created: time.Now().UTC().Truncate(time.Second),
			Batch: "bid0000000001", Job: "jid0000000001",
			Files: []inventory.FileRow{{Name: "producer/a.txt", Size: size, SHA256: strings.Repeat("ab", 32)}}}))
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
