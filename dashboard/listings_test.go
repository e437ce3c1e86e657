package dashboard_test

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// accessMoved publishes the event of an access request's move, as the
// daemon that made it does.
func (b *bundle) accessMoved(ref string, to queue.State) {
	b.t.Helper()
	b.bus.Publish(events.Event{Kind: events.KindAccess, AccessID: ref, To: string(to), Host: "test"})
}

// request queues an access request on the small queue, asked at the given
// time, as a daemon does (with its event), and returns its ref.
func (b *bundle) request(ark string, asked time.Time) string {
	b.t.Helper()
	a, err := b.q.CreateAccess(b.t.Context(), queue.AccessSmall, queue.AccessToken{Token: "t-" + ark, ARK: ark,
		Format: queue.FormatZip, TokenStatus: queue.TokenNotReady, Requested: asked.UTC().Format(time.RFC3339)}.Map(nil))
	must(b.t, err)
	b.accessMoved(a.Ref(), queue.Pending)
	return a.Ref()
}

// link is the address of a page's link rel (first, next); "" for none.
func link(page, rel string) string {
	m := regexp.MustCompile(`href="([^"]*)" rel="` + rel + `"`).FindStringSubmatch(page)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

// The overview counts the access requests from its own watch of the
// queues and the requests' events: a refresh reads no request, so one
// whose status no longer reads still counts as last seen, and the page
// says nothing of it.
func TestOverviewCountsAccessWithoutReadingThem(t *testing.T) {
	b := setup(t, noTokens)
	var refs []string
	for i := range 3 {
		refs = append(refs, b.request(fmt.Sprintf("ark:/99999/fk4count%d", i), time.Now()))
	}
	counted := `<span class="state pending">Pending</span></a></td><td class="num">3</td><td class="num">0</td>`
	b.waitOverview(t, counted)
	conn := zktest.Connect(t)
	_, err := conn.Set(b.q.Path("/access/"+refs[0]+"/status"), []byte("{"), -1)
	must(t, err)
	a := b.get("", "/ui/")
	a.is(t, http.StatusOK, counted)
	if strings.Contains(a.body, "access request") {
		t.Errorf("the overview read the requests again:\n%s", a.body)
	}
}

// A move of an access request by a program that publishes no event (as
// Merritt's services) shows on the overview at the watches' rescan.
func TestForeignAccessMoveShowsAtTheRescan(t *testing.T) {
	b := setup(t, noTokens)
	b.request("ark:/99999/fk4foreign", time.Now())
	b.waitOverview(t, `<span class="state pending">Pending</span></a></td><td class="num">1</td>`)
	a, _, err := b.q.AcquireAccessWork(t.Context(), queue.AccessSmall, nil)
	must(t, err)
	must(t, b.q.MoveAccess(t.Context(), a, queue.Processing, "", nil))
	b.dash.Rescan()
	b.waitOverview(t, `<span class="state processing">Processing</span></a></td><td class="num">1</td>`)
}

// The access page lists 50 requests a page, newest asked first; a page
// after the first links back to it, and the last has no next page.
func TestAccessPages(t *testing.T) {
	b := setup(t, noTokens)
	start := time.Now().Add(-time.Hour)
	var refs []string // oldest first
	for i := range 52 {
		refs = append(refs, b.request(fmt.Sprintf("ark:/99999/fk4page%02d", i), start.Add(time.Duration(i)*time.Second)))
	}
	first := b.get("", "/ui/access")
	first.is(t, http.StatusOK)
	got := rowsOf(first.body, "data-ref")
	if len(got) != 50 || got[0] != refs[51] || got[49] != refs[2] {
		t.Fatalf("first page: %d requests, %v…; want 50 from %s to %s", len(got), got[:min(len(got), 3)], refs[51], refs[2])
	}
	if link(first.body, "first") != "" {
		t.Errorf("the first page links to the first page")
	}
	next := link(first.body, "next")
	if next == "" {
		t.Fatalf("the first page has no next page:\n%s", first.body)
	}
	last := b.get("", next)
	last.is(t, http.StatusOK)
	if got := rowsOf(last.body, "data-ref"); len(got) != 2 || got[0] != refs[1] || got[1] != refs[0] {
		t.Fatalf("last page (%s): %v, want %s and %s", next, got, refs[1], refs[0])
	}
	if l := link(last.body, "next"); l != "" {
		t.Errorf("the last page links to a next page %s", l)
	}
	if l := link(last.body, "first"); l != "/ui/access" {
		t.Errorf("the last page's first page: %q, want /ui/access", l)
	}
	// A filter is kept from page to page.
	pending := b.get("", "/ui/access?state=Pending")
	if l := link(pending.body, "next"); !strings.Contains(l, "state=Pending") {
		t.Errorf("the Pending filter's next page %q drops the filter", l)
	}
	if l := link(b.get("", link(pending.body, "next")).body, "first"); l != "/ui/access?state=Pending" {
		t.Errorf("the Pending filter's first page: %q, want /ui/access?state=Pending", l)
	}
}

// storedStamp is a time in ZooKeeper's stored layout (queue.TimeLayout).
var storedStamp = regexp.MustCompile(`\d\d:\d\d:\d\d [+-]\d{4}`)

// Every page shows a time one way, as the job's Created: UTC to the
// second with a Z, the stored last_modified and the token's RFC 3339
// included.
func TestTimesReadAlike(t *testing.T) {
	b := setup(t, noTokens)
	bt := b.batch("uuid-times")
	jid := b.job(bt, queue.Estimating)
	b.request("ark:/99999/fk4times", time.Date(2026, 11, 26, 23, 49, 5, 0, time.UTC))
	dd := regexp.MustCompile(`<dt>(Created|Modified)</dt><dd[^>]*>([^<]*)</dd>`)
	job := b.get("", "/ui/jobs/"+jid)
	job.is(t, http.StatusOK)
	times := dd.FindAllStringSubmatch(job.body, -1)
	if len(times) != 2 {
		t.Fatalf("the job page's times: %v, want Created and Modified", times)
	}
	for _, m := range times {
		if _, err := time.Parse("2006-01-02 15:04:05Z", m[2]); err != nil {
			t.Errorf("the job's %s: %q, want the form 2006-01-02 15:04:05Z", m[1], m[2])
		}
	}
	for _, path := range []string{"/ui/jobs/" + jid, "/ui/batches/" + bt.ID, "/ui/batches", "/ui/access"} {
		a := b.get("", path)
		a.is(t, http.StatusOK)
		if s := storedStamp.FindString(html.UnescapeString(a.body)); s != "" {
			t.Errorf("%s shows a time as ZooKeeper keeps it: %q", path, s)
		}
	}
	b.get("", "/ui/access").is(t, http.StatusOK, "2026-11-26 23:49:05Z")
}

// A host that works every state says "all", as ingestq hosts does; one
// that works some lists them.
func TestHostsSayAll(t *testing.T) {
	b := setup(t, noTokens)
	var all []string
	for _, r := range reactor.AllRoles() {
		all = append(all, string(r))
	}
	for name, states := range map[string][]string{"every": all, "some": {"storing", "recording"}} {
		data, err := json.Marshal(reactor.HostInfo{Name: name, Version: "test", States: states, Since: time.Now()})
		must(t, err)
		must(t, b.q.RegisterHost(t.Context(), name, data))
	}
	a := b.get("", "/ui/")
	a.is(t, http.StatusOK)
	for name, want := range map[string]string{"every": "<td>all</td>", "some": "<td>storing, recording</td>"} {
		_, row, _ := strings.Cut(a.body, `<tr data-host="`+name+`">`)
		row, _, _ = strings.Cut(row, "</tr>")
		if !strings.Contains(strings.ReplaceAll(row, ` class="states"`, ""), want) {
			t.Errorf("host %s's row %q, want its states as %s", name, row, want)
		}
	}
}

// The access page reads only the requests it shows, and the next one of
// each queue: a page of 50 of 120 requests lists the two queues (2 reads)
// and reads 4 nodes of 52 requests; it read every node of all 120 to
// order them. Both queues are merged, newest first.
func TestAccessPageReadsOnlyWhatItShows(t *testing.T) {
	b := setup(t, noTokens)
	conn := zktest.Connect(t)
	start := time.Now().Add(-time.Hour)
	var refs []string // oldest first
	for i := range 120 {
		name := []string{queue.AccessSmall, queue.AccessLarge}[i%2]
		a, err := b.q.CreateAccess(t.Context(), name, queue.AccessToken{Token: fmt.Sprint(i), ARK: "ark:/99999/fk4reads", Format: queue.FormatZip,
			TokenStatus: queue.TokenReady, Requested: start.Add(time.Duration(i) * time.Second).UTC().Format(time.RFC3339)}.Map(nil))
		must(t, err)
		// Completed as a foreign writer says it: the overview, once it has
		// read a Completed request, does not read it again.
		_, err = conn.Set(b.q.Path("/access/"+a.Ref()+"/status"), []byte(`{"status": "Completed", "last_modified": "2026-11-27 01:00:00 +0000"}`), -1)
		must(t, err)
		refs = append(refs, a.Ref())
	}
	b.dash.Rescan() // a request whose status the watch found missing is read now
	b.waitOverview(t, `<span class="state completed">Completed</span></a></td><td class="num">60</td><td class="num">60</td>`)
	reads0, _ := b.svc.Q.Requests()
	page := b.get("", "/ui/access")
	reads, _ := b.svc.Q.Requests()
	page.is(t, http.StatusOK)
	got := rowsOf(page.body, "data-ref")
	if len(got) != 50 || got[0] != refs[119] || got[1] != refs[118] || got[49] != refs[70] {
		t.Fatalf("first page: %d requests, %v…; want 50 from %s, %s to %s", len(got), got[:min(len(got), 3)], refs[119], refs[118], refs[70])
	}
	if want := uint64(2 + 4*52); reads-reads0 != want {
		t.Errorf("the first access page read %d nodes; want %d", reads-reads0, want)
	}
	next := b.get("", link(page.body, "next"))
	if got := rowsOf(next.body, "data-ref"); len(got) != 50 || got[0] != refs[69] || got[49] != refs[20] {
		t.Fatalf("second page: %d requests, %v…; want 50 from %s to %s", len(got), got[:min(len(got), 3)], refs[69], refs[20])
	}
}
