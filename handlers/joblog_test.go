package handlers_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/reactor/queue"
)

// The daemon's log names the job of every failed HTTP request, and says
// how each job ended: the completed one with its ARK, the failed one with
// the state it failed in.
func TestLogNamesJobs(t *testing.T) {
	t.Parallel()
	logs := &logtest.Buffer{}
	r := newRig(t, nil, withLogs(t, logs))
	data := []byte("content\n")
	var lines []row
	for i, name := range []string{"fine.txt", "broken.txt"} {
		obj := manifest("mrt-ingest-manifest", fileRow(r.content.put("/"+name, data), name, data))
		lines = append(lines, row{url: r.content.put(fmt.Sprintf("/o%d.checkm", i), obj), size: -1})
	}
	r.content.setMode("/broken.txt", http.StatusInternalServerError)
	b := r.submit(r.content.put("/batch.checkm", manifest("mrt-batch-manifest", lines...)))
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Failed {
		t.Fatalf("batch %s, want Failed (broken.txt answers 500)", b.State())
	}
	var done, failed *queue.Job
	for _, j := range r.jobsOf(b.ID) {
		if j.State() == queue.Completed {
			done = j
		} else {
			failed = j
		}
	}
	if done == nil || failed == nil || failed.State() != queue.Failed || done.Identifiers == nil {
		t.Fatalf("jobs: completed %+v, failed %+v; want one of each, the completed one with an ARK", done, failed)
	}
	logs.WaitFor(t, "level=WARN", "http: request failed", "job="+failed.ID, "/broken.txt", "500")
	if anon := len(logs.Lines("http: request failed")) - len(logs.Lines("http: request failed", "job=")); anon > 0 {
		t.Errorf("%d failed requests logged without their job", anon)
	}
	logs.WaitFor(t, "level=INFO", "reactor: job completed", "job="+done.ID, "batch="+b.ID, "ark="+done.Identifiers.PrimaryID)
	logs.WaitFor(t, "level=WARN", "reactor: job failed", "job="+failed.ID, "state=Downloading", "broken.txt")
	logs.WaitFor(t, "level=WARN", "reactor: batch reported", "batch="+b.ID, "completed=1", "failed=1")
}
