package reactor_test

import (
	"testing"

	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// The daemon's log says how every job and every batch ended: one INFO line
// per completed job, one WARN line per failed job with the state and the
// reason, one line per batch report with its counts.
func TestOutcomesLogged(t *testing.T) {
	e := newEnv(t)
	logs, log := e.logged()
	e.daemon("host-a", func(c *reactor.Config) {
		c.Logger = log
	})
	b := e.submit(map[string]any{"payload_url": "passthrough:3", "fail_at": "Storing", "fail_job": 1})
	logs.WaitFor(t, "reactor: batch reported", "batch="+b.ID)
	got, err := e.q.LoadBatch(t.Context(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State() != queue.Failed || len(got.Report.SuccessfulJobs) != 2 || len(got.Report.FailedJobs) != 1 {
		t.Fatalf("batch %s, report %+v: want Failed with 2 completed and 1 failed", got.State(), got.Report)
	}
	for _, jid := range got.Report.SuccessfulJobs {
		logs.WaitFor(t, "level=INFO", "reactor: job completed", "job="+jid, "batch="+b.ID)
	}
	failed := got.Report.FailedJobs[0]
	logs.WaitFor(t, "level=WARN", "reactor: job failed", "job="+failed, "batch="+b.ID, "state=Storing", "pass-through failure")
	logs.WaitFor(t, "level=WARN", "reactor: batch reported", "batch="+b.ID, "state=Failed", "completed=2", "failed=1")
	for what, want := range map[string]int{"reactor: job completed": 2, "reactor: job failed": 1, "reactor: batch reported": 1} {
		if n := len(logs.Lines(what)); n != want {
			t.Errorf("%d lines %q, want %d", n, what, want)
		}
	}
}
