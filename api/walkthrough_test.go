package api_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/api"
	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor/queue"
)

// schemaProps is the properties of a component schema of the OpenAPI
// document (of its items, for an array property named by item).
func schemaProps(t *testing.T, name, item string) map[string]map[string]any {
	t.Helper()
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]map[string]any `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	must(t, json.Unmarshal(api.OpenAPI(), &doc))
	props := doc.Components.Schemas[name].Properties
	if item != "" {
		var sub struct {
			Items struct {
				Properties map[string]map[string]any `json:"properties"`
			} `json:"items"`
		}
		raw, _ := json.Marshal(props[item])
		must(t, json.Unmarshal(raw, &sub))
		props = sub.Items.Properties
	}
	if len(props) == 0 {
		t.Fatalf("schema %s has no properties", name)
	}
	return props
}

// conforms checks that every key of obj is declared in props, and that
// each date-time property holds an RFC 3339 time.
func conforms(t *testing.T, what string, obj map[string]any, props map[string]map[string]any) {
	t.Helper()
	for k, v := range obj {
		p, ok := props[k]
		if !ok {
			t.Errorf("%s: key %q is not in the OpenAPI schema", what, k)
			continue
		}
		if s, isString := v.(string); isString && p["format"] == "date-time" {
			if _, err := time.Parse(time.RFC3339, s); err != nil {
				t.Errorf("%s: %s = %q is not RFC 3339", what, k, s)
			}
		}
	}
}

// What a new operator's walk-through found in the API: times in RFC 3339
// (last_modified too, converted from the nodes' Merritt form, which the
// nodes keep), a batch's state under both names in its list and detail,
// every answered key in the OpenAPI document (Hosts' access_workers, the
// access events), a malformed ?after= refused naming the parameter, the
// stalled jobs listed with their reason, and refusals worded for an HTTP
// caller: the request to make, not the CLI's flags.
func TestAPIAnswersAsItsDocumentSays(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *options) { o.stalled = func(j *queue.Job) bool { return j.State() == queue.Pending } })
	bt := b.batch("uuid-walk", "demo")
	jid := b.job(bt.ID, 5, 0)
	if _, err := time.Parse(queue.TimeLayout, b.jobState(jid).Status.LastModified); err != nil {
		t.Fatalf("the status node's last_modified is not in Merritt's form: %v", err)
	}

	var list struct{ Items []map[string]any }
	b.do("GET", "batches", operateToken, nil).ok(t, http.StatusOK, &list)
	if len(list.Items) != 1 || list.Items[0]["state"] != "Pending" || list.Items[0]["status"] != "Pending" {
		t.Fatalf("batch list %v: want state and status Pending", list.Items)
	}
	conforms(t, "GET /batches", list.Items[0], schemaProps(t, "BatchRow", ""))
	detail := map[string]any{}
	b.do("GET", "batches/"+bt.ID, operateToken, nil).ok(t, http.StatusOK, &detail)
	if detail["state"] != "Pending" || detail["status"] != "Pending" {
		t.Errorf("batch detail: state %v, status %v; want both Pending", detail["state"], detail["status"])
	}
	conforms(t, "GET /batches/{id}", detail, schemaProps(t, "BatchStatus", ""))
	detail = map[string]any{}
	b.do("GET", "jobs/"+jid, operateToken, nil).ok(t, http.StatusOK, &detail)
	conforms(t, "GET /jobs/{jid}", detail, schemaProps(t, "JobDetail", ""))
	if _, err := time.Parse(time.RFC3339, detail["last_modified"].(string)); err != nil {
		t.Errorf("job last_modified %v: not RFC 3339", detail["last_modified"])
	}

	// ?stalled=true: each row says why.
	list.Items = nil
	b.do("GET", "jobs?stalled=true", operateToken, nil).ok(t, http.StatusOK, &list)
	if len(list.Items) != 1 {
		t.Fatalf("stalled jobs %v, want %s", list.Items, jid)
	}
	st, _ := list.Items[0]["stalled"].(map[string]any)
	if st == nil || st["reason"] != "picked by the test" || st["kind"] != "waiting" {
		t.Errorf("stalled row %v: want its stalled kind and reason", list.Items[0])
	}
	conforms(t, "GET /jobs?stalled=true", list.Items[0], schemaProps(t, "JobRow", ""))

	// A malformed cursor is a 400 naming the parameter.
	for _, path := range []string{"jobs?after=zzz", "batches?after=zzz", "jobs?state=pending&after=" + jid} {
		b.do("GET", path, operateToken, nil).problem(t, http.StatusBadRequest, "invalid", `query parameter "after"`)
	}
	b.do("GET", "jobs?after="+jid, operateToken, nil).ok(t, http.StatusOK, &list)

	// Hosts: every key a daemon writes is documented.
	b.daemon()
	var hosts map[string]any
	eventually(t, "the daemon's host node", func() bool {
		b.do("GET", "hosts", operateToken, nil).ok(t, http.StatusOK, &hosts)
		hs, _ := hosts["items"].([]any)
		return len(hs) == 1
	})
	h := hosts["items"].([]any)[0].(map[string]any)
	if _, ok := h["access_workers"]; !ok {
		t.Logf("the test daemon works no access queue: %v", h)
	}
	props := schemaProps(t, "Host", "")
	conforms(t, "GET /hosts", h, props)
	if _, ok := props["access_workers"]; !ok {
		t.Error("Host lacks access_workers")
	}
	evProps := schemaProps(t, "Event", "")
	kinds, _ := evProps["kind"]["enum"].([]any)
	for _, k := range []string{events.KindJob, events.KindBatch, events.KindProgress, events.KindAdmin, events.KindAccess} {
		if !slices.Contains(kinds, any(k)) {
			t.Errorf("Event.kind enum %v lacks %q", kinds, k)
		}
	}
	raw, _ := json.Marshal(events.Event{AccessID: "small/qid0000000001", RecoveredBy: "h"})
	var ev map[string]any
	must(t, json.Unmarshal(raw, &ev))
	conforms(t, "an event", ev, evProps)
}

// Refusals tell an HTTP caller the request to make, not the CLI's flags;
// a batch or job whose collection is held is not released into a daemon
// that would hold it again at once: the refusal names the collection's
// hold and how to lift it.
func TestRefusalsSpeakToTheAPICaller(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bt := b.batch("uuid-refuse", "demo")
	failed := b.job(bt.ID, 5, 0, queue.Estimating, queue.Failed)
	lock, err := b.q.LockJob(t.Context(), failed)
	must(t, err)
	p := b.do("POST", "jobs/"+failed+"/requeue", operateToken, nil).problem(t, 409, "locked", "(no live ingestq host: another program, or a daemon that died) is working on it",
		"POST /api/v1/jobs/"+failed+`/fail with {"force": true}`)
	if strings.Contains(p.Detail, "`ingestq ") || strings.Contains(p.Detail, "--force") {
		t.Errorf("detail %q names the CLI", p.Detail)
	}
	must(t, b.q.UnlockJob(t.Context(), lock))
	p = b.do("PUT", "holds/collections/typo", adminToken, nil).problem(t, 409, "refused", "?force=true")
	if strings.Contains(p.Detail, "--force") {
		t.Errorf("detail %q names the CLI's flag", p.Detail)
	}

	// A batch Held by its collection's hold.
	held := b.batch("uuid-held", "demo")
	hb, err := b.q.LockBatch(t.Context(), held.ID)
	must(t, err)
	must(t, b.q.SetBatchStatus(t.Context(), hb, queue.Held, queue.BatchChange{Release: true}))
	b.do("PUT", "holds/collections/demo?force=true", adminToken, nil).ok(t, http.StatusOK, nil)
	b.do("POST", "batches/"+held.ID+"/release", operateToken, nil).problem(t, 409, "refused",
		"its collection demo is held", "DELETE /api/v1/holds/collections/demo first")
	var detail map[string]any
	b.do("GET", "batches/"+held.ID, operateToken, nil).ok(t, http.StatusOK, &detail)
	if h, _ := detail["hold"].(string); !strings.Contains(h, "collection demo is held") {
		t.Errorf("a Held batch's hold %q: want its collection's hold named", h)
	}
	if line := b.cli("release", "batch", held.ID); !strings.Contains(line, "`ingestq release collection demo` first") {
		t.Errorf("CLI: %q", line)
	}
	b.do("DELETE", "holds/collections/demo", adminToken, nil).ok(t, http.StatusOK, nil)

	// A Completed job, a Completed batch, a job requeued after its batch
	// reported: the advice names the request, where the CLI's names the
	// command (decision 249).
	done := b.batch("uuid-done", "demo")
	completed := b.job(done.ID, 5, 0, queue.Estimating, queue.Provisioning, queue.Downloading, queue.Processing,
		queue.Storing, queue.Recording, queue.Notify, queue.Completed)
	again := b.job(done.ID, 5, 0, queue.Estimating, queue.Failed)
	inflight := b.job(done.ID, 5, 0, queue.Estimating)
	b.processing(done.ID)
	for _, st := range []queue.State{queue.Reporting, queue.Completed} {
		db, err := b.q.LockBatch(t.Context(), done.ID)
		must(t, err)
		must(t, b.q.SetBatchStatus(t.Context(), db, st, queue.BatchChange{Release: true}))
	}
	noCLI := func(p api.Problem) {
		t.Helper()
		if strings.Contains(p.Detail, "ingestq ") {
			t.Errorf("detail %q names the CLI", p.Detail)
		}
	}
	noCLI(b.do("DELETE", "jobs/"+completed, adminToken, nil).problem(t, 409, "refused",
		"job "+completed+" is Completed; only DELETE /api/v1/jobs/"+completed+"?purge=true removes it"))
	noCLI(b.do("DELETE", "jobs/"+inflight, adminToken, nil).problem(t, 409, "refused", "still in the pipeline",
		"POST /api/v1/jobs/"+inflight+"/fail, then DELETE /api/v1/jobs/"+inflight))
	noCLI(b.do("POST", "batches/"+done.ID+"/report", operateToken, nil).problem(t, 409, "refused",
		"its report is in its status-report; GET /api/v1/batches/"+done.ID+" shows it"))
	var requeued struct{ Message string }
	b.do("POST", "jobs/"+again+"/requeue", operateToken, nil).ok(t, http.StatusOK, &requeued)
	if want := "POST /api/v1/batches/" + done.ID + "/report reports it again"; !strings.HasSuffix(requeued.Message, want) {
		t.Errorf("requeue: %q, want it to end %q", requeued.Message, want)
	}
	if line := b.cli("delete", completed); !strings.Contains(line, "only `ingestq delete --purge "+completed+"` removes it") {
		t.Errorf("CLI: %q", line)
	}
	if line := b.cli("report", done.ID); !strings.Contains(line, "`ingestq show "+done.ID+"` shows it") {
		t.Errorf("CLI: %q", line)
	}

	var o struct{ State string }
	a := b.do("POST", "batches/"+held.ID+"/release", operateToken, nil)
	a.ok(t, http.StatusOK, &o)
	if o.State != "Pending" {
		t.Errorf("release after the collection's: %+v", o)
	}
}

// A Failed batch whose every job was purged is not reported again: there
// is nothing left to report (it would end Completed with no jobs).
func TestReportOfABatchWithEveryJobPurged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bt := b.batch("uuid-purged", "demo")
	jid := b.job(bt.ID, 5, 0, queue.Estimating, queue.Failed)
	b.processing(bt.ID)
	x, err := b.q.LockBatch(t.Context(), bt.ID)
	must(t, err)
	must(t, b.q.SetBatchStatus(t.Context(), x, queue.Reporting, queue.BatchChange{}))
	must(t, b.q.SetBatchStatus(t.Context(), x, queue.Failed, queue.BatchChange{Release: true,
		Report: &queue.StatusReport{SuccessfulJobs: []string{}, FailedJobs: []string{jid}}}))
	b.do("DELETE", "jobs/"+jid+"?purge=true", adminToken, nil).ok(t, http.StatusOK, nil)
	b.do("POST", "batches/"+bt.ID+"/report", operateToken, nil).problem(t, 409, "refused",
		"no job left to report", "DELETE /api/v1/batches/"+bt.ID+" removes the batch")
}

// pathParams gives each path parameter of the OpenAPI document a real value.
var pathParams = strings.NewReplacer("{id}", "bid0000000001", "{jid}", "jid0000000001", "{name}", "demo",
	"{ark}", "ark:/99999/fk4none", "{queue}", "small", "{qid}", "qid0000000001")

// Every answer the server gives for a documented path is listed by its
// operation, found by asking the server: a body over the limit (413) or
// not JSON (415) for each operation that takes one, the access request
// without an inventory (503, its Retry-After described); and a method a
// path does not take is the 405 the document describes, with the path's
// documented methods in Allow.
func TestEveryOperationListsWhatItAnswers(t *testing.T) {
	t.Parallel()
	b := setup(t, withObject(t, "ark:/99999/fk4doc", 3))
	var doc struct {
		openAPIDoc
		Components struct {
			Responses map[string]struct {
				Headers map[string]any `json:"headers"`
			} `json:"responses"`
		} `json:"components"`
	}
	must(t, json.Unmarshal(api.OpenAPI(), &doc))
	var raw struct {
		Paths map[string]map[string]struct {
			RequestBody any `json:"requestBody"`
		} `json:"paths"`
	}
	must(t, json.Unmarshal(api.OpenAPI(), &raw))
	if _, ok := doc.Components.Responses["MethodNotAllowed"].Headers["Allow"]; !ok {
		t.Error("components.responses.MethodNotAllowed does not describe its Allow header")
	}
	if _, ok := doc.Components.Responses["Unavailable"].Headers["Retry-After"]; !ok {
		t.Error("components.responses.Unavailable does not describe its Retry-After header")
	}
	send := func(method, path, contentType, body string) answer {
		t.Helper()
		return b.doAs(method, path, adminToken, contentType, body)
	}
	listed := func(what string, op openAPIOperation, status int) {
		t.Helper()
		if _, ok := op.Responses[strconv.Itoa(status)]; !ok {
			t.Errorf("%s answers %d, which its operation does not list", what, status)
		}
	}
	huge := `{"x": "` + strings.Repeat("a", 1<<20) + `"}`
	bodies := 0
	// The methods the document gives a target: of every path that matches
	// it (/jobs/actions is also a /jobs/{jid}).
	methodsOf := func(target string) []string {
		var methods []string
		for path, ops := range doc.Paths {
			segs := strings.Split(path, "/")
			for i, seg := range segs {
				switch {
				case seg == "{ark}":
					segs[i] = ".+"
				case strings.HasPrefix(seg, "{"):
					segs[i] = "[^/]+"
				default:
					segs[i] = regexp.QuoteMeta(seg)
				}
			}
			if !regexp.MustCompile("^" + strings.Join(segs, "/") + "$").MatchString(target) {
				continue
			}
			for method := range ops {
				if m := strings.ToUpper(method); !slices.Contains(methods, m) {
					methods = append(methods, m)
				}
			}
		}
		slices.Sort(methods)
		return methods
	}
	for path, ops := range doc.Paths {
		target := pathParams.Replace(path)
		for method, op := range ops {
			if raw.Paths[path][method].RequestBody == nil {
				continue
			}
			bodies++
			what := strings.ToUpper(method) + " " + path
			a := send(strings.ToUpper(method), target, "application/json", huge)
			a.problem(t, http.StatusRequestEntityTooLarge, "too-large")
			listed(what, op, a.status)
			a = send(strings.ToUpper(method), target, "text/plain", "{}")
			a.problem(t, http.StatusUnsupportedMediaType, "unsupported-media-type")
			listed(what, op, a.status)
		}
		a := send("PATCH", target, "application/json", "{}")
		a.problem(t, http.StatusMethodNotAllowed, "method-not-allowed")
		allow := strings.Split(strings.ReplaceAll(a.header.Get("Allow"), " ", ""), ",")
		allow = slices.DeleteFunc(allow, func(m string) bool { return m == "HEAD" }) // the mux answers HEAD for a GET
		slices.Sort(allow)
		if methods := methodsOf(target); !slices.Equal(allow, methods) {
			t.Errorf("PATCH %s: Allow %q, the document has %v", path, a.header.Get("Allow"), methods)
		}
	}
	if bodies < 4 {
		t.Errorf("%d operations take a body: fewer than the API has", bodies)
	}
	// The access request reads the inventory first: without one, 503.
	a := setup(t).do("POST", "access", operateToken, map[string]any{"ark": "ark:/99999/fk4none"})
	a.problem(t, http.StatusServiceUnavailable, "unavailable")
	listed("POST /api/v1/access", doc.Paths["/api/v1/access"]["post"], a.status)
	listed("POST /api/v1/access", doc.Paths["/api/v1/access"]["post"], http.StatusConflict) // a refused or stale write
}
