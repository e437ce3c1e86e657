package handlers_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/reactor/queue"
)

// flakyCallback is a real callback server that answers its first failures
// requests (-1: every request) with fail (a status; cutConnection: the
// connection is cut without an answer; stall: no answer until the client
// gives up), then 204. hits counts every request, delivered the 204s;
// bodies holds every request's body.
type flakyCallback struct {
	failures        atomic.Int32
	fail            int
	hits, delivered atomic.Int32
	url             string
	mu              sync.Mutex
	bodies          [][]byte
}

const (
	cutConnection = 0
	stall         = -1
)

func newFlakyCallback(t *testing.T, failures int32, fail int) *flakyCallback {
	cb := &flakyCallback{fail: fail}
	cb.failures.Store(failures)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		cb.mu.Lock()
		cb.bodies = append(cb.bodies, body)
		cb.mu.Unlock()
		if n, f := cb.hits.Add(1), cb.failures.Load(); f < 0 || n <= f {
			switch cb.fail {
			case stall:
				<-r.Context().Done() // the client's timeout closes the connection
				return
			case cutConnection:
				conn, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					conn.Close()
				}
				return
			}
			http.Error(w, "boom", cb.fail)
			return
		}
		cb.delivered.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	cb.url = srv.URL + "/cb"
	return cb
}

// callbackDeposit deposits a one-file object with a rig whose profile's
// callback is a flakyCallback, each step tried 3 times, and waits for its
// batch's end: it and its job must end in want, after hits requests to the
// callback.
func callbackDeposit(t *testing.T, failures int32, fail int, want queue.State, hits int32, opts ...rigOption) (*rig, *flakyCallback, *queue.Batch, *queue.Job) {
	t.Helper()
	cb := newFlakyCallback(t, failures, fail)
	prof := profile.Default()
	prof.Callback = cb.url
	r := newRig(t, prof, append([]rigOption{withAttempts(3, 5*time.Millisecond)}, opts...)...)
	data := []byte("stored before its callback\n")
	b := r.submit(r.content.put("/cb.checkm", manifest("mrt-ingest-manifest", fileRow(r.content.put("/cb.txt", data), "cb.txt", data))))
	b = r.waitBatch(b.ID, queue.Completed, queue.Failed)
	j := r.jobsOf(b.ID)["manifest"]
	if b.State() != want || j.State() != want {
		t.Fatalf("batch %s, job %s (%q): want both %s", b.State(), j.State(), j.Status.Message, want)
	}
	if n := cb.hits.Load(); n != hits {
		t.Errorf("callback: %d requests, want %d (the rig's HTTP client makes 2 a try of the step)", n, hits)
	}
	return r, cb, b, j
}

// A callback that fails for a while (a 5xx, a 429, a cut connection) is
// retried by the reactor, with its attempts and backoff, after the HTTP
// client's own retries: the job completes, and the depositor hears once.
// The rig's HTTP client makes 2 requests a try, so 3 failures take a
// second try of the step.
func TestCallbackOutageRetriedByTheReactor(t *testing.T) {
	t.Parallel()
	for _, fail := range []int{http.StatusInternalServerError, http.StatusTooManyRequests, 0} {
		t.Run(fmt.Sprint(fail), func(t *testing.T) {
			t.Parallel()
			var logs logtest.Buffer
			_, cb, _, j := callbackDeposit(t, 3, fail, queue.Completed, 4, withLogs(t, &logs))
			if d := cb.delivered.Load(); d != 1 {
				t.Errorf("callback: %d delivered, want 1", d)
			}
			if lines := logs.Lines("reactor: step failed; retrying", "job="+j.ID, "state=Notify"); len(lines) != 1 {
				t.Errorf("the reactor's retries of Notify in the log: %q, want 1", lines)
			}
		})
	}
}

// A callback that keeps failing fails the job once the reactor's attempts
// are spent, with a message saying that the object is stored and recorded
// (its ARK and version) and that a requeue only sends the callback again;
// the requeue does, and the batch completes.
func TestCallbackAlwaysFailingSaysTheObjectIsStored(t *testing.T) {
	t.Parallel()
	r, cb, b, j := callbackDeposit(t, -1, http.StatusInternalServerError, queue.Failed, 6)
	ark := j.Identifiers.PrimaryID
	want := fmt.Sprintf("Notify failed after 3 attempts: callback %s: HTTP 500 Internal Server Error (2 requests), body \"boom\\n\"; "+
		"the object %s IS stored and recorded (version 1): only its callback failed. "+
		"Do not deposit it again: `ingestq requeue %s` (or POST /api/v1/jobs/%s/requeue) sends the callback again and redoes nothing else",
		cb.url, ark, j.ID, j.ID)
	if j.Status.Message != want {
		t.Errorf("message\n%q, want\n%q", j.Status.Message, want)
	}
	if d, err := r.p.Inventory().Object(t.Context(), ark); err != nil || d.Object.LatestVersion != 1 {
		t.Errorf("inventory of %s: %+v, %v; want version 1 recorded", ark, d.Object, err)
	}
	if got := r.versionContent(ark, 1); len(got) == 0 {
		t.Errorf("version 1 of %s not in storage", ark)
	}
	cb.failures.Store(0)
	r.ingestq("requeue", j.ID)
	r.ingestq("report", b.ID)
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed || cb.delivered.Load() != 1 {
		t.Fatalf("after requeue: batch %s, %d callbacks delivered; want Completed and 1", b.State(), cb.delivered.Load())
	}
}

// A callback refused for good (a 4xx other than 408, 425 and 429) fails
// the job at once, without the reactor's retries, with the same message.
func TestCallbackRefusedFailsAtOnce(t *testing.T) {
	t.Parallel()
	_, cb, _, j := callbackDeposit(t, -1, http.StatusNotFound, queue.Failed, 1)
	msg := j.Status.Message
	for _, w := range []string{"Notify: callback " + cb.url + ": HTTP 404 Not Found", j.Identifiers.PrimaryID + " IS stored and recorded (version 1)",
		"`ingestq requeue " + j.ID + "`", "Do not deposit it again"} {
		if !strings.Contains(msg, w) {
			t.Errorf("message %q does not say %q", msg, w)
		}
	}
}

// The job callback's JSON, as a real receiver gets it, is what the OpenAPI
// document's JobCallback schema describes, and so is each field that only
// some deposits carry (an update's, an unchanged one's): an integrator
// reads the callback's shape there, not in the code.
func TestJobCallbackIsDocumented(t *testing.T) {
	t.Parallel()
	_, cb, b, j := callbackDeposit(t, 0, 0, queue.Completed, 1)
	cb.mu.Lock()
	body := cb.bodies[0]
	cb.mu.Unlock()
	var raw map[string]any
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatalf("callback body %s: %v", body, err)
	}
	if raw["status"] != "completed" || raw["job_id"] != j.ID || raw["batch_id"] != b.ID || raw["batch_uuid"] != b.UUID() ||
		raw["ark"] != j.Identifiers.PrimaryID || raw["ark"] == "" {
		t.Errorf("callback body %s: want job %s of batch %s (%s), its ARK %s", body, j.ID, b.ID, b.UUID(), j.Identifiers.PrimaryID)
	}
	documented(t, "JobCallback", raw)
	every, _ := json.Marshal(handlers.Callback{Status: "completed", JobID: j.ID, BatchID: b.ID, BatchUUID: b.UUID(), Profile: "demo",
		ARK: "ark:/99999/fk4x", LocalIDs: []string{"l"}, Mode: "update", Unchanged: true, Version: 2})
	raw = nil
	if err := json.Unmarshal(every, &raw); err != nil {
		t.Fatal(err)
	}
	documented(t, "JobCallback", raw)
}
