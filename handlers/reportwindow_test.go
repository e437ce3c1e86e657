package handlers_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// The e-mailed report of a windowed batch gives each archived job (its
// nodes gone) as the report has it: its object's ARK, and its note. Each
// was "(job jidN: not found)": only the last window's jobs had a line.
func TestReportEmailGivesArchivedJobs(t *testing.T) {
	t.Parallel()
	r, _, sink := reportCallbackRig(t, 0, 0, func(_ *handlers.Config, rc *reactor.Config) { rc.Window = 2 })
	var rows []row
	for _, name := range []string{"CON.txt", "b.txt", "c.txt", "d.txt", "e.txt"} {
		data := []byte("content of " + name + "\n")
		rows = append(rows, fileRow(r.content.put("/w/"+name, data), name, data))
	}
	b := r.submit(r.content.put("/windowed.checkm", manifest("mrt-single-file-batch-manifest", rows...)))
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("batch %s %q, want Completed", b.State(), b.Status.Message)
	}
	if live := len(r.jobsOf(b.ID)); live >= len(rows) {
		t.Fatalf("%d of the batch's %d jobs live: none archived, nothing tested", live, len(rows))
	}
	var body string
	select {
	case m := <-sink.msgs:
		_, body = m.read(t)
	case <-time.After(faultWait):
		t.Fatal("no report e-mailed")
	}
	line := regexp.MustCompile(`(?m)^  (jid[0-9]+)  (ark:/\S+)`)
	arks := map[string]bool{}
	for _, m := range line.FindAllStringSubmatch(body, -1) {
		arks[m[2]] = true
	}
	const note = `(note: every file is stored under its own name, but these are names Windows cannot hold, so unpacking the object there fails or changes them: "CON.txt" ("CON.txt" is the device CON))`
	if len(arks) != len(rows) || strings.Contains(body, "not found") || strings.Count(body, note) != 1 {
		t.Errorf("report e-mailed:\n%s\nwant %d lines each with its own ARK, none not found, and CON.txt's note once",
			body, len(rows))
	}
}
