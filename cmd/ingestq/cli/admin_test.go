package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/handlers/mint"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

func TestHoldReleaseJobAndBatch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	out, _, code := f.run("hold", "job", f.p1)
	wantCode(t, code, 0)
	if out != "job "+f.p1+" held: no daemon takes it until `ingestq release job "+f.p1+"`\n" || f.jobState(f.p1) != queue.Held {
		t.Errorf("hold job: %q, state %s", out, f.jobState(f.p1))
	}
	out, _, code = f.run("release", "job", f.p1)
	wantCode(t, code, 0)
	if out != "job "+f.p1+" released: back to Pending, where a daemon takes it\n" || f.jobState(f.p1) != queue.Pending {
		t.Errorf("release job: %q, state %s", out, f.jobState(f.p1))
	}
	// A Failed job cannot be held: refused, saying what can be held and
	// that no daemon takes it (not that `fail`, refused too, stops it).
	_, stderr, code := f.run("hold", "job", f.failed)
	wantCode(t, code, 1)
	wantErrLine(t, stderr, f.failed, "Failed", "only a Pending job can be held", "no daemon takes it until it is requeued")
	if strings.Contains(stderr, "ingestq fail") {
		t.Errorf("hold of a Failed job advises a fail, which is refused too: %q", stderr)
	}

	out, _, code = f.run("hold", "batch", "uuid-b2")
	wantCode(t, code, 0)
	if out != "batch "+f.b2+" held: no daemon makes its jobs until `ingestq release batch "+f.b2+"`\n" || f.batchState(f.b2) != queue.Held {
		t.Errorf("hold batch: %q, state %s", out, f.batchState(f.b2))
	}
	out, _, code = f.run("release", "batch", f.b2)
	wantCode(t, code, 0)
	if out != "batch "+f.b2+" released: back to Pending, where a daemon makes its jobs\n" || f.batchState(f.b2) != queue.Pending {
		t.Errorf("release batch: %q, state %s", out, f.batchState(f.b2))
	}
	// Doing it twice is not an error, for a job or a batch as for a queue.
	out, _, code = f.run("release", "batch", f.b2)
	wantCode(t, code, 0)
	if out != "batch "+f.b2+" was not held (it is Pending)\n" {
		t.Errorf("release batch twice: %q", out)
	}
	f.run("hold", "job", f.p1)
	out, _, code = f.run("hold", "job", f.p1)
	wantCode(t, code, 0)
	if out != "job "+f.p1+" was already held: `ingestq release job "+f.p1+"` releases it\n" || f.jobState(f.p1) != queue.Held {
		t.Errorf("hold job twice: %q, state %s", out, f.jobState(f.p1))
	}
}

func TestHoldReleaseJobLocked(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	j, err := f.q.LockJob(t.Context(), f.p1) // a daemon at work
	f.ok(err)
	_, stderr, code := f.run("hold", "job", f.p1)
	wantCode(t, code, 1)
	// Said once, plainly: the job, its state, who holds it, what to do.
	locked, err := f.q.LoadJob(t.Context(), f.p1)
	f.ok(err)
	advice := "; only a Pending job can be held; `ingestq fail --force " + f.p1 + "` stops it (the daemon abandons its step)\n"
	if want := fmt.Sprintf("ingestq: job %s is Pending and session 0x%x (no live ingestq host: another program, or a daemon that died) is working on it", f.p1, locked.LockSession) + advice; stderr != want {
		t.Errorf("hold job of a foreign lock:\n%q, want\n%q", stderr, want)
	}
	f.ok(f.q.RegisterHost(t.Context(), "hf1", []byte(`{"name":"hf1","pid":1}`))) // the lock's session is a live host's
	_, stderr, code = f.run("hold", "job", f.p1)
	wantCode(t, code, 1)
	if want := "ingestq: job " + f.p1 + " is Pending and host hf1 is working on it" + advice; stderr != want {
		t.Errorf("hold job of a host's lock:\n%q, want\n%q", stderr, want)
	}
	// Each refusal of a running job says what would work.
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"requeue", f.p1}, []string{"only a Failed job can be requeued", "ingestq fail --force " + f.p1, "then `ingestq requeue " + f.p1}},
		{[]string{"fail", f.p1}, []string{"ingestq fail --force " + f.p1 + "` fails it now"}},
		{[]string{"delete", f.p1}, []string{"ingestq fail --force " + f.p1, "then `ingestq delete " + f.p1}},
	} {
		_, stderr, code := f.run(c.args...)
		wantCode(t, code, 1)
		wantErrLine(t, stderr, c.want...)
		if strings.Contains(stderr, "try again when its step ends") {
			t.Errorf("%v sends the operator to wait: %s", c.args, stderr)
		}
	}
	f.ok(f.q.UnlockJob(t.Context(), j))
}

func TestHoldReleaseCollectionAndQueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publishDemo() // a collection is held by the name of a published profile
	steps := []struct {
		args []string
		out  string
	}{
		{[]string{"hold", "collection", "demo"}, "collection demo held: daemons send its Pending batches and jobs to Held " +
			"(work under way goes on) until `ingestq release collection demo`\n"},
		{[]string{"hold", "collection", "demo"}, "collection demo was already held: `ingestq release collection demo` releases it\n"},
		{[]string{"hold", "queue"}, "queue ingest held: no new step of any batch or job starts (steps under way finish) until `ingestq release queue`\n"},
		{[]string{"hold", "queue"}, "queue ingest was already held: `ingestq release queue` releases it\n"},
		{[]string{"hold", "queue", "accessSmall"}, "queue accessSmall held: no new small access request is taken (those under way finish) " +
			"until `ingestq release queue access-small`\n"},
	}
	for _, s := range steps {
		out, _, code := e.run(s.args...)
		wantCode(t, code, 0)
		if out != s.out {
			t.Errorf("%v: %q, want %q", s.args, out, s.out)
		}
	}
	held := func(f func(context.Context, string) (bool, error), name string) bool {
		ok, err := f(t.Context(), name)
		e.ok(err)
		return ok
	}
	if !held(e.q.CollectionHeld, "demo") || !held(e.q.QueueHeld, queue.QueueIngest) || !held(e.q.QueueHeld, queue.QueueAccessSmall) {
		t.Fatal("holds not set")
	}
	steps = []struct {
		args []string
		out  string
	}{
		{[]string{"release", "collection", "demo"}, "collection demo released: its new batches and jobs go ahead; those it sent to Held " +
			"stay Held (`ingestq holds` lists them, each with its release)\n"},
		{[]string{"release", "collection", "demo"}, "collection demo was not held\n"},
		{[]string{"release", "queue", "ingest"}, "queue ingest released: daemons start new steps again\n"},
		{[]string{"release", "queue"}, "queue ingest was not held\n"},
	}
	for _, s := range steps {
		out, _, code := e.run(s.args...)
		wantCode(t, code, 0)
		if out != s.out {
			t.Errorf("%v: %q, want %q", s.args, out, s.out)
		}
	}
	if held(e.q.CollectionHeld, "demo") || held(e.q.QueueHeld, queue.QueueIngest) || !held(e.q.QueueHeld, queue.QueueAccessSmall) {
		t.Error("holds not lifted as asked")
	}
	_, stderr, code := e.run("hold", "queue", "nonsense")
	wantCode(t, code, 2)
	wantErrLine(t, stderr, "nonsense", "ingest")
}

func TestRequeue(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	out, _, code := runEnv(t, map[string]string{"USER": "tester"}, "--zk", zktest.Shared(t).Addr, "--zk-root", f.root, "requeue", f.failed)
	wantCode(t, code, 0)
	// It failed in Provisioning after Estimating succeeded: it resumes there.
	if out != "job "+f.failed+" requeued: it resumes at Provisioning (retry 1)\n" {
		t.Errorf("requeue: %q", out)
	}
	j, err := f.q.LoadJob(t.Context(), f.failed)
	f.ok(err)
	if j.State() != queue.Provisioning || j.Status.RetryCount != 1 {
		t.Errorf("after requeue: %s, retry %d", j.State(), j.Status.RetryCount)
	}
	// Its message says it was requeued, and by whom, in place of the
	// failure's, until the step it resumes at moves it on.
	if j.Status.Message != "requeued by tester" {
		t.Errorf("message after requeue %q, want \"requeued by tester\"", j.Status.Message)
	}
	_, stderr, code := f.run("requeue", f.p1)
	wantCode(t, code, 1)
	wantErrLine(t, stderr, f.p1, "Pending", "only a Failed job")

	// A job of a batch that has reported: the requeue says how to report again.
	bid := f.batch("uuid-reported", "demo")
	jid := f.job(bid, 5, "demo")
	f.moveJob(jid, "", queue.Estimating)
	f.moveJob(jid, "gone", queue.Failed)
	f.moveBatch(bid, queue.Processing, queue.Reporting, queue.Failed)
	out, _, code = f.run("requeue", jid)
	wantCode(t, code, 0)
	if want := "its batch " + bid + " has reported (Failed): once the job is done, `ingestq report " + bid + "` reports it again"; !strings.Contains(out, want) {
		t.Errorf("requeue of a reported batch's job: %q, want it to say %q", out, want)
	}

	// A job Merritt's requeue sent on, which then failed again: mrt-zk's
	// setStatusWithRetry writes last_successful_status "Failed", so it
	// starts over, and the requeue says why (it said only "resumes at
	// Pending", of a job that had passed Storing).
	merritt := f.job(f.b1, 5, "demo")
	f.moveJob(merritt, "notify failed", queue.Estimating, queue.Failed)
	_, err = f.conn.Set(f.root+"/jobs/"+merritt+"/status", []byte(`{"status":"Failed","last_modified":"2026-11-28 10:00:00 +0000",`+
		`"message":"notify failed","retry_count":1,"last_successful_status":"Failed"}`), -1)
	f.ok(err)
	out, _, code = f.run("requeue", merritt)
	wantCode(t, code, 0)
	if want := "job " + merritt + " requeued: it resumes at Pending (retry 2); it starts over: its last_successful_status is Failed " +
		"(as Merritt's requeue writes it), which does not say where it stopped\n"; out != want {
		t.Errorf("requeue after Merritt's: %q, want %q", out, want)
	}
}

func TestFail(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	out, _, code := f.run("fail", f.p1, "--message", "bad payload url")
	wantCode(t, code, 0)
	if out != "job "+f.p1+" is Failed: bad payload url\n" {
		t.Errorf("fail: %q", out)
	}
	j, err := f.q.LoadJob(t.Context(), f.p1)
	f.ok(err)
	if j.State() != queue.Failed || j.Status.Message != "bad payload url" {
		t.Errorf("after fail: %s %q", j.State(), j.Status.Message)
	}
	// Failing it again says so in words, not the state machine's.
	_, stderr, code := f.run("fail", f.p1)
	wantCode(t, code, 1)
	wantErrLine(t, stderr, f.p1+" is Failed already", "ingestq requeue "+f.p1)

	// A job a daemon holds needs --force.
	locked, err := f.q.LockJob(t.Context(), f.p2)
	f.ok(err)
	_, stderr, code = f.run("fail", f.p2)
	wantCode(t, code, 1)
	wantErrLine(t, stderr, f.p2, "(no live ingestq host: another program, or a daemon that died) is working on it", "--force")
	out, _, code = runEnv(t, map[string]string{"USER": "tester"}, "--zk", zktest.Shared(t).Addr, "--zk-root", f.root, "fail", f.p2, "--force")
	wantCode(t, code, 0)
	if out != "job "+f.p2+" is Failed: failed by tester\n" || f.jobState(f.p2) != queue.Failed {
		t.Errorf("fail --force: %q, state %s", out, f.jobState(f.p2))
	}
	_ = f.q.UnlockJob(t.Context(), locked)
}

func TestDelete(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// A Pending job is still in the pipeline: refused, one line naming it.
	_, stderr, code := f.run("delete", f.p1)
	wantCode(t, code, 1)
	wantErrLine(t, stderr, "refused", "job "+f.p1+" is Pending")
	if f.jobState(f.p1) != queue.Pending {
		t.Error("a refused delete changed the job")
	}

	out, _, code := f.run("delete", f.failed)
	wantCode(t, code, 0)
	if out != "job "+f.failed+" moved to Deleted\n" || f.jobState(f.failed) != queue.Deleted {
		t.Errorf("delete failed job: %q, state %s", out, f.jobState(f.failed))
	}
	// Twice is not a removal: that takes --purge, which the note names.
	out, _, code = f.run("delete", f.failed)
	wantCode(t, code, 0)
	if !strings.Contains(out, "was already Deleted") || !strings.Contains(out, "delete --purge "+f.failed) || f.jobState(f.failed) != queue.Deleted {
		t.Errorf("delete deleted job: %q, state %s", out, f.jobState(f.failed))
	}
	out, _, code = f.run("delete", "--purge", f.failed)
	wantCode(t, code, 0)
	if out != "job "+f.failed+" removed\n" {
		t.Errorf("delete --purge: %q", out)
	}
	if _, err := f.q.LoadJob(t.Context(), f.failed); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("removed job still loads: %v", err)
	}

	// A Pending batch is refused; a Held one goes with its jobs.
	_, stderr, code = f.run("delete", f.b2)
	wantCode(t, code, 1)
	wantErrLine(t, stderr, f.b2, "Pending")
	f.moveBatch(f.b2, queue.Held)
	out, _, code = f.run("delete", "uuid-b2")
	wantCode(t, code, 0)
	if out != "batch "+f.b2+" removed with its jobs\n" {
		t.Errorf("delete batch: %q", out)
	}
	if _, err := f.q.LoadJob(t.Context(), f.o1); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("job of the removed batch: %v", err)
	}
}

func TestReport(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, stderr, code := f.run("report", f.b1)
	wantCode(t, code, 1)
	wantErrLine(t, stderr, f.b1, "Pending", "reports by itself when its last job is done", "ended Failed")

	f.moveBatch(f.b1, queue.Processing, queue.Failed)
	out, _, code := f.run("report", f.b1)
	wantCode(t, code, 0)
	if out != "batch "+f.b1+" is UpdateReporting: a daemon will report it again\n" {
		t.Errorf("report: %q", out)
	}
	if s := f.batchState(f.b1); s != queue.UpdateReporting {
		t.Errorf("after report: %s", s)
	}
}

func TestCleanup(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	out, _, code := f.run("cleanup")
	wantCode(t, code, 0)
	if out != "0 batches removed\n" {
		t.Errorf("cleanup with nothing to do: %q", out)
	}
	f.moveJob(f.o1, "", queue.Held)
	f.moveBatch(f.b2, queue.Processing, queue.Reporting, queue.Completed)
	out, stderr, code := f.run("cleanup", "--older-than", "0")
	wantCode(t, code, 0)
	if out != "removed "+f.b2+"\n1 batch removed\n" || !noWarningButNATS(stderr) {
		t.Errorf("cleanup: %q, stderr %q", out, stderr)
	}
	if _, err := f.q.LoadBatch(t.Context(), f.b2); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("cleaned batch: %v", err)
	}
	if f.batchState(f.b1) != queue.Pending {
		t.Error("cleanup touched a Pending batch")
	}

	// A minting record whose job was deleted before Notify goes too; one
	// of a job still there stays.
	m := mint.New(f.q)
	for _, jid := range []string{"jid0000009999", f.p1} {
		if _, err := m.Mint(context.Background(), jid, "99999", "fk4"); err != nil {
			t.Fatal(err)
		}
	}
	out, _, code = f.run("cleanup")
	wantCode(t, code, 0)
	if !strings.Contains(out, "1 minting record of deleted jobs removed") {
		t.Errorf("cleanup with a deleted job's minting record: %q", out)
	}
	left, err := f.q.MintedJobs(t.Context())
	if err != nil || len(left) != 1 || left[0] != f.p1 {
		t.Errorf("minting records left %v (%v), want only %s", left, err, f.p1)
	}
}

// Holds in force are listed, with when they were set; a collection no
// daemon has published is refused unless --force; ls batches says why
// Pending batches wait.
func TestHoldsListed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publishDemo()
	out, _, code := e.run("holds")
	wantCode(t, code, 0)
	if out != "nothing is held\n" {
		t.Errorf("holds on a fresh queue: %q", out)
	}
	_, stderr, code := e.run("hold", "collection", "nosuchcollection")
	wantCode(t, code, 1)
	wantErrLine(t, stderr, `"nosuchcollection"`, "published: demo", "--force")
	if held, err := e.q.CollectionHeld(t.Context(), "nosuchcollection"); err != nil || held {
		t.Fatalf("a refused hold was set (%v)", err)
	}
	_, _, code = e.run("hold", "collection", "--force", "nosuchcollection")
	wantCode(t, code, 0)
	_, _, code = e.run("hold", "collection", "demo")
	wantCode(t, code, 0)
	_, _, code = e.run("hold", "queue")
	wantCode(t, code, 0)

	out, _, code = e.run("holds")
	wantCode(t, code, 0)
	header, rows := tableRows(t, out)
	if !slices.Equal(header, []string{"KIND", "NAME", "SINCE", "EFFECT", "RELEASE WITH"}) || len(rows) != 3 ||
		!slices.Equal(column(rows, 1), []string{"ingest", "demo", "nosuchcollection"}) {
		t.Fatalf("holds:\n%s", out)
	}
	out, _, code = e.run("holds", "-o", "json")
	wantCode(t, code, 0)
	var holds []queue.Hold
	if err := json.Unmarshal([]byte(out), &holds); err != nil || len(holds) != 3 || holds[0].Kind != "queue" ||
		time.Since(holds[0].Since) > time.Hour || time.Since(holds[0].Since) < -time.Hour {
		t.Fatalf("holds -o json: %s (%v)", out, err)
	}

	e.batch("uuid-waits", "demo")
	_, stderr, code = e.run("ls", "batches")
	wantCode(t, code, 0)
	for _, want := range []string{"the ingest queue is held since", "ingestq release queue", "collection demo is held", "1 Pending batch goes to Held"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("ls batches under holds: stderr %q lacks %q", stderr, want)
		}
	}
}

// hold and release say what each does; -o json cleanup prints JSON.
func TestHoldHelpAndCleanupJSON(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, c := range []struct{ args, want []string }{
		{[]string{"hold", "job", "--help"}, []string{"Hold a Pending job"}},
		{[]string{"release", "job", "--help"}, []string{"Release a Held job"}},
		{[]string{"hold", "batch", "--help"}, []string{"Hold a Pending batch"}},
		{[]string{"release", "batch", "--help"}, []string{"Release a Held batch"}},
	} {
		out, _, code := e.run(c.args...)
		wantCode(t, code, 0)
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: %q lacks %q", c.args, out, w)
			}
		}
	}
	out, _, code := e.run("cleanup", "-o", "json")
	wantCode(t, code, 0)
	var got struct {
		Removed []string `json:"removed_batches"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.Removed == nil {
		t.Errorf("cleanup -o json: %q (%v)", out, err)
	}
}

// A done job is not sent to `fail`: requeue and hold say it is done.
func TestRefusalsOfADoneJob(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.moveJob(f.p1, "", queue.Estimating, queue.Provisioning, queue.Downloading, queue.Processing, queue.Storing,
		queue.Recording, queue.Notify, queue.Completed)
	for _, verb := range []string{"requeue", "hold"} {
		args := []string{verb, f.p1}
		if verb == "hold" {
			args = []string{"hold", "job", f.p1}
		}
		_, stderr, code := f.run(args...)
		wantCode(t, code, 1)
		wantErrLine(t, stderr, f.p1, "is Completed: it is done")
		if strings.Contains(stderr, "ingestq fail") {
			t.Errorf("%v sends the operator to fail a Completed job: %s", args, stderr)
		}
	}
}

// cancel fails a running batch's jobs not yet Storing, "cancelled by" the
// user, and says what it did; -o json lists them; a finished batch, or one
// whose jobs are all done, is refused or has nothing left to cancel.
func TestCancel(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.moveBatch(f.b1, queue.Processing)
	storing := f.job(f.b1, 5, "demo")
	f.moveJob(storing, "", queue.Estimating, queue.Provisioning, queue.Downloading, queue.Processing, queue.Storing)
	env := map[string]string{"USER": "tester"}
	out, _, code := runEnv(t, env, "--zk", zktest.Shared(t).Addr, "--zk-root", f.root, "cancel", "uuid-b1")
	wantCode(t, code, 0)
	want := "batch " + f.b1 + ": 2 jobs cancelled (Failed: cancelled by tester), 1 job past Processing left to finish; " +
		"the batch reports when its last job is done\n"
	if out != want {
		t.Fatalf("cancel: %q, want %q", out, want)
	}
	for _, jid := range []string{f.p1, f.p2} {
		if j, err := f.q.LoadJob(t.Context(), jid); err != nil || j.State() != queue.Failed || j.Status.Message != "cancelled by tester" {
			t.Errorf("job %s after cancel: %v %v", jid, j, err)
		}
	}
	if f.jobState(storing) != queue.Storing || f.jobState(f.failed) != queue.Failed {
		t.Error("cancel touched a job past Processing, or a failed one")
	}
	out, _, code = f.run("-o", "json", "cancel", f.b1)
	wantCode(t, code, 0)
	var got struct {
		Cancelled, Finishing []string
		Changed              bool
	}
	f.ok(json.Unmarshal([]byte(out), &got))
	if len(got.Cancelled) != 0 || len(got.Finishing) != 1 || got.Finishing[0] != storing || got.Changed {
		t.Errorf("cancel again -o json: %s", out)
	}
	f.moveBatch(f.b2, queue.Processing, queue.Reporting, queue.Completed)
	_, stderr, code := f.run("cancel", f.b2)
	wantCode(t, code, 1)
	wantErrLine(t, stderr, f.b2, "Completed", "nothing to cancel")
}
