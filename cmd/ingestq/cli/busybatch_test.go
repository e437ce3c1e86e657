package cli_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/reactor/queue"
)

// A Pending batch waiting for its busy payload server (unlocked, no job
// made, its last_modified its submission's) says why in `ls batches`: a
// note on stderr, as a hold's, and its message in -o json. Before, it was
// listed Pending, no jobs, as a batch no daemon had looked at; only show
// said why.
func TestListedBatchSaysItWaitsForABusyServer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const msg = "waiting for a busy server: fetch http://127.0.0.1:18001/batch.checkm: HTTP 503 Service Unavailable; it asked to be asked again in 2m (Retry-After); " +
		"next try at 2026-11-28 01:25:58, spending no attempt; the batch fails if it is still busy at 2026-11-28 02:25:28 (--fetch-busy-limit 1h)"
	busy, quiet := e.batch("uuid-busy", "demo"), e.batch("uuid-quiet", "demo")
	b, err := e.q.LockBatch(t.Context(), busy)
	e.ok(err)
	e.ok(e.q.NoteBatch(t.Context(), b, msg, &queue.Deferral{Until: time.Now().Add(time.Minute), Host: "ingest1"}))
	e.ok(e.q.UnlockBatch(t.Context(), b))

	_, stderr, code := e.run("ls", "batches")
	wantCode(t, code, 0)
	if want := "note: batch " + busy + " is " + msg; !strings.Contains(stderr, want) || strings.Contains(stderr, quiet) {
		t.Errorf("ls batches: stderr %q; want %q, and nothing of %s", stderr, want, quiet)
	}
	out, _, code := e.run("ls", "batches", "-o", "json")
	wantCode(t, code, 0)
	var rows []struct{ BID, Message string }
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("ls batches -o json: %s (%v)", out, err)
	}
	for _, r := range rows {
		if want := map[string]string{busy: msg}[r.BID]; r.Message != want {
			t.Errorf("ls batches -o json: %s's message %q, want %q", r.BID, r.Message, want)
		}
	}
}
