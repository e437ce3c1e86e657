package api_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/ops"
)

// A request ZooKeeper would not take in one packet (jute.maxbuffer, 1 MB)
// is not sent to it: before, ZooKeeper closed the API's connection at each
// of the request's tries through "the outage", every request of the daemon
// cut off, and the caller got a 503. Refused: a body under 1 MiB whose text
// JSON-escapes to more ("<" is written "\u003c"; 20 s of closes a change),
// a 413 naming the node; an id of 1 MB in a read's URL (two closes a read,
// by any reader).
func TestARequestTooLargeForZooKeeperIsRefused(t *testing.T) {
	t.Parallel()
	const ark = "ark:/99999/fk4big"
	b := setup(t, withObject(t, ark, 3))
	b.publishDemo()
	long := strings.Repeat("<", 190_000) // sent as it is: a body of 190 KB

	b.do("POST", "access", operateToken, `{"ark": "`+ark+`", "requested_by": "`+long+`"}`).problem(t, http.StatusRequestEntityTooLarge, "too-large",
		"access request for "+ark, "a requested_by of 190000 bytes", "/access/small/qid", "/token: a request of about", "jute.maxbuffer")
	var page struct {
		Items []ops.AccessView `json:"items"`
	}
	b.do("GET", "access", readToken, nil).ok(t, http.StatusOK, &page)
	if len(page.Items) != 0 {
		t.Fatalf("requests after the refusal: %+v, want none", page.Items)
	}
	b.do("POST", "batches", operateToken, `{"payload_url": "https://example.org/batch.checkm", "profile": "demo", "submitter": "`+long+`"}`).
		problem(t, http.StatusRequestEntityTooLarge, "too-large", "jute.maxbuffer")
	b.do("GET", "access/small/qid"+strings.Repeat("0", 1_048_500), readToken, nil).problem(t, http.StatusRequestEntityTooLarge, "too-large",
		"(a path of 10485", "jute.maxbuffer")

	// The connection stayed: the next request is answered as usual.
	var v ops.AccessView
	b.do("POST", "access", operateToken, map[string]any{"ark": ark}).ok(t, http.StatusCreated, &v)
}

// A request naming many files of an object with many files is priced by
// name: before, each name was looked for among the version's files, 40,000
// names of 40,000 files took a CPU for half a minute (a minute at 60,000).
func TestARequestForManyFilesIsQuick(t *testing.T) {
	t.Parallel()
	const ark, n = "ark:/99999/fk4many", 40_000
	inv, err := inventory.OpenLocal(filepath.Join(t.TempDir(), "inventory.db"))
	must(t, err)
	t.Cleanup(func() { _ = inv.Close() })
	files := make([]inventory.FileRow, n)
	names := make([]string, n)
	for i := range files {
		names[i] = fmt.Sprintf("producer/f%07d", i)
		files[i] = inventory.FileRow{Name: names[i], Size: 1, SHA256: strings.Repeat("ab", 32)}
	}
	must(t, inv.Record(t.Context(), inventory.Record{ARK: ark, Profile: "demo", Version: 1, Created: time.Now().UTC().Truncate(time.Second),
		Batch: "bid0000000001", Job: "jid0000000001", Files: files}))
	b := setup(t, func(o *options) { o.inventory = inv })

	// A deadline for both answers: seconds now, minutes before (under -race).
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var v ops.AccessView
	b.doIn(ctx, "POST", "access", operateToken, map[string]any{"ark": ark, "files": names}).ok(t, http.StatusCreated, &v)
	if v.Token.ContentBytes != n || len(v.Token.Files) != n {
		t.Fatalf("request: %d bytes, %d files; want %d of each", v.Token.ContentBytes, len(v.Token.Files), n)
	}
	missing := append([]string{"producer/none"}, names[1:]...)
	b.doIn(ctx, "POST", "access", operateToken, map[string]any{"ark": ark, "files": missing}).problem(t, http.StatusNotFound, "not-found",
		`has no file "producer/none"`)
}
