package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// publishDemo publishes the built-in demo profile, as a daemon does.
func (b *bundle) publishDemo() {
	b.t.Helper()
	set, err := profile.NewSet(profile.Default())
	must(b.t, err)
	must(b.t, profile.Publish(b.t.Context(), b.q, set))
}

// A submission makes a Pending batch with what it says (201, with its bid,
// uuid and URL); what ingestq submit refuses, the API refuses, with the
// same message, and no batch is made.
func TestSubmit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.publishDemo()
	var got struct{ BID, UUID, Location string }
	a := b.do("POST", "batches", operateToken, map[string]any{"payload_url": "https://example.org/obj.zip", "profile": "demo",
		"type": "container", "priority": 3, "uuid": "uuid-submit-1", "local_id": "my-id", "erc_what": "A title", "erc_who": "Doe, Jane"})
	a.ok(t, http.StatusCreated, &got)
	if got.UUID != "uuid-submit-1" || !strings.HasPrefix(got.BID, "bid") || a.header.Get("Location") != "/api/v1/batches/"+got.BID {
		t.Fatalf("answer %+v, Location %q", got, a.header.Get("Location"))
	}
	bt, err := b.q.LoadBatch(t.Context(), got.BID)
	must(t, err)
	sub := bt.Submission
	if bt.State() != queue.Pending || sub.Profile != "demo" || sub.Type != "container" || *sub.Priority != 3 ||
		sub.LocalIDs != "my-id" || sub.What != "A title" || sub.Who != "Doe, Jane" || sub.Submitter != "alice" {
		t.Fatalf("batch %s %+v: not what was submitted (the submitter defaults to the token's name, alice)", bt.State(), sub)
	}

	for _, c := range []struct {
		body   any
		status int
		kind   string
		want   []string
	}{
		{`{"payload_url": "https://example.org/x", "profile": "demo"`, 400, "invalid", []string{"malformed JSON body"}},
		{`[1, 2]`, 400, "invalid", []string{"the body: given an array; want an object"}},
		{`{"payload_url": "https://example.org/x", "profile": "demo"} {}`, 400, "invalid", []string{"more than one value"}},
		{"", 400, "invalid", []string{"empty body"}},
		{map[string]any{"payload_url": "https://example.org/x", "profile": "demo", "colour": "red"}, 400, "invalid", []string{`unknown field "colour"`}},
		{map[string]any{"payload_url": "https://example.org/x"}, 400, "invalid", []string{"missing profile"}},
		{map[string]any{"profile": "demo"}, 400, "invalid", []string{"missing payload_url"}},
		{map[string]any{"payload_url": "https://example.org/x", "profile": "demo", "type": "tarball"}, 400, "invalid", []string{`type "tarball": want one of auto, file, container, manifest`}},
		{map[string]any{"payload_url": "https://example.org/x", "profile": "demo", "priority": 100}, 400, "invalid", []string{"priority 100: want 0..99"}},
		{map[string]any{"payload_url": "https://example.org/x", "profile": "nosuch"}, 400, "invalid", []string{`unknown profile "nosuch"`}},
		{map[string]any{"payload_url": "ftp://example.org/x", "profile": "demo"}, 400, "invalid", []string{`scheme "ftp"`, "allowed: http, https"}},
		{map[string]any{"payload_url": "file:///etc/passwd", "profile": "demo"}, 400, "invalid", []string{"does not allow local files"}},
		// url.Parse refuses it, repeating it: named with its password masked.
		{map[string]any{"payload_url": "https://depositor:s3cret%zz@example.org/x", "profile": "demo"}, 400, "invalid",
			[]string{`payload "https://depositor:xxxxx@example.org/x"`, `invalid URL escape "%zz"`}},
		{map[string]any{"payload_url": "https://example.org/x", "profile": "demo", "uuid": "a/b"}, 400, "invalid", []string{"must not contain '/'"}},
		{map[string]any{"payload_url": "https://example.org/x", "profile": "demo", "uuid": "uuid-submit-1"}, 409, "refused", []string{`uuid "uuid-submit-1" is batch `, "GET /api/v1/batches/bid"}},
		// What the one object's fields say is checked as a manifest's line is.
		{map[string]any{"payload_url": "https://example.org/x", "profile": "demo", "primary_id": "hello", "local_id": "l"}, 400, "invalid",
			[]string{`primary_id "hello": not an ARK: want ark:/NAAN/NAME`}},
		{map[string]any{"payload_url": "https://example.org/x", "profile": "demo", "primary_id": "ark:/99999/a b"}, 400, "invalid",
			[]string{`primary_id "ark:/99999/a b"`, "a character an ARK may not hold"}},
		{map[string]any{"payload_url": "https://example.org/x", "profile": "demo", "hash_algorithm": "crc32", "hash_value": "00"}, 400, "invalid",
			[]string{`hash_algorithm "crc32": want md5, sha1, sha256 or sha512`}},
		{map[string]any{"payload_url": "https://example.org/x", "profile": "demo", "hash_algorithm": "md5", "hash_value": "00"}, 400, "invalid",
			[]string{`hash_value "00": md5 digest has 2 characters, want 32`}},
		{map[string]any{"payload_url": "https://example.org/x", "profile": "demo", "hash_value": "00"}, 400, "invalid", []string{"missing hash_algorithm"}},
		{map[string]any{"payload_url": "https://example.org/x", "profile": "demo", "file_name": "../../x.txt"}, 400, "invalid",
			[]string{`file_name "../../x.txt": unsafe file name: a ".." element leaves the folder`}},
	} {
		b.do("POST", "batches", operateToken, c.body).problem(t, c.status, c.kind, c.want...)
	}
	b.do("POST", "batches?x=1", operateToken, map[string]any{}).problem(t, 400, "invalid", `query parameter "x"`)
	// A body that is not JSON.
	req, err := http.NewRequestWithContext(t.Context(), "POST", b.base+"batches", strings.NewReader("payload_url=x"))
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+operateToken)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("a form body: %d, want 415", resp.StatusCode)
	}
	if ids, err := b.q.BatchIDs(t.Context()); err != nil || len(ids) != 1 {
		t.Fatalf("refused submissions made batches: %v %v", ids, err)
	}

	// An ARK of another NAAN than the profile mints is an ARK (an object
	// may keep one minted elsewhere); a hash is kept as the pipeline reads it.
	b.do("POST", "batches", operateToken, map[string]any{"payload_url": "https://example.org/y.txt", "profile": "demo",
		"primary_id": "ark:/12345/zz9", "hash_algorithm": "SHA-256", "hash_value": strings.Repeat("AB", 32)}).ok(t, http.StatusCreated, &got)
	bt, err = b.q.LoadBatch(t.Context(), got.BID)
	must(t, err)
	if sub := bt.Submission; sub.PrimaryID != "ark:/12345/zz9" || sub.HashAlg != "sha256" || sub.HashValue != strings.Repeat("ab", 32) {
		t.Errorf("submission %+v: want the ARK as given and the hash normalised", sub)
	}
}

// A batch's status counts its jobs per state, says how far it is by jobs
// and by bytes, and is found by bid or uuid; an unknown one is 404, a
// malformed bid 400.
func TestBatchStatus(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bt := b.batch("uuid-status", "demo")
	b.job(bt.ID, 5, 100, queue.Estimating, queue.Provisioning, queue.Downloading, queue.Processing, queue.Storing,
		queue.Recording, queue.Notify, queue.Completed)
	b.job(bt.ID, 5, 300, queue.Estimating, queue.Failed)
	b.job(bt.ID, 5, 400, queue.Estimating, queue.Provisioning)
	b.job(bt.ID, 5, 200)
	b.processing(bt.ID)
	var st ops.BatchStatus
	b.do("GET", "batches/uuid-status", readToken, nil).ok(t, http.StatusOK, &st)
	by := st.Jobs.ByState
	if st.BID != bt.ID || st.State != queue.Processing || st.Jobs.Total != 4 || st.Jobs.Finished != 2 ||
		by[queue.Completed] != 1 || by[queue.Failed] != 1 || by[queue.Provisioning] != 1 || by[queue.Pending] != 1 {
		t.Fatalf("status %+v", st)
	}
	if st.Bytes.Total != 1000 || st.Bytes.Finished != 400 || st.Bytes.Done != 400 || st.Bytes.Unknown != 0 || *st.Percent.Jobs != 50 || *st.Percent.Bytes != 40 {
		t.Fatalf("bytes %+v, percent jobs %v bytes %v; want 1000, 400 finished and done, 50%% and 40%%", st.Bytes, *st.Percent.Jobs, *st.Percent.Bytes)
	}
	if st.ETA != nil {
		t.Errorf("ETA %+v before any job was seen moving, want null", st.ETA)
	}
	b.do("GET", "batches/bid9999999999", readToken, nil).problem(t, 404, "not-found", "bid9999999999")
	b.do("GET", "batches/no-such-uuid", readToken, nil).problem(t, 404, "not-found", "no-such-uuid")
	b.do("GET", "batches/bidX", readToken, nil).problem(t, 404, "not-found", "bidX")
}

// A batch's bytes done count a running download's bytes as its progress
// events say, and a job past Downloading whole: the percentage moves while
// a big object downloads, and does not fall back when it moves on.
func TestBatchBytesCountRunningDownloads(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bt := b.batch("uuid-bytes", "demo")
	path := []queue.State{queue.Estimating, queue.Provisioning, queue.Downloading, queue.Processing, queue.Storing,
		queue.Recording, queue.Notify, queue.Completed}
	b.job(bt.ID, 5, 100, path...)
	downloading := b.job(bt.ID, 5, 400, path[:3]...) // in Downloading
	b.job(bt.ID, 5, 200, path[:5]...)                // in Storing
	pending := b.job(bt.ID, 5, 300)
	b.processing(bt.ID)
	bytes := func() (ops.ByteCounts, float64) {
		var st ops.BatchStatus
		b.do("GET", "batches/"+bt.ID, readToken, nil).ok(t, http.StatusOK, &st)
		return st.Bytes, *st.Percent.Bytes
	}
	if got, pct := bytes(); got.Finished != 100 || got.Done != 300 || pct != 30 {
		t.Fatalf("bytes %+v, %v%%; want 100 finished, 300 done (the Storing job's too), 30%%", got, pct)
	}
	progress := func(jid string, done int) {
		b.bus.Publish(events.Event{Kind: events.KindProgress, BatchID: bt.ID, JobID: jid, To: string(queue.Downloading),
			Attrs: map[string]any{"bytes_done": done, "bytes_total": 400}})
	}
	progress(pending, 250) // of no running download: not counted
	progress(downloading, 150)
	eventually(t, "the download's progress counted", func() bool { got, _ := bytes(); return got.Done != 300 })
	if got, pct := bytes(); got.Done != 450 || pct != 45 {
		t.Fatalf("bytes %+v, %v%%; want 450 done (150 of the download's 400), 45%%", got, pct)
	}
	progress(downloading, 900) // more than its estimate: counts its estimate
	eventually(t, "the download's second progress counted", func() bool { got, _ := bytes(); return got.Done != 450 })
	if got, _ := bytes(); got.Done != 700 {
		t.Fatalf("bytes %+v; want 700 done (the download at its estimate)", got)
	}
	b.move(downloading, "", queue.Processing)
	if got, pct := bytes(); got.Done != 700 || pct != 70 {
		t.Fatalf("bytes %+v, %v%% after the download; want 700 done, 70%%", got, pct)
	}
}

// Batches are listed a page at a time, filtered by state and profile.
func TestListBatches(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var want []string
	for i := range 5 {
		bt := b.batch("uuid-list-"+string(rune('a'+i)), map[bool]string{true: "demo", false: "other"}[i%2 == 0])
		want = append(want, bt.ID)
	}
	b.job(want[0], 5, 0)
	var seen []string
	after := ""
	for pages := 0; ; pages++ {
		var page struct {
			Items []struct {
				BID  string         `json:"bid"`
				Jobs map[string]int `json:"jobs"`
			}
			Next *string
		}
		b.do("GET", "batches?limit=2&after="+after, readToken, nil).ok(t, http.StatusOK, &page)
		for _, it := range page.Items {
			seen = append(seen, it.BID)
			if it.BID == want[0] && it.Jobs["batch-processing"] != 1 {
				t.Errorf("batch %s: jobs %v, want 1 processing", it.BID, it.Jobs)
			}
		}
		if page.Next == nil {
			break
		}
		after = *page.Next
		if pages > 5 {
			t.Fatal("paging does not end")
		}
	}
	if strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Fatalf("paged %v, want %v", seen, want)
	}
	var page struct{ Items []struct{ BID string } }
	b.do("GET", "batches?profile=other&state=PENDING", readToken, nil).ok(t, http.StatusOK, &page)
	if len(page.Items) != 2 || page.Items[0].BID != want[1] || page.Items[1].BID != want[3] {
		t.Fatalf("profile other: %+v", page.Items)
	}
	b.do("GET", "batches?state=Storing", readToken, nil).problem(t, 400, "invalid", `unknown batch state "Storing"`)
	b.do("GET", "batches?limit=0", readToken, nil).problem(t, 400, "invalid", "limit")
	b.do("GET", "batches?limit=5000", readToken, nil).problem(t, 400, "invalid", "want 1..1000")
	b.do("GET", "batches?limit=2&limit=3", readToken, nil).problem(t, 400, "invalid", "given 2 times")
}

// Hold, release, report and delete answer with their outcome; what the
// state machine or the queue refuses is 409 with the CLI's message.
func TestBatchActions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bt := b.batch("uuid-actions", "demo")
	var o ops.Outcome
	b.do("POST", "batches/"+bt.ID+"/hold", operateToken, nil).ok(t, http.StatusOK, &o)
	if !o.Changed || o.State != queue.Held || o.Message != "batch "+bt.ID+" held: no daemon makes its jobs until POST /api/v1/batches/"+bt.ID+"/release" {
		t.Fatalf("hold: %+v", o)
	}
	b.do("POST", "batches/uuid-actions/hold", operateToken, nil).ok(t, http.StatusOK, &o)
	if o.Changed || o.Message != "batch "+bt.ID+" was already held: POST /api/v1/batches/"+bt.ID+"/release releases it" {
		t.Fatalf("hold again: %+v", o)
	}
	b.do("POST", "batches/"+bt.ID+"/report", operateToken, nil).problem(t, 409, "refused",
		"batch "+bt.ID+" is Held: it reports by itself when its last job is done; POST /api/v1/batches/"+bt.ID+"/report asks again")
	b.do("POST", "batches/"+bt.ID+"/release", operateToken, nil).ok(t, http.StatusOK, &o)
	b.do("DELETE", "batches/"+bt.ID, adminToken, nil).problem(t, 409, "refused",
		"batch "+bt.ID+" is Pending; only Completed, Failed, Deleted or Held batches can be deleted")
	b.do("POST", "batches/"+bt.ID+"/hold", operateToken, nil).ok(t, http.StatusOK, &o)
	b.do("DELETE", "batches/"+bt.ID, adminToken, nil).ok(t, http.StatusOK, &o)
	if o.Message != "batch "+bt.ID+" removed with its jobs" {
		t.Fatalf("delete: %+v", o)
	}
	b.do("POST", "batches/"+bt.ID+"/release", operateToken, nil).problem(t, 404, "not-found", bt.ID)
}

// Cancelling a batch fails its jobs not yet Storing with "cancelled by"
// the token's name (a job a daemon is working on too); a job in Storing
// finishes, and the batch then reports, Failed. A batch whose jobs are not
// made ends Deleted; a finished one is refused.
func TestCancelBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bt := b.batch("uuid-cancel", "demo")
	pending := b.job(bt.ID, 5, 0)
	held := b.job(bt.ID, 5, 0, queue.Held)
	working := b.job(bt.ID, 5, 0, queue.Estimating, queue.Provisioning, queue.Downloading)
	storing := b.job(bt.ID, 5, 0, queue.Estimating, queue.Provisioning, queue.Downloading, queue.Processing, queue.Storing)
	done := b.job(bt.ID, 5, 0, queue.Estimating, queue.Provisioning, queue.Downloading, queue.Processing, queue.Storing,
		queue.Recording, queue.Notify, queue.Completed)
	b.processing(bt.ID)
	lock, err := b.q.LockJob(t.Context(), working) // a daemon at work on it
	must(t, err)
	b.daemon(reactor.RoleReporting) // reports the batch; works no job

	var o ops.CancelOutcome
	b.do("POST", "batches/uuid-cancel/cancel", operateToken, nil).ok(t, http.StatusOK, &o)
	if strings.Join(o.Cancelled, " ") != strings.Join([]string{pending, held, working}, " ") ||
		strings.Join(o.Finishing, " ") != storing || len(o.Problems) != 0 || !o.Changed {
		t.Fatalf("cancel: %+v", o)
	}
	for _, jid := range []string{pending, held, working} {
		if j := b.jobState(jid); j.State() != queue.Failed || j.Status.Message != "cancelled by alice" {
			t.Errorf("job %s: %s %q, want Failed \"cancelled by alice\"", jid, j.State(), j.Status.Message)
		}
	}
	if b.jobState(storing).State() != queue.Storing || b.jobState(done).State() != queue.Completed {
		t.Fatal("cancel touched a job past Processing")
	}
	// Each cancelled job's timeline has its end, from the same stream.
	flush(t, b.bus)
	var d detail
	b.do("GET", "jobs/"+held, readToken, nil).ok(t, http.StatusOK, &d)
	if n := len(d.Timeline); n != 1 || d.Timeline[0].From != "Held" || d.Timeline[0].To != "Failed" || d.Timeline[0].Message != "cancelled by alice" {
		t.Errorf("timeline of a cancelled job: %+v", d.Timeline)
	}
	// The daemon that held the job finds its view stale.
	if err := b.q.SetJobStatus(t.Context(), lock, queue.Processing, queue.JobChange{Release: true}); err == nil {
		t.Fatal("the working daemon's commit went through after the cancel")
	}
	// The batch reports once its last job is done.
	if st := b.batchState(bt.ID); st != queue.Processing {
		t.Fatalf("batch %s before its storing job is done, want Processing", st)
	}
	b.move(storing, "", queue.Recording, queue.Notify, queue.Completed)
	eventually(t, "the batch reports", func() bool { return b.batchState(bt.ID) == queue.Failed })
	rep, err := b.q.LoadBatch(t.Context(), bt.ID)
	must(t, err)
	if len(rep.Report.FailedJobs) != 3 || len(rep.Report.SuccessfulJobs) != 2 {
		t.Fatalf("report %+v: want 3 failed, 2 successful", rep.Report)
	}
	if want := "3 of 5 jobs failed: 3 cancelled by alice"; rep.Status.Message != want {
		t.Errorf("cancelled batch's message %q, want %q", rep.Status.Message, want)
	}
	b.do("POST", "batches/"+bt.ID+"/cancel", operateToken, nil).problem(t, 409, "refused", "is Failed: it is done, there is nothing to cancel")

	// A batch whose jobs are not made yet; while a daemon makes them it is
	// refused, and nothing changes.
	fresh := b.batch("uuid-cancel-2", "demo")
	making, err := b.q.LockBatch(t.Context(), fresh.ID)
	must(t, err)
	b.do("POST", "batches/"+fresh.ID+"/cancel", operateToken, nil).problem(t, 409, "locked", "a daemon is working on batch "+fresh.ID)
	must(t, b.q.UnlockBatch(t.Context(), making))
	if st := b.batchState(fresh.ID); st != queue.Pending {
		t.Fatalf("a refused cancel left the batch %s", st)
	}
	b.do("POST", "batches/"+fresh.ID+"/cancel", operateToken, nil).ok(t, http.StatusOK, &o)
	if o.State != queue.Deleted || b.batchState(fresh.ID) != queue.Deleted {
		t.Fatalf("cancel of a Pending batch: %+v, batch %s", o, b.batchState(fresh.ID))
	}
	b.do("POST", "batches/bid9999999999/cancel", operateToken, nil).problem(t, 404, "not-found")
	if v, err := b.q.Check(t.Context()); err != nil || len(v) != 0 {
		t.Fatalf("the invariant after cancelling: %v %v", v, err)
	}
}

func (b *bundle) batchState(bid string) queue.State {
	b.t.Helper()
	bt, err := b.q.LoadBatch(b.t.Context(), bid)
	must(b.t, err)
	return bt.State()
}

// A Pending batch waiting for its busy payload server gives, in the batch
// list, the message that says so (as its detail does); before, its row
// read as a batch no daemon had looked at: Pending, no jobs, its
// submission's time.
func TestListedBatchSaysItWaitsForABusyServer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const msg = "waiting for a busy server: fetch http://example.org/batch.checkm: HTTP 503 Service Unavailable; next try at 2026-11-28 01:25:58, spending no attempt"
	busy, err := b.q.LockBatch(t.Context(), b.batch("uuid-busy", "demo").ID)
	must(t, err)
	must(t, b.q.NoteBatch(t.Context(), busy, msg, nil))
	must(t, b.q.UnlockBatch(t.Context(), busy))
	var page struct {
		Items []struct{ BID, Message string }
	}
	b.do("GET", "batches", readToken, nil).ok(t, http.StatusOK, &page)
	if len(page.Items) != 1 || page.Items[0].BID != busy.ID || page.Items[0].Message != msg {
		t.Errorf("GET /batches: %+v; want %s with its message %q", page.Items, busy.ID, msg)
	}
}

// A batch whose unfinished job waits for a busy server has an ETA no
// sooner than its next try, read from the job statuses the batch's view
// reads anyway. Before, the finish rate alone: 10 s for a job deferred
// 15 minutes.
func TestBatchETAWaitsForABusyServer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bt := b.batch("uuid-eta-busy", "demo")
	waiting := b.job(bt.ID, 5, 100, queue.Estimating, queue.Provisioning, queue.Downloading)
	b.processing(bt.ID)
	j, err := b.q.LockJob(t.Context(), waiting)
	must(t, err)
	until := time.Now().Add(15 * time.Minute).UTC().Truncate(time.Second)
	must(t, b.q.UpdateJob(t.Context(), j, queue.JobChange{Message: "waiting for a busy server", Release: true,
		Deferred: &queue.Deferral{Until: until, Host: "test"}}))
	now := time.Now().UTC()
	for i, jid := range []string{"jid9999999990", "jid9999999991"} { // other batches' jobs finish one in 10 s
		b.bus.Publish(events.Event{Kind: events.KindJob, JobID: jid, From: string(queue.Notify), To: string(queue.Completed),
			Time: now.Add(time.Duration(i-2) * 10 * time.Second)})
	}
	flush(t, b.bus)
	var st ops.BatchStatus
	eventually(t, "a batch ETA", func() bool {
		b.do("GET", "batches/"+bt.ID, readToken, nil).ok(t, http.StatusOK, &st)
		return st.ETA != nil
	})
	if d := st.ETA.At.Sub(until).Abs(); d > time.Second || !strings.Contains(st.ETA.Basis, "busy server (1 of 1 unfinished job), at "+until.Format(time.RFC3339)) {
		t.Fatalf("ETA %+v, want at its job's next try %s", st.ETA, until)
	}
}
