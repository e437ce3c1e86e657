package dashboard_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Every page, signed in through the form, renders in Chromium with its
// live stream connected and nothing said on the console.
func TestPagesRenderWithoutConsoleErrors(t *testing.T) {
	b := setup(t)
	bt := b.batch("uuid-pages")
	pending := b.job(bt)
	b.job(bt, queue.Held)
	failed := b.job(bt, queue.Estimating, queue.Failed)
	b.job(bt, queue.Estimating, queue.Provisioning, queue.Downloading, queue.Processing, queue.Storing,
		queue.Recording, queue.Notify, queue.Completed)
	if _, err := b.q.HoldCollection(t.Context(), "p9"); err != nil {
		t.Fatal(err)
	}
	access, err := b.q.CreateAccess(t.Context(), queue.AccessSmall, queue.AccessToken{Token: "t1", ARK: "ark:/99999/fk4pages",
		Format: queue.FormatTarGz, TokenStatus: queue.TokenNotReady}.Map(nil))
	if err != nil {
		t.Fatal(err)
	}

	p := newTab(t)
	p.signIn(b.base, readToken)
	p.noConsoleErrors("sign in")
	for _, pg := range []struct {
		name, path, sel, want string
	}{
		{"overview", "/", `tr[data-state="failed"] td[data-count]`, "1"},
		{"batches", "/ui/batches", `tr[data-bid="` + bt.ID + `"]`, "2 / 4"},
		{"batch", "/ui/batches/" + bt.ID, `tr[data-jid="` + failed + `"]`, "Failed"},
		{"jobs", "/ui/jobs?state=pending", `tr[data-jid="` + pending + `"]`, "Pending"},
		{"job", "/ui/jobs/" + failed, "#job-state", "Failed"},
		{"search", "/ui/search?q=loc-1", `tr[data-jid="` + pending + `"]`, "loc-1"},
		{"access", "/ui/access", `tr[data-ref="small/` + access.ID + `"]`, "whole object, tar.gz"},
	} {
		p.open(b.base + pg.path)
		if got := p.text(pg.sel); !strings.Contains(got, pg.want) {
			t.Errorf("%s: %s says %q, want %q", pg.name, pg.sel, got, pg.want)
		}
		p.screenshot(pg.name)
		p.noConsoleErrors(pg.name)
	}
	p.open(b.base + "/ui/")
	if got := p.text("#holds"); !strings.Contains(got, "p9") {
		t.Errorf("overview's holds: %q, want the collection p9", got)
	}
	// Whatever is legal for a Failed job, and only that.
	p.open(b.base + "/ui/jobs/" + failed)
	if got := p.text("#actions"); !strings.Contains(got, "Requeue") || !strings.Contains(got, "Delete") || strings.Contains(got, "Hold") {
		t.Errorf("a Failed job's actions: %q, want Requeue and Delete, not Hold", got)
	}
}

// A move written straight into ZooKeeper, as Merritt's services write them
// (no ingestq event), shows on the open overview and job page within a
// second of the write: the dashboard's own folder watches see it.
func TestForeignTransitionShowsWithinASecond(t *testing.T) {
	b := setup(t, noTokens)
	bt := b.batch("uuid-foreign")
	jid := b.job(bt)
	p := newTab(t)

	p.open(b.base + "/ui/")
	p.shownWithinASecond("overview: Pending → Estimating", `document.querySelector('tr[data-state="estimating"] td[data-count]').dataset.count === "1"`,
		func() { b.move(jid, queue.Estimating) })
	p.screenshot("overview")

	p.open(b.base + "/ui/jobs/" + jid)
	p.shownWithinASecond("job page: Estimating → Provisioning", `document.getElementById("job-state").dataset.state === "provisioning"`,
		func() { b.move(jid, queue.Provisioning) })
	p.screenshot("job")

	p.open(b.base + "/ui/access")
	p.shownWithinASecond("access page: a request made", `document.querySelector('tr[data-state="pending"]') !== null`, func() {
		_, err := b.q.CreateAccess(t.Context(), queue.AccessLarge, map[string]any{"token": "foreign", "cloud-content-byte": 1})
		must(t, err)
	})
	p.screenshot("access")
	p.noConsoleErrors("live updates")
}

// shownWithinASecond writes, and checks that the page shows what cond
// looks for within a second of the write's start.
func (p *page) shownWithinASecond(what, cond string, write func()) {
	p.t.Helper()
	p.seenWhen(cond)
	began := time.Now()
	write()
	took := time.Since(began)
	latency := p.seen().Sub(began)
	p.t.Logf("%s written in ZooKeeper (in %v), shown %v after the write began", what, took, latency)
	if latency > time.Second {
		p.t.Errorf("%s: shown %v after the write began, want within 1s", what, latency)
	}
}

// The Hold button of a Pending job's page, for an operator signed in
// through the form, holds the job in ZooKeeper and says so.
func TestHoldButtonHoldsJob(t *testing.T) {
	b := setup(t)
	jid := b.job(b.batch("uuid-hold"))
	p := newTab(t)
	p.signIn(b.base, operateToken)
	p.open(b.base + "/ui/jobs/" + jid)
	p.do(chromedp.Click(`button[data-action="hold"]`), chromedp.WaitVisible("#flash"))
	if got := p.text("#flash"); got != "job "+jid+" held: no daemon takes it until Release on the job's page" {
		t.Errorf("flash %q, want the outcome of the hold", got)
	}
	if s := b.state(jid); s != queue.Held {
		t.Fatalf("ZooKeeper says %s, want Held", s)
	}
	p.do(chromedp.WaitVisible(`#job-state[data-state="held"]`), chromedp.WaitVisible(`button[data-action="release"]`))
	p.screenshot("held")
	p.noConsoleErrors("hold")
}

// A search by local id, typed in the header's box, finds the job of the
// object in the queue and the object in the inventory.
func TestSearchByLocalIDFindsObject(t *testing.T) {
	inv, err := inventory.OpenLocal(filepath.Join(t.TempDir(), "inventory.db"))
	must(t, err)
	t.Cleanup(func() { _ = inv.Close() })
	b := setup(t, noTokens, func(o *options) { o.inventory = inv })
	bt := b.batch("uuid-search")
	b.job(bt)
	jid := b.job(bt, queue.Estimating, queue.Provisioning, queue.Downloading, queue.Processing, queue.Storing,
		queue.Recording, queue.Notify, queue.Completed)
	must(t, inv.Record(context.Background(), inventory.Record{ARK: "ark:/99999/fk4t2", Profile: "p1", LocalIDs: []string{"loc-2"},
		Version: 1, Created: time.Now().UTC().Truncate(time.Second), Batch: bt.ID, Job: jid, What: "A stored object",
		Files: []inventory.FileRow{{Name: "a.txt", Size: 3, SHA256: strings.Repeat("ab", 32)}}}))

	p := newTab(t)
	p.open(b.base + "/ui/")
	p.do(chromedp.SendKeys("#search", "loc-2"), chromedp.Submit("#search"),
		chromedp.WaitVisible(`article.object[data-ark="ark:/99999/fk4t2"]`), chromedp.WaitVisible(".live-status.up"))
	if got := p.text(`article.object`); !strings.Contains(got, "A stored object") || !strings.Contains(got, "loc-2") {
		t.Errorf("the object found: %q", got)
	}
	if got := p.text(`article.object table.versions a[href="/ui/jobs/` + jid + `"]`); got != jid {
		t.Errorf("the version's job: %q, want a link to %s", got, jid)
	}
	if got := p.text("table.jobs tbody"); !strings.Contains(got, jid) || strings.Contains(got, "loc-1") {
		t.Errorf("the jobs found: %q, want %s only", got, jid)
	}
	p.screenshot("found")
	p.noConsoleErrors("search")
}

// A live page rests as long as its last fetch took before the next, also
// when the change that asks for it comes after that fetch ended (a batch
// whose jobs move one at a time, a little slower than its page reads): it
// rested only after a change that came during the fetch, so such a trickle
// kept its daemon reading all the time. The page here is app.js's own,
// served by a handler that answers each live fetch in hold.
func TestLivePageRestsAfterEachFetch(t *testing.T) {
	b := setup(t, noTokens)
	const hold = 800 * time.Millisecond
	var mu sync.Mutex
	var starts, ends []time.Time
	began := make(chan struct{}, 8)
	b.web.Handle("GET /rest/{$}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Live") == "" {
			_, _ = io.WriteString(w, `<!doctype html><link rel="icon" href="/ui/static/favicon.svg"><script src="/ui/static/app.js" defer></script>`+
				`<span id="live-status"></span><main id="live" data-live="1">0</main>`)
			return
		}
		mu.Lock()
		starts = append(starts, time.Now())
		n := len(starts)
		mu.Unlock()
		began <- struct{}{}
		select { // a page that takes hold to read
		case <-time.After(hold):
		case <-r.Context().Done():
		}
		mu.Lock()
		ends = append(ends, time.Now())
		mu.Unlock()
		_, _ = fmt.Fprint(w, n)
	}))
	p := newTab(t)
	p.open(b.base + "/rest/")
	for i, uuid := range []string{"uuid-rest-1", "uuid-rest-2"} {
		p.seenWhen(fmt.Sprintf(`document.getElementById("live").textContent === "%d"`, i+1))
		b.batch(uuid) // a change: the batches folder's watch tells the page
		select {
		case <-began:
		case <-p.ctx.Done():
			t.Fatalf("change %d: the page fetched nothing", i+1)
		}
		p.seen() // fetched and shown: the next change comes after its end
	}
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(starts); i++ {
		if rest := starts[i].Sub(ends[i-1]); rest < hold {
			t.Errorf("fetch %d began %v after fetch %d ended, which took %v; want a rest as long", i+1, rest, i, hold)
		}
	}
	p.noConsoleErrors("live updates")
}
