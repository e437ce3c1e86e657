package handlers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/api"
	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/notify"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/internal/freeport"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// reportCallbackRig is a rig whose profile POSTs each batch report to a
// flakyCallback, and e-mails it to a sink.
func reportCallbackRig(t *testing.T, failures int32, fail int, opts ...rigOption) (*rig, *flakyCallback, *smtpSink) {
	t.Helper()
	cb := newFlakyCallback(t, failures, fail)
	sink := startSMTPSink(t)
	prof := profile.Default()
	prof.ReportCallback, prof.Notify = cb.url, []string{"curator@example.org"}
	return newRig(t, prof, append([]rigOption{mailsTo(sink)}, opts...)...), cb, sink
}

// received decodes the i-th request the callback server got.
func (cb *flakyCallback) received(t *testing.T, i int) (handlers.ReportCallback, map[string]any) {
	t.Helper()
	cb.mu.Lock()
	defer cb.mu.Unlock()
	if i >= len(cb.bodies) {
		t.Fatalf("request %d of the report callback: only %d came", i, len(cb.bodies))
	}
	var got handlers.ReportCallback
	var raw map[string]any
	if json.Unmarshal(cb.bodies[i], &got) != nil || json.Unmarshal(cb.bodies[i], &raw) != nil {
		t.Fatalf("request %d: %q is not the report's JSON", i, cb.bodies[i])
	}
	return got, raw
}

// mails counts the reports e-mailed so far: Report has returned before
// the batch moved, and the sink keeps a message before accepting it.
func (s *smtpSink) mails() int { return len(s.msgs) }

// documented checks that every key of a callback's JSON (and of a report
// callback's report) is in the OpenAPI document's schema of that name, and
// that it has each key the schema requires.
func documented(t *testing.T, schema string, raw map[string]any) {
	t.Helper()
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Required   []string                   `json:"required"`
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(api.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	var report struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(doc.Components.Schemas["BatchStatus"].Properties["report"], &report)
	sch, ok := doc.Components.Schemas[schema]
	if !ok {
		t.Fatalf("the OpenAPI document has no schema %s", schema)
	}
	for k := range raw {
		if _, ok := sch.Properties[k]; !ok {
			t.Errorf("callback key %q is not in the OpenAPI schema %s", k, schema)
		}
	}
	for _, k := range sch.Required {
		if _, ok := raw[k]; !ok {
			t.Errorf("callback lacks %q, which the OpenAPI schema %s requires", k, schema)
		}
	}
	rep, _ := raw["report"].(map[string]any)
	for k := range rep {
		if _, ok := report.Properties[k]; !ok {
			t.Errorf("report callback's report key %q is not in the OpenAPI schema", k)
		}
	}
}

// A batch report is POSTed to the profile's report_callback: the batch's
// state and message, its counts, each completed job's ARK and each failed
// job's reason, as the status-report node has them, under an id the
// receiver dedupes on. A callback refused for good (404) is not tried
// again; the batch stays Failed as its jobs made it, and its message says
// that the report was not delivered, that it is kept, and how to send it
// again; `report BID` does, under a new id.
func TestReportCallback(t *testing.T) {
	t.Parallel()
	r, cb, sink := reportCallbackRig(t, 1, http.StatusNotFound)
	b, jobs := reportBatch(t, r)
	bad := jobs["bad.txt"]
	if n := cb.hits.Load(); n != 1 {
		t.Errorf("report callback: %d requests, want 1 (a 404 is not retried)", n)
	}
	want := fmt.Sprintf("1 of 3 jobs failed; report not delivered: report callback %s: HTTP 404 Not Found, body \"boom\\n\"; "+
		"the report is kept: `ingestq show %s` (or GET /api/v1/batches/%s) gives it; "+
		"`ingestq report %s` (or POST /api/v1/batches/%s/report) sends it again", cb.url, b.ID, b.ID, b.ID, b.ID)
	if b.Status.Message != want {
		t.Errorf("batch message\n%q, want\n%q", b.Status.Message, want)
	}
	if b.Report == nil || len(b.Report.SuccessfulJobs) != 2 || b.Report.Failures[bad.ID] != bad.Status.Message {
		t.Errorf("status-report %+v: want it kept, 2 completed and %s's reason", b.Report, bad.ID)
	}
	if n := sink.mails(); n != 1 {
		t.Errorf("%d reports e-mailed, want 1 (the e-mail went; only the callback failed)", n)
	}
	first, _ := cb.received(t, 0)

	r.ingestq("report", b.ID)
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Failed || b.Status.Message != "1 of 3 jobs failed" {
		t.Fatalf("reported again: batch %s %q, want Failed \"1 of 3 jobs failed\"", b.State(), b.Status.Message)
	}
	if h, d := cb.hits.Load(), cb.delivered.Load(); h != 2 || d != 1 {
		t.Fatalf("report callback: %d requests, %d delivered; want 2 and 1", h, d)
	}
	got, raw := cb.received(t, 1)
	documented(t, "ReportCallback", raw)
	if _, ok := raw["notes"]; ok || raw["notes_left_out"] != nil {
		t.Errorf("report callback of jobs with no note has notes %v, %v: want neither key", raw["notes"], raw["notes_left_out"])
	}
	if got.ReportID == first.ReportID || !strings.HasPrefix(got.ReportID, b.ID+".") || !strings.HasPrefix(first.ReportID, b.ID+".") {
		t.Errorf("report ids %q then %q: want two, each of the batch", first.ReportID, got.ReportID)
	}
	if got.BID != b.ID || got.UUID != b.UUID() || got.UUID == "" || got.Profile != "demo" || got.State != queue.Failed ||
		got.Message != "1 of 3 jobs failed" || !got.Update || got.SuccessfulCount != 2 || got.FailedCount != 1 || first.Update {
		t.Errorf("report callback %+v (first %+v)", got, first)
	}
	if _, err := time.Parse(time.RFC3339, got.Report.LastModified); err != nil {
		t.Errorf("report's last_modified %q: not RFC 3339", got.Report.LastModified)
	}
	if len(got.Report.FailedJobs) != 1 || got.Report.FailedJobs[0] != bad.ID || got.Report.Failures[bad.ID] != bad.Status.Message {
		t.Errorf("report's failures %v %v, want %s: %q", got.Report.FailedJobs, got.Report.Failures, bad.ID, bad.Status.Message)
	}
	if id := got.Report.FailedObjects[bad.ID]; id == nil || !slices.Equal(id.LocalIDs, []string{"local-bad.txt"}) {
		t.Errorf("report's failed_objects[%s] = %+v, want its local id local-bad.txt", bad.ID, id)
	}
	for _, name := range []string{"one.txt", "two.txt"} {
		j := jobs[name]
		ark := r.checkStored(j, object{name: []byte("content of " + name + "\n")})
		if id := got.Report.Identified[j.ID]; id == nil || id.PrimaryID != ark {
			t.Errorf("report's objects[%s] = %+v, want %s", j.ID, id, ark)
		}
	}
}

// A job's note (here, of a file Windows cannot hold) is in the report
// callback by the job's id, a completed job's and a failed one's (which
// failed after Processing noted it); a job with none has no entry.
func TestReportCallbackGivesEachJobsNote(t *testing.T) {
	t.Parallel()
	failStoring := func(_ *handlers.Config, rc *reactor.Config) {
		rc.Jobs = map[queue.State]reactor.JobHandler{queue.Storing: reactor.JobHandlerFunc(func(_ context.Context, s *reactor.Step) (reactor.Result, error) {
			if s.Job.Config.FileName == "AUX.txt" {
				return reactor.Result{}, reactor.Fatal(errors.New("test: refused"))
			}
			return reactor.Result{}, nil
		})}
	}
	r, cb, _ := reportCallbackRig(t, 0, 0, failStoring)
	var rows []row
	for _, name := range []string{"CON.txt", "AUX.txt", "plain.txt"} {
		data := []byte("content of " + name + "\n")
		rows = append(rows, fileRow(r.content.put("/n/"+name, data), name, data))
	}
	b := r.submit(r.content.put("/notes.checkm", manifest("mrt-single-file-batch-manifest", rows...)))
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Failed {
		t.Fatalf("batch %s %q, want Failed (AUX.txt's job)", b.State(), b.Status.Message)
	}
	jobs := map[string]*queue.Job{}
	for _, j := range r.jobsOf(b.ID) {
		jobs[j.Config.FileName] = j
	}
	const noteOf = `note: every file is stored under its own name, but these are names Windows cannot hold, so unpacking the object there fails or changes them: `
	con, aux := jobs["CON.txt"], jobs["AUX.txt"]
	want := map[string]any{
		con.ID: noteOf + `"CON.txt" ("CON.txt" is the device CON)`,
		aux.ID: noteOf + `"AUX.txt" ("AUX.txt" is the device AUX)`,
	}
	if con.Status.Message != want[con.ID] || aux.State() != queue.Failed || queue.Note(aux.Status.Message) != want[aux.ID] {
		t.Fatalf("jobs: CON.txt's message %q; AUX.txt's %s %q; want the notes %q", con.Status.Message, aux.State(), aux.Status.Message, want)
	}
	got, raw := cb.received(t, 0)
	documented(t, "ReportCallback", raw)
	if notes, _ := raw["notes"].(map[string]any); !maps.Equal(notes, want) || raw["notes_left_out"] != nil {
		t.Errorf("report callback's notes %v (%v left out), want %v", raw["notes"], raw["notes_left_out"], want)
	}
	if len(got.Report.SuccessfulJobs) != 2 || got.Report.Identified[con.ID] == nil {
		t.Errorf("report callback's report %+v, want 2 completed jobs and %s's object", got.Report, con.ID)
	}
}

// A report callback that fails for a while (a 5xx, a 429, a cut
// connection, no answer in time) is retried by the HTTP client, then by
// the reactor, every request under the same report id; the e-mail, which
// went, is not sent again, and the batch completes with no word of it.
// The rig's HTTP client makes 2 requests a try, so 3 failures take a
// second try of the step.
func TestReportCallbackOutageRetried(t *testing.T) {
	t.Parallel()
	for _, fail := range []int{http.StatusInternalServerError, http.StatusTooManyRequests, cutConnection, stall} {
		t.Run(fmt.Sprint(fail), func(t *testing.T) {
			t.Parallel()
			var logs logtest.Buffer
			shortTimeout := func(hc *handlers.Config, _ *reactor.Config) { hc.Fetch.Timeout = 300 * time.Millisecond }
			r, cb, sink := reportCallbackRig(t, 3, fail, withAttempts(3, 5*time.Millisecond), withLogs(t, &logs), shortTimeout)
			b, _ := reportBatch(t, r)
			if h, d := cb.hits.Load(), cb.delivered.Load(); h != 4 || d != 1 {
				t.Errorf("report callback: %d requests, %d delivered; want 4 and 1", h, d)
			}
			if b.Status.Message != "1 of 3 jobs failed" {
				t.Errorf("batch message %q, want \"1 of 3 jobs failed\"", b.Status.Message)
			}
			if lines := logs.Lines("reactor: reporter failed; retrying", "id="+b.ID); len(lines) != 1 {
				t.Errorf("the reactor's retries of the report in the log: %q, want 1", lines)
			}
			if n := sink.mails(); n != 1 {
				t.Errorf("%d reports e-mailed, want 1", n)
			}
			first, _ := cb.received(t, 0)
			for i := 1; i < 4; i++ {
				if got, _ := cb.received(t, i); got.ReportID != first.ReportID {
					t.Errorf("request %d's report id %q, the first's %q: want one", i, got.ReportID, first.ReportID)
				}
			}
		})
	}
}

// A report callback that keeps failing leaves a batch whose jobs all
// completed Completed, as Merritt's readers must read it: its message
// says that only the report's delivery failed, and the report is kept.
func TestReportCallbackUndeliveredKeepsTheBatchCompleted(t *testing.T) {
	t.Parallel()
	r, cb, _ := reportCallbackRig(t, -1, http.StatusInternalServerError)
	data := []byte("reported to nobody\n")
	b := r.submit(r.content.put("/u.checkm", manifest("mrt-ingest-manifest", fileRow(r.content.put("/u.txt", data), "u.txt", data))))
	b = r.waitBatch(b.ID, queue.Completed, queue.Failed)
	want := fmt.Sprintf("report not delivered: report callback %s: HTTP 500 Internal Server Error (2 requests), body \"boom\\n\"; "+
		"the report is kept: `ingestq show %s` (or GET /api/v1/batches/%s) gives it; every job completed: only the report's delivery failed",
		cb.url, b.ID, b.ID)
	if b.State() != queue.Completed || b.Status.Message != want {
		t.Errorf("batch %s %q, want Completed %q", b.State(), b.Status.Message, want)
	}
	if n := cb.hits.Load(); n != 4 {
		t.Errorf("report callback: %d requests, want 4 (2 tries of 2)", n)
	}
	if b.Report == nil || len(b.Report.SuccessfulJobs) != 1 || len(b.Report.Identified) != 1 {
		t.Errorf("status-report %+v: want it kept, with the object", b.Report)
	}
}

// So does an e-mail that cannot be sent (decision 33, revised): the
// batch's state is its jobs' outcome, and the message says why no report
// came.
func TestReportNotEmailedKeepsTheBatchCompleted(t *testing.T) {
	t.Parallel()
	closed, err := freeport.Addr() // nothing listens there: the connection is refused
	if err != nil {
		t.Fatal(err)
	}
	prof := profile.Default()
	prof.Notify = []string{"curator@example.org"}
	r := newRig(t, prof, func(hc *handlers.Config, _ *reactor.Config) {
		hc.Mailer = &notify.Mailer{Addr: closed, From: "ingestq@example.org"}
	})
	data := []byte("e-mailed to nobody\n")
	b := r.submit(r.content.put("/m.checkm", manifest("mrt-ingest-manifest", fileRow(r.content.put("/m.txt", data), "m.txt", data))))
	b = r.waitBatch(b.ID, queue.Completed, queue.Failed)
	msg := b.Status.Message
	if b.State() != queue.Completed || !strings.HasPrefix(msg, "report not delivered: e-mailing the report of "+b.ID+": ") ||
		!strings.Contains(msg, closed) || !strings.HasSuffix(msg, "every job completed: only the report's delivery failed") {
		t.Errorf("batch %s %q: want Completed, the report not e-mailed to %s", b.State(), msg, closed)
	}
}
