package dashboard_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"github.com/ingestq/ingestq/reactor/queue"
)

// cliWords finds a command line or a flag of the CLI in a page.
var cliWords = regexp.MustCompile("`ingestq|ingestq (hold|holds|release|requeue|fail|delete|report|show|ls|hosts|submit|cancel|check|cleanup|object|access|events)\\b|--force|--purge")

// No page of the dashboard names the CLI: what every button does to a job
// in each state (twice), to a job a daemon holds, with the ingest queue
// and the job's collection held and then released; the pages of each job,
// of a Held batch and the overview. A hold says what it stops and how it
// is released: by the job page's button where there is one.
func TestNoPageNamesTheCLI(t *testing.T) {
	b := setup(t)
	bt := b.batch("uuid-doors")
	paths := [][]queue.State{{}, {queue.Held}, {queue.Estimating}, {queue.Estimating, queue.Failed},
		{queue.Estimating, queue.Provisioning, queue.Downloading, queue.Processing, queue.Storing, queue.Recording, queue.Notify, queue.Completed}}
	var jids []string
	for _, p := range paths {
		jids = append(jids, b.job(bt, p...))
	}
	heldJob := jids[1]
	heldBatch := b.batch("uuid-held")
	x, err := b.q.LockBatch(t.Context(), heldBatch.ID)
	must(t, err)
	must(t, b.q.SetBatchStatus(t.Context(), x, queue.Held, queue.BatchChange{Release: true}))
	clean := func(what string, a answer) string {
		t.Helper()
		if m := cliWords.FindString(a.body); m != "" {
			t.Errorf("%s (status %d) names the CLI (%q):\n%s", what, a.status, m, a.body)
		}
		return html.UnescapeString(a.body)
	}
	act := func(round string) {
		t.Helper()
		for _, jid := range jids {
			for _, a := range []string{"hold", "hold", "release", "release", "fail", "fail", "requeue", "requeue", "delete", "delete"} {
				clean(round+" "+a+" "+jid, b.post(adminToken, "/ui/jobs/"+jid, url.Values{"action": {a}}))
			}
		}
	}

	busy := b.job(bt, queue.Estimating)
	lock, err := b.q.LockJob(t.Context(), busy)
	must(t, err)
	for _, a := range []string{"hold", "release", "requeue", "fail", "delete"} {
		clean("busy "+a, b.post(adminToken, "/ui/jobs/"+busy, url.Values{"action": {a}}))
	}
	// The dashboard's Fail does not force: it says the request that does.
	a := b.post(adminToken, "/ui/jobs/"+busy, url.Values{"action": {"fail"}})
	a.is(t, http.StatusConflict, "session 0x", "(no live ingestq host: another program, or a daemon that died) is working on it; try again when its step ends, or POST /api/v1/jobs/"+busy+`/fail with {"force": true}`)
	must(t, b.q.UnlockJob(t.Context(), lock))
	b.post(adminToken, "/ui/jobs/"+jids[2], url.Values{"action": {"requeue"}}).is(t, http.StatusConflict,
		"only a Failed job can be requeued; the Fail button first, to redo a step")

	_, err = b.svc.HoldQueue(t.Context(), queue.QueueIngest)
	must(t, err)
	_, err = b.svc.HoldCollection(t.Context(), "p1", true)
	must(t, err)
	page := clean("held job's page", b.get(readToken, "/ui/jobs/"+heldJob))
	if want := "no daemon takes it; its collection p1 is held too"; !regexp.MustCompile(`id="hold">held since [^<]*` + want).MatchString(page) {
		t.Errorf("the Held job's page: want its hold, %q", want)
	}
	b.get(readToken, "/ui/jobs/"+heldJob).is(t, http.StatusOK,
		"DELETE /api/v1/holds/collections/p1, then Release on the job's page; the ingest queue is held too",
		"DELETE /api/v1/holds/queues/ingest")
	b.get(readToken, "/ui/batches/"+heldBatch.ID).is(t, http.StatusOK, "no daemon makes its jobs; its collection p1 is held too",
		"DELETE /api/v1/holds/collections/p1, then POST /api/v1/batches/"+heldBatch.ID+"/release")
	clean("held batch's page", b.get(readToken, "/ui/batches/"+heldBatch.ID))
	b.get(readToken, "/ui/").is(t, http.StatusOK, "no new step of any batch or job starts (steps under way finish)",
		"Release: DELETE /api/v1/holds/queues/ingest", "daemons send its Pending batches and jobs to Held", "Release: DELETE /api/v1/holds/collections/p1")
	clean("overview", b.get(readToken, "/ui/"))
	b.post(adminToken, "/ui/jobs/"+heldJob, url.Values{"action": {"release"}}).is(t, http.StatusConflict,
		"DELETE /api/v1/holds/collections/p1 first, then Release on the job's page")
	act("held")

	_, err = b.svc.ReleaseCollection(t.Context(), "p1")
	must(t, err)
	_, err = b.svc.ReleaseQueue(t.Context(), queue.QueueIngest)
	must(t, err)
	act("released")
	for _, jid := range append(jids, busy) {
		clean("page of "+jid, b.get(readToken, "/ui/jobs/"+jid))
	}
	clean("overview", b.get(readToken, "/ui/"))
}
