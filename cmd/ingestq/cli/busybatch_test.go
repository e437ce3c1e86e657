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
	web, stderr, asked := submitWaitOnABusyServer(t, "/a.txt", 1, "1")
	want := regexp.MustCompile(`note: job jid\d+ of batch bid\d+ is waiting for a busy server: producer/a\.txt: download ` +
		regexp.QuoteMeta(web) + `/a\.txt: HTTP 503 Service Unavailable; it asked to be asked again in \S+ \(Retry-After\); next try at [^;]+; ` +
		`.*\(its batch's other waits for a busy server are not said\)\n`)
	if n := len(want.FindAllString(stderr, -1)); n != 1 || asked != 2 {
		t.Errorf("the busy server asked %d times; submit --wait said its wait %d times, want once:\n%s", asked, n, stderr)
	}
}

// A depositor following its batch (submit --wait) hears, once, that the
// batch waits for its busy payload server, in the words `ls batches` notes.
// Before, --wait showed `0/? jobs finished` and nothing else for as long as
// --fetch-busy-limit: the batch's wait publishes no event.
func TestSubmitWaitSaysItsBatchWaitsForABusyServer(t *testing.T) {
	t.Parallel()
	// Busy for two answers of 2 s each: the batch waits longer than two
	// of --wait's polls.
	web, stderr, asked := submitWaitOnABusyServer(t, "/object.checkm", 2, "2")
	want := regexp.MustCompile(`note: batch bid\d+ is waiting for a busy server: fetch ` + regexp.QuoteMeta(web) +
		`/object\.checkm: HTTP 503 Service Unavailable; it asked to be asked again in \S+ \(Retry-After\); next try at [^,]+, ` +
		`spending no attempt; the batch fails if it is still busy at .*\n`)
	if n := len(want.FindAllString(stderr, -1)); n != 1 || asked < 3 || strings.Contains(stderr, "note: job ") {
		t.Errorf("the busy server asked %d times; submit --wait said the batch's wait %d times, want once, and no job's:\n%s", asked, n, stderr)
	}
}

// submitWaitOnABusyServer runs `submit --wait` of an object manifest,
// /object.checkm, of one file, /a.txt, on a real daemon; the web server
// answers busy (503, Retry-After: retryAfter) the first busyAnswers asks
// of busyPath (one of the two). It gives the web server's URL, submit's
// stderr (its stdout too when it did not exit 0) and how often busyPath
// was asked.
func submitWaitOnABusyServer(t *testing.T, busyPath string, busyAnswers int32, retryAfter string) (web, stderr string, asked int32) {
	t.Helper()
	e := newEnv(t)
	content := []byte("served when asked again\n")
	var n atomic.Int32
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	busy := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == busyPath && n.Add(1) <= busyAnswers {
				w.Header().Set("Retry-After", retryAfter)
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
			h(w, r)
		}
	}
	mux.HandleFunc("/a.txt", busy(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "a.txt", time.Time{}, bytes.NewReader(content))
	}))
	mux.HandleFunc("/object.checkm", busy(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, objectManifestOfA(srv.URL, content))
	}))
	nats := closedAddr(t)
	serve(t, zktest.Shared(t).Addr, e.root, "--nats-listen", nats)
	out, stderr, code := e.run("--nats", "nats://"+nats, "submit", "--profile", "demo", "--wait", srv.URL+"/object.checkm")
	if code != 0 {
		t.Errorf("submit --wait exited %d:\n%s%s", code, out, stderr)
	}
	return srv.URL, stderr, n.Load()
}

// objectManifestOfA is an object manifest of one file, web's /a.txt, whose
// bytes are content.
func objectManifestOfA(web string, content []byte) string {
	return "#%checkm_0.7\n#%profile | http://uc3.cdlib.org/registry/ingest/manifest/mrt-ingest-manifest\n" +
		"#%prefix | nfo: | http://www.semanticdesktop.org/ontologies/2007/03/22/nfo#\n" +
		"#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize | nfo:fileLastModified | nfo:fileName\n" +
		fmt.Sprintf("%s/a.txt | sha256 | %x | %d | | a.txt\n#%%eof\n", web, sha256.Sum256(content), len(content))
}
