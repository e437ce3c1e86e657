package api_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/api"
	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Two depositors' tokens, each scoped to its own profiles.
const (
	alphaToken = "alpha-token-0123456789"
	betaToken  = "beta-token-0123456789"
)

// withDepositors adds the depositors' tokens to a bundle: alpha operates
// on alpha's work, beta reads beta's and gamma's.
func withDepositors(o *options) {
	o.tokens = append(o.tokens, "operate:alpha "+alphaToken+" Alpha depositor", "read:beta,gamma "+betaToken+" Beta depositor")
}

// hiddenAsMissing checks that the answer to a request of another
// profile's item (id) is the answer to one no item has (missingID), its
// id aside: the same status, type and words, so that a 404 tells nothing.
func hiddenAsMissing(t *testing.T, got, want answer, id, missingID string) {
	t.Helper()
	var g, w api.Problem
	must(t, json.Unmarshal(got.body, &g))
	must(t, json.Unmarshal(want.body, &w))
	w.Detail = strings.ReplaceAll(w.Detail, missingID, id)
	w.Instance = strings.ReplaceAll(w.Instance, missingID, id)
	if got.status != http.StatusNotFound || want.status != http.StatusNotFound || g != w {
		t.Fatalf("another's %s: %d %+v; want as a missing one: %d %+v", id, got.status, g, want.status, w)
	}
}

// A scoped token lists, reads and acts on its profiles' batches and jobs
// only; another's, by id, is answered as one that does not exist, and a
// page and its next stay right with the filter. It submits to its
// profiles only (403 naming the profile and the scope).
func TestScopedTokensSeeTheirOwnBatchesAndJobs(t *testing.T) {
	t.Parallel()
	var jb string // stalled, by the detector
	b := setup(t, withDepositors, func(o *options) { o.stalled = func(j *queue.Job) bool { return j.ID == jb } })
	a1 := b.batch("uuid-alpha-1", "alpha")
	bb := b.batch("uuid-beta-1", "beta")
	a2 := b.batch("uuid-alpha-2", "alpha")
	ja := b.job(a1.ID, 5, 0)
	jb = b.job(bb.ID, 5, 0)

	type page struct {
		Items []struct {
			BID, JID string
		} `json:"items"`
		Next *string `json:"next"`
	}
	var p page
	b.do("GET", "batches?limit=1", alphaToken, nil).ok(t, http.StatusOK, &p)
	if len(p.Items) != 1 || p.Items[0].BID != a1.ID || p.Next == nil {
		t.Fatalf("alpha's first page: %+v", p)
	}
	b.do("GET", "batches?limit=1&after="+*p.Next, alphaToken, nil).ok(t, http.StatusOK, &p)
	if len(p.Items) != 1 || p.Items[0].BID != a2.ID || p.Next != nil {
		t.Fatalf("alpha's second page: %+v (want %s and no next)", p, a2.ID)
	}
	b.do("GET", "batches", betaToken, nil).ok(t, http.StatusOK, &p)
	if len(p.Items) != 1 || p.Items[0].BID != bb.ID {
		t.Fatalf("beta's batches: %+v", p)
	}
	b.do("GET", "batches?profile=beta", alphaToken, nil).ok(t, http.StatusOK, &p)
	if len(p.Items) != 0 {
		t.Fatalf("alpha's batches of profile beta: %+v", p)
	}
	b.do("GET", "batches", readToken, nil).ok(t, http.StatusOK, &p)
	if len(p.Items) != 3 {
		t.Fatalf("an unscoped token's batches: %+v", p)
	}
	b.do("GET", "jobs", alphaToken, nil).ok(t, http.StatusOK, &p)
	if len(p.Items) != 1 || p.Items[0].JID != ja {
		t.Fatalf("alpha's jobs: %+v", p)
	}
	b.do("GET", "jobs", betaToken, nil).ok(t, http.StatusOK, &p)
	if len(p.Items) != 1 || p.Items[0].JID != jb {
		t.Fatalf("beta's jobs: %+v", p)
	}
	b.do("GET", "jobs?stalled=true", alphaToken, nil).ok(t, http.StatusOK, &p)
	if len(p.Items) != 0 {
		t.Fatalf("alpha's stalled jobs: %+v (only beta's is stalled)", p)
	}
	b.do("GET", "jobs?stalled=true", betaToken, nil).ok(t, http.StatusOK, &p)
	if len(p.Items) != 1 || p.Items[0].JID != jb {
		t.Fatalf("beta's stalled jobs: %+v", p)
	}
	b.do("GET", "jobs?batch="+bb.UUID(), alphaToken, nil).problem(t, http.StatusNotFound, "not-found")

	// By id, read or acted on: as missing.
	const noBatch, noJob = "bid0000009999", "jid0000009999"
	for _, c := range []struct{ method, path, id, missing string }{
		{"GET", "batches/%s", bb.ID, noBatch},
		{"GET", "batches/%s", "uuid-beta-1", "uuid-nosuch"},
		{"POST", "batches/%s/hold", bb.ID, noBatch},
		{"POST", "batches/%s/cancel", bb.ID, noBatch},
		{"GET", "jobs/%s", jb, noJob},
		{"GET", "jobs/%s", "ark:/99999/fk4t2", "ark:/99999/fk4nosuch"},
		{"POST", "jobs/%s/hold", jb, noJob},
	} {
		hiddenAsMissing(t, b.do(c.method, fmt.Sprintf(c.path, c.id), alphaToken, nil),
			b.do(c.method, fmt.Sprintf(c.path, c.missing), operateToken, nil), c.id, c.missing)
	}
	var bulk struct {
		Results []struct {
			JID    string
			Status int
		}
	}
	b.do("POST", "jobs/actions", alphaToken, map[string]any{"action": "hold", "jids": []string{jb, ja}}).ok(t, http.StatusOK, &bulk)
	if len(bulk.Results) != 2 || bulk.Results[0].Status != http.StatusNotFound || bulk.Results[1].JID != ja || bulk.Results[1].Status != http.StatusOK {
		t.Fatalf("alpha's bulk hold of beta's and its own: %+v", bulk.Results)
	}
	if st := b.jobState(jb).State(); st != queue.Pending {
		t.Fatalf("beta's job is %s after alpha's refused hold", st)
	}
	if bt, err := b.q.LoadBatch(t.Context(), bb.ID); err != nil || bt.State() != queue.Pending {
		t.Fatalf("beta's batch after alpha's refused hold and cancel: %v %v", bt, err)
	}
	// Its own, alpha acts on.
	b.do("POST", "batches/"+a2.ID+"/hold", alphaToken, nil).ok(t, http.StatusOK, nil)

	// Submissions: to its profiles only.
	sub := map[string]any{"payload_url": "passthrough:10", "profile": "beta"}
	b.do("POST", "batches", alphaToken, sub).problem(t, http.StatusForbidden, "forbidden", `profile "beta"`, "scoped to profiles alpha")
	sub["profile"] = "alpha"
	b.do("POST", "batches", alphaToken, sub).ok(t, http.StatusCreated, nil)
	sub["uuid"] = "uuid-beta-1" // beta's batch's: refused, not naming it
	if p := b.do("POST", "batches", alphaToken, sub).problem(t, http.StatusConflict, "refused"); strings.Contains(p.Detail, bb.ID) {
		t.Errorf("alpha's retry of beta's uuid names beta's batch: %s", p.Detail)
	}
	delete(sub, "profile")
	b.do("POST", "batches", alphaToken, sub).problem(t, http.StatusBadRequest, "invalid", "profile")

	// The views of the whole queue need an unscoped token.
	b.do("GET", "hosts", betaToken, nil).problem(t, http.StatusForbidden, "forbidden", "scoped to profiles beta, gamma")
	b.do("GET", "holds", alphaToken, nil).problem(t, http.StatusForbidden, "forbidden", "scoped to profiles alpha")
}

// A scoped token sees its profiles' objects and access requests, lists
// its profiles only, and another's object, request or profile is
// answered as one that does not exist.
func TestScopedTokensSeeTheirOwnObjectsAndAccess(t *testing.T) {
	t.Parallel()
	const arkA, arkB = "ark:/99999/fk4alpha", "ark:/99999/fk4beta"
	b := setup(t, withObjects(t, map[string]string{arkA: "alpha", arkB: "beta"}, 3), withDepositors)
	var reqA, reqB ops.AccessView
	b.do("POST", "access", alphaToken, map[string]any{"ark": arkA}).ok(t, http.StatusCreated, &reqA)
	b.do("POST", "access", operateToken, map[string]any{"ark": arkB}).ok(t, http.StatusCreated, &reqB)
	const noARK = "ark:/99999/fk4nosuch"
	b.do("POST", "access", alphaToken, map[string]any{"ark": arkB}).problem(t, http.StatusNotFound, "not-found", "object "+arkB+" is not in the inventory")

	hiddenAsMissing(t, b.do("GET", "objects/"+arkB, alphaToken, nil), b.do("GET", "objects/"+noARK, readToken, nil), arkB, noARK)
	b.do("GET", "objects/"+arkA, alphaToken, nil).ok(t, http.StatusOK, nil)
	b.do("GET", "objects/"+arkB, betaToken, nil).ok(t, http.StatusOK, nil)

	var list struct {
		Items []ops.AccessView `json:"items"`
	}
	b.do("GET", "access", alphaToken, nil).ok(t, http.StatusOK, &list)
	if len(list.Items) != 1 || list.Items[0].Ref != reqA.Ref {
		t.Fatalf("alpha's access requests: %+v", list.Items)
	}
	b.do("GET", "access", betaToken, nil).ok(t, http.StatusOK, &list)
	if len(list.Items) != 1 || list.Items[0].Ref != reqB.Ref {
		t.Fatalf("beta's access requests: %+v", list.Items)
	}
	qid := strings.TrimPrefix(reqB.Ref, reqB.Queue+"/")
	const noQID = "qid0000009999"
	hiddenAsMissing(t, b.do("GET", "access/"+reqB.Ref, alphaToken, nil), b.do("GET", "access/"+reqB.Queue+"/"+noQID, readToken, nil), qid, noQID)
	hiddenAsMissing(t, b.do("POST", "access/"+reqB.Ref+"/requeue", alphaToken, nil),
		b.do("POST", "access/"+reqB.Queue+"/"+noQID+"/requeue", operateToken, nil), qid, noQID)
	b.do("GET", "access/"+reqA.Ref, alphaToken, nil).ok(t, http.StatusOK, nil)

	b.publishDemo()
	var profiles struct {
		Items []struct{ Name string } `json:"items"`
	}
	b.do("GET", "profiles", alphaToken, nil).ok(t, http.StatusOK, &profiles)
	if len(profiles.Items) != 0 {
		t.Fatalf("alpha sees profiles %+v; only demo is published", profiles.Items)
	}
	b.do("GET", "profiles/demo", alphaToken, nil).problem(t, http.StatusNotFound, "not-found", `profile "demo"`, "published: none yet")
}

// The event stream of a scoped token carries its profiles' items' events
// only: not another's batch's or job's, nor the queue's own.
func TestScopedTokensStreamTheirOwnEvents(t *testing.T) {
	t.Parallel()
	b := setup(t, withDepositors)
	a := b.batch("uuid-ev-alpha", "alpha")
	o := b.batch("uuid-ev-beta", "beta")
	jb := b.job(o.ID, 5, 0)
	alpha := b.openStreamAs(alphaToken, "")
	beta := b.openStreamAs(betaToken, "")
	b.bus.Publish(events.Event{Kind: events.KindBatch, BatchID: o.ID, From: "Pending", To: "Processing", Message: "beta's batch"})
	b.bus.Publish(events.Event{Kind: events.KindJob, JobID: jb, From: "Pending", To: "Held", Message: "beta's job"})
	b.bus.Publish(events.Event{Kind: events.KindAdmin, To: "hold", Message: "the queue's"})
	b.bus.Publish(events.Event{Kind: events.KindBatch, BatchID: a.ID, From: "Pending", To: "Processing", Message: "alpha's batch"})
	if ev := alpha.next(t); ev.Message != "alpha's batch" {
		t.Fatalf("alpha's first event: %+v, want its own batch's", ev)
	}
	for _, want := range []string{"beta's batch", "beta's job"} {
		if ev := beta.next(t); ev.Message != want {
			t.Fatalf("beta's event: %+v, want %q", ev, want)
		}
	}
	b.do("GET", "events?batch="+o.ID, alphaToken, nil).problem(t, http.StatusNotFound, "not-found", "no such batch")
	b.do("GET", "events?job="+jb, alphaToken, nil).problem(t, http.StatusNotFound, "not-found", "no such job")
}

// A scoped admin line is refused at load, naming its line; so is a bad
// profile name. The dashboard refuses a scoped token.
func TestScopedTokenLines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range []struct{ lines, want string }{
		{"read " + readToken + "\nadmin:alpha " + adminToken + " Al\n", "line 2: admin:alpha: an admin token cannot be scoped"},
		{"operate:alpha,Beta " + operateToken + "\n", `line 1: operate:alpha,Beta: profile name "Beta" must match`},
		{"operate: " + operateToken + "\n", "line 1: operate:: profile name is empty"},
		{"operate:a,,b " + operateToken + "\n", "line 1: operate:a,,b: profile name is empty"},
	} {
		file := filepath.Join(dir, "tokens")
		must(t, os.WriteFile(file, []byte(c.lines), 0o600))
		if _, err := api.LoadTokens(file, ""); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.lines, err, c.want)
		}
	}
	file := filepath.Join(dir, "tokens")
	must(t, os.WriteFile(file, []byte("operate:alpha,beta "+operateToken+" Al\nread "+readToken+"\n"), 0o600))
	tokens, err := api.LoadTokens(file, "")
	must(t, err)
	if _, err := tokens.Authorize(operateToken, api.RoleRead); err == nil || !strings.Contains(err.Error(), "scoped to profiles alpha, beta") {
		t.Errorf("the dashboard's Authorize of a scoped token: %v", err)
	}
	if c, err := tokens.Authorize(readToken, api.RoleRead); err != nil || c.Scoped() {
		t.Errorf("an unscoped token: %+v %v", c, err)
	}
}

// Another profile's access request deleted and removed is, to a scoped
// token, one never made (not the 410 that names its object, who deleted
// it and when); its batch named by uuid on the event stream is a uuid no
// batch has (not the 404 that names its bid).
func TestScopedTokensLearnNothingOfAnothersGoneRequestOrBatchUUID(t *testing.T) {
	t.Parallel()
	const arkB = "ark:/99999/fk4beta"
	b := setup(t, withObjects(t, map[string]string{arkB: "beta"}, 3), withDepositors)
	reqB := b.failedAccess(arkB)
	for range 2 { // Deleted, then removed
		b.do("DELETE", "access/"+reqB.Ref, adminToken, nil).ok(t, http.StatusOK, nil)
	}
	flush(t, b.bus)
	b.do("GET", "access/"+reqB.Ref, readToken, nil).problem(t, http.StatusGone, "gone", arkB)
	qid := strings.TrimPrefix(reqB.Ref, reqB.Queue+"/")
	const noQID = "qid0000009999"
	hiddenAsMissing(t, b.do("GET", "access/"+reqB.Ref, alphaToken, nil), b.do("GET", "access/"+reqB.Queue+"/"+noQID, readToken, nil), qid, noQID)
	hiddenAsMissing(t, b.do("POST", "access/"+reqB.Ref+"/requeue", alphaToken, nil),
		b.do("POST", "access/"+reqB.Queue+"/"+noQID+"/requeue", operateToken, nil), qid, noQID)

	o := b.batch("uuid-gone-beta", "beta")
	hiddenAsMissing(t, b.do("GET", "events?batch=uuid-gone-beta", alphaToken, nil),
		b.do("GET", "events?batch=uuid-nosuch", readToken, nil), "uuid-gone-beta", "uuid-nosuch")
	b.do("GET", "events?batch="+o.ID, alphaToken, nil).problem(t, http.StatusNotFound, "not-found", "no such batch")
}

// A stream is a request under way for hours: a reload of the token file
// that narrows its token's scope ends it with an error event before it
// carries another event, as the reload refuses every later request.
func TestScopedStreamEndsWhenItsTokenIsNarrowed(t *testing.T) {
	t.Parallel()
	b := setup(t, withDepositors)
	o := b.batch("uuid-reload-beta", "beta")
	publish := func(msg string) {
		b.bus.Publish(events.Event{Kind: events.KindBatch, BatchID: o.ID, From: "Pending", To: "Processing", Message: msg})
	}
	req, err := http.NewRequestWithContext(t.Context(), "GET", b.base+"events", nil)
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+betaToken)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	upTo := func(prefix string) string {
		t.Helper()
		for lines.Scan() {
			if l := lines.Text(); strings.HasPrefix(l, prefix) {
				return l
			}
		}
		t.Fatalf("the stream ended before a line %q: %v", prefix, lines.Err())
		return ""
	}
	publish("before")
	if l := upTo("data: "); !strings.Contains(l, `"before"`) {
		t.Fatalf("beta's first event: %s", l)
	}
	b.toks.Replace(writeTokens(t, false, "read:gamma "+betaToken+" Beta depositor"))
	publish("after")
	if l := upTo("event: "); l != "event: error" {
		t.Fatalf("after beta's token was narrowed to gamma, its stream carried %s (and %s)", l, upTo("data: "))
	}
	if l := upTo("data: "); !strings.Contains(l, "the token of Beta depositor changed") {
		t.Fatalf("the error event: %s", l)
	}
	for lines.Scan() { // the error event's blank line, then the end
		if l := lines.Text(); l != "" {
			t.Fatalf("the stream went on after its error: %s", l)
		}
	}
}

// A removed batch, asked for by its bid, names who removed it and when to
// an unscoped token (the recorded delete); to a scoped one, whose profile
// went with the batch, it is a batch never made. Before, both were the
// same "not found", which named no remover.
func TestARemovedBatchNamesItsRemoverToAnUnscopedToken(t *testing.T) {
	t.Parallel()
	b := setup(t, withDepositors)
	o := b.batch("uuid-removed-beta", "beta")
	b.do("POST", "batches/"+o.ID+"/hold", adminToken, nil).ok(t, http.StatusOK, nil)
	b.do("DELETE", "batches/"+o.ID, adminToken, nil).ok(t, http.StatusOK, nil)
	flush(t, b.bus)
	b.do("GET", "batches/"+o.ID, readToken, nil).problem(t, http.StatusNotFound, "not-found",
		"batch "+o.ID+" was removed from the queue by admin token at ", " (delete)")
	const never = "bid0000009999"
	hiddenAsMissing(t, b.do("GET", "batches/"+o.ID, betaToken, nil), b.do("GET", "batches/"+never, readToken, nil), o.ID, never)
}
