package cli_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
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

// A depositor following its batch (submit --wait) hears, once, that a job
// waits for its busy server, what it asked and when it is tried again;
// then the report. Before, the wait was in the job's status only: --wait
// said nothing for as long as --fetch-busy-limit.
func TestSubmitWaitSaysAJobWaitsForABusyServer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	content := []byte("served when asked again\n")
	var asked atomic.Int32
	mux := http.NewServeMux()
	web := httptest.NewServer(mux)
	t.Cleanup(web.Close)
	mux.HandleFunc("/a.txt", func(w http.ResponseWriter, r *http.Request) {
		if asked.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		http.ServeContent(w, r, "a.txt", time.Time{}, bytes.NewReader(content))
	})
	mux.HandleFunc("/object.checkm", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "#%checkm_0.7\n#%profile | http://uc3.cdlib.org/registry/ingest/manifest/mrt-ingest-manifest\n"+
			"#%prefix | nfo: | http://www.semanticdesktop.org/ontologies/2007/03/22/nfo#\n"+
			"#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize | nfo:fileLastModified | nfo:fileName\n"+
			fmt.Sprintf("%s/a.txt | sha256 | %x | %d | | a.txt\n#%%eof\n", web.URL, sha256.Sum256(content), len(content)))
	})
	nats := closedAddr(t)
	serve(t, zktest.Shared(t).Addr, e.root, "--nats-listen", nats)
	out, stderr, code := e.run("--nats", "nats://"+nats, "submit", "--profile", "demo", "--wait", web.URL+"/object.checkm")
	wantCode(t, code, 0)
	want := regexp.MustCompile(`note: job jid\d+ of batch bid\d+ is waiting for a busy server: producer/a\.txt: download ` +
		regexp.QuoteMeta(web.URL) + `/a\.txt: HTTP 503 Service Unavailable; it asked to be asked again in \S+ \(Retry-After\); next try at [^;]+; ` +
		`.*\(its batch's other waits for a busy server are not said\)\n`)
	if n := len(want.FindAllString(stderr, -1)); n != 1 || asked.Load() != 2 {
		t.Errorf("the busy server asked %d times; submit --wait said its wait %d times, want once:\n%s%s", asked.Load(), n, out, stderr)
	}
}
