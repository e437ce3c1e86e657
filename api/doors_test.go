package api_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"testing"

	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
)

// cliWords finds a command line or a flag of the CLI in a text.
var cliWords = regexp.MustCompile("`ingestq|ingestq (hold|holds|release|requeue|fail|delete|report|show|ls|hosts|submit|cancel|check|cleanup|object|access|events)\\b|--force|--purge")

// No answer of the API names the CLI: every action on a job in each state
// (twice, so that its second answer is the one for a job already moved),
// on a job a daemon holds, on a batch in each state, in bulk, with the
// ingest queue and the collection held and then released; and what each
// Held job and batch, and the holds listing, say of their release.
func TestNoAnswerNamesTheCLI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.publishDemo()
	answers := 0
	check := func(what string, a answer) {
		t.Helper()
		answers++
		var body struct{ Message, Detail, Hold string }
		must(t, json.Unmarshal(a.body, &body))
		if text := body.Message + " " + body.Detail + " " + body.Hold; cliWords.MatchString(text) {
			t.Errorf("%s: %d %q names the CLI", what, a.status, text)
		}
	}
	walk := b.batch("uuid-walk", "demo")
	paths := [][]queue.State{{}, {queue.Held}, {queue.Estimating}, {queue.Estimating, queue.Failed},
		{queue.Estimating, queue.Failed, queue.Deleted},
		{queue.Estimating, queue.Provisioning, queue.Downloading, queue.Processing, queue.Storing, queue.Recording, queue.Notify},
		{queue.Estimating, queue.Provisioning, queue.Downloading, queue.Processing, queue.Storing, queue.Recording, queue.Notify, queue.Completed}}
	var jids []string
	for _, p := range paths {
		jids = append(jids, b.job(walk.ID, 5, 0, p...))
	}
	b.processing(walk.ID)
	// A batch in each state, and a job requeued after its batch reported.
	batches := map[queue.State]string{queue.Pending: b.batch("uuid-pending", "demo").ID}
	held := b.batch("uuid-held", "demo")
	x, err := b.q.LockBatch(t.Context(), held.ID)
	must(t, err)
	must(t, b.q.SetBatchStatus(t.Context(), x, queue.Held, queue.BatchChange{Release: true}))
	batches[queue.Held] = held.ID
	batches[queue.Processing] = walk.ID
	for _, end := range []queue.State{queue.Completed, queue.Failed} {
		bt := b.batch("uuid-"+string(end), "demo")
		jids = append(jids, b.job(bt.ID, 5, 0, queue.Estimating, queue.Failed))
		b.processing(bt.ID)
		x, err := b.q.LockBatch(t.Context(), bt.ID)
		must(t, err)
		must(t, b.q.SetBatchStatus(t.Context(), x, queue.Reporting, queue.BatchChange{}))
		must(t, b.q.SetBatchStatus(t.Context(), x, end, queue.BatchChange{Release: true,
			Report: &queue.StatusReport{SuccessfulJobs: []string{}, FailedJobs: []string{jids[len(jids)-1]}}}))
		batches[end] = bt.ID
	}

	reads := func(round string) {
		t.Helper()
		for _, jid := range jids {
			check(round+" GET job "+jid, b.do("GET", "jobs/"+jid, readToken, nil))
		}
		for _, bid := range batches {
			check(round+" GET batch "+bid, b.do("GET", "batches/"+bid, readToken, nil))
		}
		var rows struct{ Items []struct{ Hold string } }
		b.do("GET", "jobs?state=held", readToken, nil).ok(t, http.StatusOK, &rows)
		var holds struct {
			Items []struct{ Effect, Release string }
		}
		b.do("GET", "holds", readToken, nil).ok(t, http.StatusOK, &holds)
		for _, h := range holds.Items {
			if cliWords.MatchString(h.Effect + " " + h.Release) {
				t.Errorf("%s GET holds: %+v names the CLI", round, h)
			}
		}
		for _, r := range rows.Items {
			if cliWords.MatchString(r.Hold) {
				t.Errorf("%s GET jobs?state=held: %q names the CLI", round, r.Hold)
			}
		}
	}
	act := func(round string, purge bool) {
		t.Helper()
		for _, jid := range jids {
			for _, a := range []string{"hold", "hold", "release", "release", "fail", "fail", "requeue", "requeue"} {
				check(round+" "+a+" "+jid, b.do("POST", "jobs/"+jid+"/"+a, adminToken, nil))
			}
			check(round+" delete "+jid, b.do("DELETE", "jobs/"+jid, adminToken, nil))
			check(round+" delete again "+jid, b.do("DELETE", "jobs/"+jid, adminToken, nil))
			if purge {
				check(round+" purge "+jid, b.do("DELETE", "jobs/"+jid+"?purge=true", adminToken, nil))
			}
		}
		for _, bid := range batches {
			for _, a := range []string{"hold", "hold", "release", "release", "report", "report", "cancel"} {
				check(round+" "+a+" "+bid, b.do("POST", "batches/"+bid+"/"+a, adminToken, nil))
			}
		}
	}

	// A job a daemon holds: every action is refused, saying what works.
	busy := b.job(walk.ID, 5, 0, queue.Estimating)
	lock, err := b.q.LockJob(t.Context(), busy)
	must(t, err)
	for _, a := range []string{"hold", "release", "requeue", "fail"} {
		check("busy "+a, b.do("POST", "jobs/"+busy+"/"+a, adminToken, nil))
	}
	check("busy delete", b.do("DELETE", "jobs/"+busy, adminToken, nil))
	must(t, b.q.UnlockJob(t.Context(), lock))

	// Held by the ingest queue's hold and the collection's.
	check("hold queue", b.do("PUT", "holds/queues/ingest", adminToken, nil))
	check("hold queue again", b.do("PUT", "holds/queues/ingest", adminToken, nil))
	check("hold collection", b.do("PUT", "holds/collections/demo", adminToken, nil))
	check("hold collection again", b.do("PUT", "holds/collections/demo", adminToken, nil))
	check("hold typo", b.do("PUT", "holds/collections/typo", adminToken, nil))
	reads("held")
	// The Held job is listed with the holds, as the CLI's holds lists it,
	// and its release is the collection's first.
	var all struct{ Items []ops.HeldItem }
	b.do("GET", "holds", readToken, nil).ok(t, http.StatusOK, &all)
	want := ops.HeldItem{Kind: "job", Name: jids[1], Effect: "no daemon takes it (its collection demo is held)",
		Release: "DELETE /api/v1/holds/collections/demo, then POST /api/v1/jobs/" + jids[1] + "/release"}
	if !slices.ContainsFunc(all.Items, func(h ops.HeldItem) bool {
		return h.Since != nil && h.Kind == want.Kind &&
			h.Name == want.Name && h.Effect == want.Effect && h.Release == want.Release
	}) {
		t.Errorf("GET holds: %+v, want %+v among them", all.Items, want)
	}
	act("held", false)
	for _, a := range []string{"hold", "requeue"} {
		var out struct{ Results []json.RawMessage }
		b.do("POST", "jobs/actions", adminToken, map[string]any{"action": a, "jids": jids}).ok(t, http.StatusOK, &out)
		for _, r := range out.Results {
			var res struct {
				Outcome *struct{ Message string }
				Problem *struct{ Detail string }
			}
			must(t, json.Unmarshal(r, &res))
			if res.Outcome != nil && cliWords.MatchString(res.Outcome.Message) || res.Problem != nil && cliWords.MatchString(res.Problem.Detail) {
				t.Errorf("bulk %s: %s names the CLI", a, r)
			}
		}
	}
	reads("bulk")
	check("release collection", b.do("DELETE", "holds/collections/demo", adminToken, nil))
	check("release queue", b.do("DELETE", "holds/queues/ingest", adminToken, nil))
	check("release queue again", b.do("DELETE", "holds/queues/ingest", adminToken, nil))
	reads("released")
	act("released", true)
	reads("purged")
	if answers < 150 {
		t.Errorf("only %d answers checked", answers)
	}
}
