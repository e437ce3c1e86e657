package cli_test

import (
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
)

// show BID lists every job of the batch with its state, whatever it is
// (Downloading, Held, Failed with its reason), in text and in JSON, a page
// at a time: --limit, then --after the last jid shown.
func TestShowBatchListsEveryJob(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.moveJob(f.p1, "fetching 3 files", queue.Estimating, queue.Provisioning, queue.Downloading)
	f.moveJob(f.p2, "", queue.Held)

	out, _, code := f.run("show", f.b1)
	wantCode(t, code, 0)
	for _, want := range []string{
		`^jobs:$`,
		`^JID +STATUS +REQUEUES +ATTEMPTS +LOCKED +ARK +LOCAL ID +MESSAGE$`,
		`^` + f.p1 + ` +Downloading +0 +- +no +ark:/99999/fk4test +loc-1 +fetching 3 files$`,
		`^` + f.p2 + ` +Held +0 +- +no +ark:/99999/fk4test +loc-1 +held: ingestq release job ` + f.p2 + `$`,
		`^` + f.failed + ` +Failed +0 +- +no +ark:/99999/fk4test +loc-1 +download timed out$`,
	} {
		if !regexp.MustCompile("(?m)" + want).MatchString(out) {
			t.Errorf("show %s lacks a line like %q", f.b1, want)
		}
	}
	if strings.Contains(out, "more:") {
		t.Errorf("show of every job says there are more:\n%s", out)
	}

	page := func(args ...string) (jobs []ops.JobRow, next *string) {
		t.Helper()
		out, _, code := f.run(append([]string{"show", f.b1, "-o", "json"}, args...)...)
		wantCode(t, code, 0)
		var b struct {
			Jobs []ops.JobRow `json:"jobs"`
			Next *string      `json:"jobs_next"`
		}
		f.ok(json.Unmarshal([]byte(out), &b))
		return b.Jobs, b.Next
	}
	jobs, next := page()
	if len(jobs) != 3 || next != nil {
		t.Fatalf("show -o json: %d jobs, next %v; want 3 and null", len(jobs), next)
	}
	states := map[string]queue.State{}
	for _, j := range jobs {
		states[j.JID] = j.Status
	}
	if states[f.p1] != queue.Downloading || states[f.p2] != queue.Held || states[f.failed] != queue.Failed ||
		jobs[2].Message != "download timed out" || jobs[0].ARK != "ark:/99999/fk4test" {
		t.Errorf("show -o json jobs: %+v", jobs)
	}

	jobs, next = page("--limit", "2")
	if len(jobs) != 2 || jobs[0].JID != f.p1 || jobs[1].JID != f.p2 || next == nil || *next != f.p2 {
		t.Fatalf("--limit 2: %+v, next %v; want %s %s, next %s", jobs, next, f.p1, f.p2, f.p2)
	}
	jobs, next = page("--after", *next)
	if len(jobs) != 1 || jobs[0].JID != f.failed || next != nil {
		t.Errorf("--after %s: %+v, next %v; want %s only", f.p2, jobs, next, f.failed)
	}
	out, _, code = f.run("show", f.b1, "--limit", "1")
	wantCode(t, code, 0)
	if want := "… 2 more: ingestq show " + f.b1 + " --limit 1 --after " + f.p1; !strings.Contains(out, want) { // the next page as long
		t.Errorf("show --limit 1 does not say %q:\n%s", want, out)
	}

	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"show", f.b1, "--limit", "-1"}, []string{"--limit -1"}},
		{[]string{"show", f.b1, "--after", "bid0000000001"}, []string{`--after "bid0000000001"`, "jid"}},
		{[]string{"show", f.p1, "--limit", "5"}, []string{"--limit", f.p1, "is a job"}},
	} {
		_, stderr, code := f.run(c.args...)
		wantCode(t, code, 2)
		wantErrLine(t, stderr, c.want...)
	}
}

// show BID reads only the jobs its page needs (a batch may have 100,000):
// of 150 jobs, --limit 3 reads the fewest a listing reads at once (16).
func TestShowBatchReadsOnlyItsPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bid := e.batch("uuid-big", "demo")
	for range 150 {
		e.job(bid, 5, "demo")
	}
	out, stderr, code := e.run("show", bid, "--limit", "3", "--log-level", "debug")
	wantCode(t, code, 0)
	if n := strings.Count(out, "  Pending  "); n != 3 {
		t.Errorf("show --limit 3 listed %d jobs", n)
	}
	read := map[string]bool{}
	for _, m := range regexp.MustCompile(`/jobs/(jid\d+)`).FindAllStringSubmatch(stderr, -1) {
		read[m[1]] = true
	}
	if len(read) == 0 || len(read) > 16 {
		t.Errorf("show --limit 3 read %d of the batch's 150 jobs: %v", len(read), slices.Sorted(maps.Keys(read)))
	}
}
