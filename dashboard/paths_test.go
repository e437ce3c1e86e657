package dashboard_test

import (
	"context"
	"html"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/reactor/queue"
)

// failure is a daemon's message naming a path, a file: URL and a quoted
// path, then what is no server path: a web URL, an ARK and an API request.
const failure = `Downloading failed: write /var/lib/ingestq/work/payload.zip: no space left on device ` +
	`(file:///var/lib/ingestq/work/manifest.txt, "/srv/quoted"); see https://example.org/help, ark:/99999/fk4t1, ` +
	`or POST /api/v1/jobs/JID/requeue`

// What the failure says to a caller below admin.
const failureHidden = `Downloading failed: write [server path hidden]: no space left on device ` +
	`([server path hidden], "[server path hidden]"); see https://example.org/help, ark:/99999/fk4t1, ` +
	`or POST /api/v1/jobs/JID/requeue`

// pathsShown are the paths of the server that the pages below show to an
// admin.
var pathsShown = []string{"/var/lib/ingestq/work/payload.zip", "file:///var/lib/ingestq/work/manifest.txt", `"/srv/quoted"`,
	"/var/lib/ingestq/work/batch", "file:///var/lib/ingestq/access/pkg.zip", "/var/lib/ingestq/access/pkg.zip written",
	"file:///var/lib/ingestq/ocfl/fk4t1"}

// A read or operate user's dashboard shows no path of the server's file
// systems, as the API answers their tokens: not in a job's message (its
// page, its batch's, the job list), its timeline's events, a batch's
// message, an access request's package and message, nor a stored
// object's copies. An admin's shows them. Web URLs, ARKs, the API's
// requests and the dashboard's own links stay.
func TestReadUsersSeeNoServerPaths(t *testing.T) {
	inv, err := inventory.OpenLocal(filepath.Join(t.TempDir(), "inventory.db"))
	must(t, err)
	t.Cleanup(func() { _ = inv.Close() })
	b := setup(t, func(o *options) { o.inventory = inv })
	ctx := t.Context()
	bt := b.batch("uuid-paths")
	jid := b.job(bt, queue.Estimating)
	j, err := b.q.LockJob(ctx, jid)
	must(t, err)
	must(t, b.q.SetJobStatus(ctx, j, queue.Failed, queue.JobChange{Message: failure, Release: true}))
	<-b.bus.PublishAcked(events.Event{Kind: events.KindJob, BatchID: bt.ID, JobID: jid, From: "Estimating", To: "Failed", Message: failure})
	taken, err := b.q.LockBatch(ctx, bt.ID)
	must(t, err)
	must(t, b.q.SetBatchStatus(ctx, taken, queue.Processing, queue.BatchChange{Message: "jobs made in /var/lib/ingestq/work/batch", Release: true}))

	_, err = b.q.CreateAccess(ctx, queue.AccessSmall, queue.AccessToken{Token: "t-paths", ARK: "ark:/99999/fk4t1",
		Format: queue.FormatZip, TokenStatus: queue.TokenNotReady}.Map(nil))
	must(t, err)
	got, _, err := b.q.AcquireAccessWork(ctx, queue.AccessSmall, nil)
	must(t, err)
	ready, err := got.AccessToken()
	must(t, err)
	ready.TokenStatus, ready.URL = queue.TokenReady, "file:///var/lib/ingestq/access/pkg.zip"
	ready.Package = &queue.AccessPackage{Name: "pkg.zip", Size: 10, Expires: time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		Where: "folder", Location: "/var/lib/ingestq/access"}
	must(t, b.q.MoveAccess(ctx, got, queue.Processing, "", nil))
	must(t, b.q.MoveAccess(ctx, got, queue.Completed, "/var/lib/ingestq/access/pkg.zip written", ready.Map(got.Token)))

	must(t, inv.Record(context.Background(), inventory.Record{ARK: "ark:/99999/fk4t1", Profile: "p1", LocalIDs: []string{"loc-1"},
		Version: 1, Created: time.Now().UTC().Truncate(time.Second), Batch: bt.ID, Job: jid, What: "An object",
		Files:    []inventory.FileRow{{Name: "a.txt", Size: 3, SHA256: strings.Repeat("ab", 32)}},
		Replicas: []inventory.Replica{{Target: "local", URL: "file:///var/lib/ingestq/ocfl/fk4t1", Verified: time.Now()}}}))

	pages := []string{"/ui/jobs/" + jid, "/ui/batches/" + bt.ID, "/ui/jobs?state=failed", "/ui/access", "/ui/search?q=ark:/99999/fk4t1"}
	page := func(token string) string {
		var all strings.Builder
		for _, p := range pages {
			a := b.get(token, p)
			a.is(t, http.StatusOK)
			all.WriteString(html.UnescapeString(a.body))
		}
		return all.String()
	}
	for _, token := range []string{readToken, operateToken} {
		seen := page(token)
		for _, p := range append(pathsShown, "/var/lib", "/srv/") {
			if strings.Contains(seen, p) {
				t.Errorf("the %s token sees %q on its pages", strings.Split(token, "-")[0], p)
			}
		}
		for _, want := range []string{failureHidden, "jobs made in [server path hidden]", "[server path hidden] written",
			"local: [server path hidden]", `href="/ui/batches/` + bt.ID + `"`, `href="/ui/jobs/` + jid + `"`} {
			if strings.Count(seen, want) == 0 {
				t.Errorf("the %s token's pages do not hold %q", strings.Split(token, "-")[0], want)
			}
		}
		// The job's page (its message and its timeline's event) and the
		// three job lists: the batch's, the Failed jobs', the search's.
		if n := strings.Count(seen, failureHidden); n != 5 {
			t.Errorf("the failure is shown hidden %d times, want 5 (the job's message and event, the batch's, the Failed jobs' and the search's lists)", n)
		}
	}
	seen := page(adminToken)
	for _, p := range append(pathsShown, failure) {
		if !strings.Contains(seen, p) {
			t.Errorf("the admin token does not see %q on its pages", p)
		}
	}
	if strings.Contains(seen, "[server path hidden]") {
		t.Error("the admin token's pages hide a path")
	}
}

// A page open in a browser, fetched again when a job fails, shows the
// failure's paths hidden to a read user and whole to an admin.
func TestLivePagesHideServerPaths(t *testing.T) {
	b := setup(t)
	bt := b.batch("uuid-live-paths")
	p := newTab(t)
	for _, c := range []struct {
		token, want, not string
	}{{readToken, failureHidden, "/var/lib"}, {adminToken, failure, "[server path hidden]"}} {
		jid := b.job(bt, queue.Estimating)
		p.signIn(b.base, c.token)
		p.open(b.base + "/ui/jobs/" + jid)
		p.seenWhen(`document.getElementById("job-state").dataset.state === "failed"`)
		j, err := b.q.LockJob(t.Context(), jid)
		must(t, err)
		must(t, b.q.SetJobStatus(t.Context(), j, queue.Failed, queue.JobChange{Message: failure, Release: true}))
		p.seen()
		if got := p.text("main"); !strings.Contains(got, c.want) || strings.Contains(got, c.not) {
			t.Errorf("the job's page, live, for the %s token says:\n%s\nwant %q, not %q", strings.Split(c.token, "-")[0], got, c.want, c.not)
		}
		p.noConsoleErrors("live page of a failed job")
	}
}
