package reactor

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ingestq/ingestq/reactor/queue"
)

// A status-report's objects and failures stay bounded for a batch of
// 100,000 jobs with long local ids and long reasons: each map stops at its
// budget and counts the jobs it leaves out, and a reason is cut whole
// characters at a time.
func TestReportDetailIsBounded(t *testing.T) {
	const n = 100_000
	rep := Report{Messages: map[string]string{}, Objects: map[string]*queue.Identifiers{}}
	var stored queue.StatusReport
	for i := range n {
		ok, bad := fmt.Sprintf("jid%010d", 2*i), fmt.Sprintf("jid%010d", 2*i+1)
		stored.SuccessfulJobs = append(stored.SuccessfulJobs, ok)
		stored.FailedJobs = append(stored.FailedJobs, bad)
		rep.Objects[ok] = &queue.Identifiers{PrimaryID: fmt.Sprintf("ark:/99999/fk4%07d", i), LocalIDs: []string{strings.Repeat("l", 200)}}
		rep.Messages[bad] = "Downloading: " + strings.Repeat("é", 1500)
		rep.Objects[bad] = &queue.Identifiers{LocalIDs: []string{strings.Repeat("f", 200)}}
	}
	reportDetail(&stored, rep)
	if got := len(stored.Identified) + stored.ObjectsLeftOut; got != n || stored.ObjectsLeftOut == 0 {
		t.Errorf("%d objects given, %d left out: want %d in all, some left out", len(stored.Identified), stored.ObjectsLeftOut, n)
	}
	if got := len(stored.Failures) + stored.FailuresLeftOut; got != n || stored.FailuresLeftOut == 0 {
		t.Errorf("%d failures given, %d left out: want %d in all, some left out", len(stored.Failures), stored.FailuresLeftOut, n)
	}
	if got := len(stored.FailedObjects) + stored.FailedObjectsLeftOut; got != n || stored.FailedObjectsLeftOut == 0 {
		t.Errorf("%d failed objects given, %d left out: want %d in all, some left out", len(stored.FailedObjects), stored.FailedObjectsLeftOut, n)
	}
	for what, m := range map[string]any{"objects": stored.Identified, "failures": stored.Failures, "failed_objects": stored.FailedObjects} {
		if data, _ := json.Marshal(m); len(data) > statusDetailBudget {
			t.Errorf("%s: %d bytes of JSON, over the budget of %d", what, len(data), statusDetailBudget)
		}
	}
	for jid, reason := range stored.Failures {
		if len(reason) > reasonMax+len("…") || !utf8.ValidString(reason) || !strings.HasSuffix(reason, "…") {
			t.Fatalf("reason of %s: %d bytes, valid %v: want at most %d, cut whole characters, marked", jid, len(reason), utf8.ValidString(reason), reasonMax)
		}
	}
	if _, ok := stored.Identified["jid0000000000"]; !ok {
		t.Error("the first job is left out: want the jobs in order until the budget is spent")
	}

	// A small batch's are given whole.
	small := queue.StatusReport{SuccessfulJobs: []string{"jid1", "jid3"}, FailedJobs: []string{"jid2"}}
	reportDetail(&small, Report{Messages: map[string]string{"jid2": "Downloading: HTTP 404"},
		Objects: map[string]*queue.Identifiers{"jid1": {PrimaryID: "ark:/1"}, "jid2": {LocalIDs: []string{"y"}}, "jid3": {PrimaryID: "ark:/3", LocalIDs: []string{"x"}}}})
	if len(small.Identified) != 2 || small.Identified["jid3"].LocalIDs[0] != "x" || small.Failures["jid2"] != "Downloading: HTTP 404" ||
		len(small.FailedObjects) != 1 || small.FailedObjects["jid2"].LocalIDs[0] != "y" ||
		small.ObjectsLeftOut+small.FailuresLeftOut+small.FailedObjectsLeftOut != 0 {
		t.Errorf("small report %+v", small)
	}
}

func TestFailedCount(t *testing.T) {
	for _, c := range []struct {
		ok, failed int
		msg, want  string
		reasons    []string // the failed jobs' messages
	}{
		{3, 0, "", "", nil},
		{1, 3, "", "3 of 4 jobs failed", nil},
		{0, 1, "", "1 of 1 job failed", nil},
		{2, 1, "the batch stopped making jobs: …", "1 of 3 jobs failed; the batch stopped making jobs: …", nil},
		// A cancelled batch says so, by whom, and which failed on their own.
		{0, 3, "", "3 of 3 jobs failed: 3 cancelled by alice", []string{"cancelled by alice", "cancelled by alice", "cancelled by alice"}},
		{1, 3, "", "3 of 4 jobs failed: 1 cancelled by alice, 1 cancelled by bob, 1 failed on its own",
			[]string{"cancelled by bob", "Downloading: HTTP 404", "cancelled by alice"}},
		{0, 3, "", "3 of 3 jobs failed: 1 cancelled by alice, 2 failed on their own", []string{"cancelled by alice", "x", "y"}},
	} {
		rep := Report{Messages: map[string]string{}}
		rep.SuccessfulJobs, rep.FailedJobs = make([]string, c.ok), make([]string, c.failed)
		for i, reason := range c.reasons {
			rep.FailedJobs[i] = fmt.Sprint("jid", i)
			rep.Messages[rep.FailedJobs[i]] = reason
		}
		if got := failedCount(rep, c.msg); got != c.want {
			t.Errorf("%d ok, %d failed, %q: %q, want %q", c.ok, c.failed, c.msg, got, c.want)
		}
	}
}
