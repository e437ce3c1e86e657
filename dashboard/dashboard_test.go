package dashboard_test

import (
	"errors"
	"fmt"
	"html"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Unknown and malformed ids, searches and filters each get a page that
// says what is wrong, with a fitting status; never a 500.
func TestBadInputGetsAClearPage(t *testing.T) {
	b := setup(t, noTokens)
	bt := b.batch("uuid-bad")
	jid := b.job(bt)
	for _, c := range []struct {
		path   string
		status int
		says   string
	}{
		{"/ui/batches/bid0000009999", http.StatusNotFound, "bid0000009999"},
		{"/ui/batches/no-such-uuid", http.StatusNotFound, "no-such-uuid"},
		{"/ui/batches/a%00b", http.StatusNotFound, `batch uuid "a\x00b"`},
		{"/ui/batches/%2e", http.StatusNotFound, `batch uuid "."`},
		{"/ui/jobs/jid0000009999", http.StatusNotFound, "jid0000009999"},
		{"/ui/jobs/jidX", http.StatusBadRequest, `"jidX" is not a job id`},
		{"/ui/jobs/ark:/99999/nothing", http.StatusNotFound, "ark:/99999/nothing"},
		{"/ui/jobs?state=Sleeping", http.StatusBadRequest, `unknown job state "Sleeping"`},
		{"/ui/batches?state=Sleeping", http.StatusBadRequest, `unknown batch state "Sleeping"`},
		{"/ui/jobs?stalled=1", http.StatusNotImplemented, "does not detect stalled work"},
		{"/ui/search?q=", http.StatusBadRequest, "type an ARK"},
		{"/ui/search?q=" + strings.Repeat("x", 600), http.StatusBadRequest, "over 512 bytes"},
		{"/ui/search?q=a%00b", http.StatusBadRequest, "not a line of text"},
		{"/ui/search?q=nothing-here", http.StatusOK, "No job."},
		{"/ui/nowhere", http.StatusNotFound, "no page /ui/nowhere"},
	} {
		b.get("", c.path).is(t, c.status, c.says)
	}
	// A jid or a bid searched for goes to its page; an ARK to its job's.
	for q, to := range map[string]string{jid: "/ui/jobs/" + jid, bt.ID: "/ui/batches/" + bt.ID} {
		if a := b.get("", "/ui/search?q="+q); a.status != http.StatusFound || a.header.Get("Location") != to {
			t.Errorf("search %s: %d to %q, want %s", q, a.status, a.header.Get("Location"), to)
		}
	}
	if a := b.get("", "/ui/jobs/ark:/99999/fk4t1"); a.header.Get("Location") != "/ui/jobs/"+jid {
		t.Errorf("a job by ARK: %d to %q, want its page", a.status, a.header.Get("Location"))
	}
	if a := b.get("", "/"); a.status != http.StatusFound || a.header.Get("Location") != "/ui/" {
		t.Errorf("/: %d to %q, want the dashboard", a.status, a.header.Get("Location"))
	}
}

// Reads and actions follow the API's rules: with tokens, reading needs
// one and acting an operate token (delete an admin's); a refusal is the
// service layer's message, as the API and the CLI give it.
func TestActionsFollowTheAPIRules(t *testing.T) {
	b := setup(t)
	bt := b.batch("uuid-rules")
	jid := b.job(bt)
	hold := url.Values{"action": {"hold"}}

	b.get("", "/ui/").is(t, http.StatusUnauthorized, "Sign in", "this needs a token with the read role")
	b.get("", "/ui/live").is(t, http.StatusUnauthorized)
	b.get("not-a-token-0123456789", "/ui/jobs/"+jid).is(t, http.StatusUnauthorized, "unknown bearer token")
	b.get(readToken, "/ui/jobs/"+jid).is(t, http.StatusOK, "Reader (read)", `data-action="hold"`)

	b.post("", "/ui/jobs/"+jid, hold).is(t, http.StatusUnauthorized, "needs a token with the operate role")
	b.post(readToken, "/ui/jobs/"+jid, hold).is(t, http.StatusForbidden, "the token of Reader has the read role; this needs operate")
	b.post(operateToken, "/ui/jobs/"+jid, url.Values{"action": {"delete"}}).is(t, http.StatusForbidden,
		"the token of alice has the operate role; delete needs admin")
	b.post(operateToken, "/ui/jobs/"+jid, url.Values{"action": {"explode"}}).is(t, http.StatusBadRequest, `action "explode"`)
	if s := b.state(jid); s != queue.Pending {
		t.Fatalf("refused actions changed the job: %s", s)
	}
	b.post(operateToken, "/ui/jobs/"+jid, hold).is(t, http.StatusOK, "job "+jid+" held: no daemon takes it until Release on the job's page")
	b.post(operateToken, "/ui/jobs/"+jid, hold).is(t, http.StatusOK, "job "+jid+" was already held: Release on the job's page releases it")

	// The refusal of an illegal action is the service layer's own message,
	// its advice naming the page's button.
	a := b.post(operateToken, "/ui/jobs/"+jid, url.Values{"action": {"requeue"}})
	_, want := b.svc.RequeueJob(t.Context(), jid)
	if !errors.Is(want, queue.ErrIllegalTransition) && !errors.Is(want, queue.ErrRefused) {
		t.Fatalf("requeue of a Held job: %v, want a refusal", want)
	}
	a.is(t, http.StatusConflict, "refused: "+ops.Detail(want, ops.Dashboard), "the Release button lets it start")
	b.post(adminToken, "/ui/jobs/"+jid, url.Values{"action": {"delete"}}).is(t, http.StatusOK, "job "+jid+" moved to Deleted")
	if s := b.state(jid); s != queue.Deleted {
		t.Fatalf("after delete: %s", s)
	}
}

// A change sent from another site's page is refused, even with the
// browser's cookie; so is signing in from one. Signing in keeps the token
// in an HttpOnly, SameSite=Strict cookie and goes back to a page of the
// dashboard only.
func TestCrossSiteChangesAndSigningIn(t *testing.T) {
	b := setup(t)
	jid := b.job(b.batch("uuid-csrf"))
	c := b.client(operateToken)
	a := b.send(c, "POST", "/ui/jobs/"+jid, url.Values{"action": {"hold"}},
		http.Header{"Origin": {"http://evil.example"}, "Sec-Fetch-Site": {"cross-site"}})
	a.is(t, http.StatusForbidden, "refused: a change sent from another site")
	if s := b.state(jid); s != queue.Pending {
		t.Fatalf("a cross-site POST changed the job: %s", s)
	}
	b.send(b.client(""), "POST", "/ui/login", url.Values{"token": {adminToken}},
		http.Header{"Sec-Fetch-Site": {"cross-site"}}).is(t, http.StatusForbidden)

	b.post("", "/ui/login", url.Values{"token": {"wrong-token-0123456789"}}).is(t, http.StatusUnauthorized, "unknown bearer token")
	// Dot segments that leave /ui/ (a browser reads %2e as a dot) are elsewhere too: a link
	// sent to an operator must not make the sign-in start a CPU profile.
	for _, next := range []string{"/ui/../debug/pprof/profile?seconds=3600", "/ui/%2e%2e/debug/pprof/", "/ui/..%2f..%2fmetrics"} {
		if a := b.post("", "/ui/login", url.Values{"token": {operateToken}, "next": {next}}); a.header.Get("Location") != "/ui/" {
			t.Errorf("sign in with next %q: %d to %q, want /ui/", next, a.status, a.header.Get("Location"))
		}
	}
	// A fragment is no part of the path, yet the redirect cleans what comes before the query as
	// one path: its dot segments led out of /ui/. A backslash in the query is no slash to a browser.
	for next, want := range map[string]string{
		"/ui/jobs#/../../debug/pprof/profile?seconds=3600": "/ui/jobs",
		"/ui/search?q=C:\\deposits\\box":                   "/ui/search?q=C:\\deposits\\box",
		"/ui/jobs?state=Failed":                            "/ui/jobs?state=Failed",
	} {
		if a := b.post("", "/ui/login", url.Values{"token": {operateToken}, "next": {next}}); a.header.Get("Location") != want {
			t.Errorf("sign in with next %q: %d to %q, want %q", next, a.status, a.header.Get("Location"), want)
		}
	}
	a = b.post("", "/ui/login", url.Values{"token": {operateToken}, "next": {"https://evil.example/"}})
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/ui/" {
		t.Errorf("sign in with next elsewhere: %d to %q, want /ui/", a.status, a.header.Get("Location"))
	}
	cookie := a.header.Get("Set-Cookie")
	for _, attr := range []string{"ingestq_token=", "Path=/ui/", "HttpOnly", "SameSite=Strict"} {
		if !strings.Contains(cookie, attr) {
			t.Errorf("cookie %q lacks %s", cookie, attr)
		}
	}
	a = b.post("", "/ui/login", url.Values{"token": {operateToken}, "next": {"/ui/jobs/" + jid}})
	if a.header.Get("Location") != "/ui/jobs/"+jid {
		t.Errorf("sign in: to %q, want back to the job", a.header.Get("Location"))
	}
}

// A button's form is read bounded, before anything is done: one over
// 64 KiB is a 413, a multipart one (whose files the server wrote to its
// disk as they came) a 415, and the job is left as it was. Before, both
// were read whole and the job held.
func TestBigOrMultipartFormsAreRefused(t *testing.T) {
	b := setup(t)
	jid := b.job(b.batch("uuid-bigform"))
	b.post(operateToken, "/ui/jobs/"+jid, url.Values{"action": {"hold"}, "pad": {strings.Repeat("x", 100<<10)}}).
		is(t, http.StatusRequestEntityTooLarge, "the form is over 64 KiB")
	var body strings.Builder
	mw := multipart.NewWriter(&body)
	must(t, mw.WriteField("action", "hold"))
	f, err := mw.CreateFormFile("upload", "big.bin")
	must(t, err)
	_, err = f.Write(make([]byte, 1<<20))
	must(t, err)
	must(t, mw.Close())
	req, err := http.NewRequestWithContext(t.Context(), "POST", b.base+"/ui/jobs/"+jid, strings.NewReader(body.String()))
	must(t, err)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := b.client(operateToken).Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("a multipart form: %d, want 415", resp.StatusCode)
	}
	if s := b.state(jid); s != queue.Pending {
		t.Fatalf("a refused form changed the job: %s", s)
	}
	b.post(operateToken, "/ui/jobs/"+jid, url.Values{"action": {"hold"}}).is(t, http.StatusOK) // a button's form is read
	if s := b.state(jid); s != queue.Held {
		t.Fatalf("after hold: %s", s)
	}
}

// Without tokens reading is open and every change refused, as by the API.
func TestWithoutTokensReadsAreOpenAndChangesRefused(t *testing.T) {
	b := setup(t, noTokens)
	jid := b.job(b.batch("uuid-open"))
	b.get("", "/ui/jobs/"+jid).is(t, http.StatusOK, "reads open, changes need tokens")
	b.post("", "/ui/jobs/"+jid, url.Values{"action": {"hold"}}).is(t, http.StatusUnauthorized, "this needs a token with the operate role, and this daemon has none configured: start serve with --api-tokens")
	b.post("", "/ui/login", url.Values{"token": {adminToken}}).is(t, http.StatusBadRequest, "this daemon has no tokens")
	if s := b.state(jid); s != queue.Pending {
		t.Fatalf("a change without tokens: %s", s)
	}
}

// The batches are listed newest first, 50 a page, and the next page goes
// on from the last one shown down to the oldest; it links back to the
// first.
func TestBatchesNewestFirst(t *testing.T) {
	b := setup(t, noTokens)
	var bids []string
	for i := range 52 {
		bids = append(bids, b.batch(fmt.Sprintf("uuid-%02d", i)).ID)
	}
	a := b.get("", "/ui/batches")
	a.is(t, http.StatusOK, "Next page")
	rows := rowsOf(a.body, "data-bid")
	if len(rows) != 50 || rows[0] != bids[51] || rows[49] != bids[2] {
		t.Fatalf("first page: %d rows from %s to %s, want 50 from %s to %s", len(rows), rows[0], rows[len(rows)-1], bids[51], bids[2])
	}
	if l := link(a.body, "next"); l != "/ui/batches?after="+bids[2] {
		t.Fatalf("first page's next page: %q, want after %s", l, bids[2])
	}
	if strings.Contains(a.body, "First page") {
		t.Errorf("the first page links to the first page")
	}
	a = b.get("", "/ui/batches?after="+bids[2])
	if rows := rowsOf(a.body, "data-bid"); !slices.Equal(rows, []string{bids[1], bids[0]}) || strings.Contains(a.body, "Next page") {
		t.Fatalf("last page: %v, want %s and %s and no next", rows, bids[1], bids[0])
	}
	if l := link(a.body, "first"); l != "/ui/batches" {
		t.Errorf("last page's first page: %q, want /ui/batches", l)
	}
}

// rowsOf are the ids a listing's rows carry in their attribute attr
// (data-bid, data-ref), in order.
func rowsOf(page, attr string) []string {
	var ids []string
	for _, part := range strings.Split(page, `<tr `+attr+`="`)[1:] {
		id, _, _ := strings.Cut(part, `"`)
		ids = append(ids, id)
	}
	return ids
}

// A windowed batch whose objects have no jobs yet counts them in its row's
// total: none of ten finished, not none of none.
func TestBatchesCountObjectsWithoutJobs(t *testing.T) {
	b := setup(t, noTokens)
	bt := b.batch("uuid-windowed")
	objs := make([]queue.Object, 10)
	for i := range objs {
		objs[i] = queue.Object{Key: fmt.Sprintf("obj-%d", i)}
	}
	if _, err := b.q.WriteObjects(t.Context(), bt, objs, 5); err != nil {
		t.Fatal(err)
	}
	a := b.get("", "/ui/batches")
	a.is(t, http.StatusOK, bt.ID)
	_, row, _ := strings.Cut(a.body, `<tr data-bid="`+bt.ID+`"`)
	row, _, _ = strings.Cut(row, "</tr>")
	if !strings.Contains(row, "0 / 10") {
		t.Errorf("the windowed batch's row counts %q, want 0 / 10", row)
	}
}

// A job's timeline says who made an operator's move and its admin event,
// as events replay does ("by NAME"): the token's name.
func TestTimelineNamesWhoActed(t *testing.T) {
	b := setup(t)
	jid := b.job(b.batch("uuid-actor"))
	b.post(operateToken, "/ui/jobs/"+jid, url.Values{"action": {"hold"}}).is(t, http.StatusOK)
	must(t, b.bus.Flush(t.Context()))
	a := b.get(readToken, "/ui/jobs/"+jid)
	a.is(t, http.StatusOK, "Pending → Held <small>by alice</small>")
	if n := strings.Count(a.body, "<small>by alice</small>"); n != 2 {
		t.Errorf("%d timeline lines by alice, want 2 (the move and its admin event):\n%s", n, a.body)
	}
}

// A job's timeline shows each run of its progress events as its last, as
// events replay does (a 4-hour download's page listed about 28,800), and
// says how many it leaves out; a wait's progress event is shown.
func TestTimelineShowsAProgressRunAsItsLast(t *testing.T) {
	b := setup(t)
	bt := b.batch("uuid-progress")
	jid := b.job(bt)
	for n := range 5 {
		b.bus.Publish(events.Event{Kind: events.KindProgress, BatchID: bt.ID, JobID: jid, To: "Downloading",
			Attrs: map[string]any{"bytes_done": n, "bytes_total": 5}})
	}
	b.bus.Publish(events.Event{Kind: events.KindProgress, BatchID: bt.ID, JobID: jid, To: "Downloading",
		Message: "waiting for room", Attrs: map[string]any{"waiting": true}})
	must(t, b.bus.Flush(t.Context()))
	a := b.get(readToken, "/ui/jobs/"+jid)
	a.is(t, http.StatusOK, "waiting for room", "4 progress events not shown",
		"ingestq events replay --job "+jid+" --progress")
	if n := strings.Count(a.body, "<b>progress</b>"); n != 2 {
		t.Errorf("%d progress lines in the timeline, want 2 (the last of the run, the wait):\n%s", n, a.body)
	}
}

// searchesOf are the searches a page's links ask for (their q), in order.
func searchesOf(page string) []string {
	var qs []string
	for _, m := range regexp.MustCompile(`href="(/ui/search\?[^"]*)"`).FindAllStringSubmatch(page, -1) {
		u, err := url.Parse(html.UnescapeString(m[1]))
		if err == nil {
			qs = append(qs, u.Query().Get("q"))
		}
	}
	return qs
}

// A job's ARK links to its object's search wherever a job is shown (its
// page, its batch's and a state's job lists), as an access request's
// does; the job's page says what it ingests (its payload's URL, secrets
// masked, and file name), a hostile name shown as text, isolated so that
// its direction marks reorder nothing around it.
func TestJobsLinkTheirARKAndShowTheirPayload(t *testing.T) {
	b := setup(t, noTokens)
	bt := b.batch("uuid-links")
	const ark, name = "ark:/99999/fk4links", `<b>report</b> & "final".tar.gz`
	const payload = "https://example.org/deposits/2026/report.tar.gz?sig=a%2Fb&x=1"
	j, err := b.q.CreateJob(t.Context(), bt, queue.JobSpec{Priority: 5, SpaceNeeded: 1000,
		Config:      queue.JobConfig{Profile: bt.Profile(), PayloadURL: payload, FileName: name},
		Identifiers: &queue.Identifiers{PrimaryID: ark}})
	must(t, err)
	for _, p := range []string{"/ui/jobs/" + j.ID, "/ui/batches/" + bt.ID, "/ui/jobs?state=pending"} {
		a := b.get("", p)
		a.is(t, http.StatusOK, j.ID)
		if qs := searchesOf(a.body); !slices.Equal(qs, []string{ark}) {
			t.Errorf("%s links to the searches %q, want one of the job's ARK %s", p, qs, ark)
		}
	}
	a := b.get("", "/ui/jobs/"+j.ID)
	masked := strings.Replace(payload, "sig=a%2Fb", "sig=xxxxx", 1) // its signature, below admin
	a.is(t, http.StatusOK, masked+" <small>as</small> <bdi>"+name+"</bdi>")
	if strings.Contains(a.body, "<b>report</b>") {
		t.Errorf("the job's page writes its file name as markup:\n%s", a.body)
	}
	// A payload in the server's folders is a path, hidden below admin.
	local, err := b.q.CreateJob(t.Context(), bt, queue.JobSpec{Priority: 5, SpaceNeeded: 1000,
		Config: queue.JobConfig{Profile: bt.Profile(), PayloadURL: "file:///var/lib/ingestq/deposits/x.zip"}})
	must(t, err)
	a = b.get("", "/ui/jobs/"+local.ID)
	a.is(t, http.StatusOK, `<dd id="payload">[server path hidden]</dd>`)
}

// A name a foreign writer put in the queue with a bidirectional override
// (U+202E: "report\u202efdp.exe" reads "reportexe.pdf") or a terminal's
// control sequence is shown with them as escapes, on the job's page and in
// the job lists: isolation (<bdi>) keeps the name from reordering what is
// around it, not itself.
func TestNamesShowTheirControlsAsEscapes(t *testing.T) {
	b := setup(t, noTokens)
	bt := b.batch("uuid-hostile")
	j, err := b.q.CreateJob(t.Context(), bt, queue.JobSpec{Priority: 5, SpaceNeeded: 1000,
		Config: queue.JobConfig{Profile: bt.Profile(), PayloadURL: "https://example.org/x.zip",
			FileName: "report\u202efdp.exe\x1b[2J"},
		Identifiers: &queue.Identifiers{PrimaryID: "ark:/99999/fk4hostile", LocalIDs: []string{"loc\u2067ol"}},
		Metadata:    &queue.Metadata{What: "title\u200f\u0085x"}})
	must(t, err)
	jobs := "/ui/jobs?state=pending"
	for _, p := range []string{"/ui/jobs/" + j.ID, "/ui/batches/" + bt.ID, jobs} {
		a := b.get("", p)
		parts := []string{`loc\u2067ol`, `title\u200f\u0085x`}
		if p == "/ui/jobs/"+j.ID {
			parts = append(parts, `<bdi>report\u202efdp.exe\u001b[2J</bdi>`)
		}
		a.is(t, http.StatusOK, parts...)
		if i := strings.IndexAny(a.body, "\u202e\u2067\u200f\u0085\x1b"); i >= 0 {
			t.Errorf("%s writes a control character raw (at %d):\n%s", p, i, a.body)
		}
	}
}

// A Pending batch waiting for its busy payload server says so in its row
// of the batch list, where its empty progress bar read as stuck.
func TestBatchesSayWhyAPendingBatchWaits(t *testing.T) {
	b := setup(t, noTokens)
	const msg = "waiting for a busy server: fetch http://example.org/batch.checkm: HTTP 503 Service Unavailable; next try at 2026-11-28 01:25:58"
	bt, err := b.q.LockBatch(t.Context(), b.batch("uuid-busy").ID)
	must(t, err)
	must(t, b.q.NoteBatch(t.Context(), bt, msg, nil))
	must(t, b.q.UnlockBatch(t.Context(), bt))
	a := b.get("", "/ui/batches")
	a.is(t, http.StatusOK, bt.ID)
	_, row, _ := strings.Cut(a.body, `<tr data-bid="`+bt.ID+`"`)
	row, _, _ = strings.Cut(row, "</tr>")
	if !strings.Contains(row, msg) {
		t.Errorf("the waiting batch's row %q lacks its message %q", row, msg)
	}
}
