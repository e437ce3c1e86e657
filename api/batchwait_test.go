package api_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor/queue"
)

// demoDepositor is a depositor's token, scoped to the demo profile.
const demoDepositor = "demo-depositor-token-0123456789"

// A batch whose payload server answers busy (503 twice, then 429, each
// with a Retry-After) is heard waiting on its depositor's event stream
// (a token scoped to its profile, following the batch), as a job's wait
// is: one progress event for each answer it waits for, not one a try,
// saying what it waits for and when it tries again; then its moves to
// Completed. Before, a batch's events were its moves only: the stream
// said `→ Pending`, then nothing until the server served.
func TestDepositorHearsItsBatchWaitForABusyPayloadServer(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *options) {
		o.pipeline = &pipelineDaemon{}
		o.tokens = append(o.tokens, "operate:demo "+demoDepositor+" Demo depositor")
	})
	b.publishDemo()
	answers := []int{http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusTooManyRequests}
	var asked atomic.Int32
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if i := int(asked.Add(1)) - 1; i < len(answers) {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "busy: answered by the test", answers[i])
			return
		}
		_, _ = io.WriteString(w, "served when asked again\n")
	}))
	t.Cleanup(web.Close)
	payload := web.URL + "/a.txt" // a file: type auto reads its first bytes while the batch is Pending

	var sub struct{ BID string }
	b.do("POST", "batches", demoDepositor, map[string]any{"payload_url": payload, "profile": "demo", "type": "auto", "file_name": "a.txt"}).ok(t, http.StatusCreated, &sub)
	s := b.openStreamAs(demoDepositor, "since=1h&batch="+sub.BID)
	var heard []events.Event
	for {
		ev := s.next(t)
		if ev.Kind == events.KindProgress && ev.Attrs["waiting"] == true {
			heard = append(heard, ev)
		}
		if ev.Kind == events.KindBatch && (ev.To == string(queue.Completed) || ev.To == string(queue.Failed)) {
			if ev.To != string(queue.Completed) {
				t.Fatalf("batch %s %s (%s); want Completed once its server serves", sub.BID, ev.To, ev.Message)
			}
			break
		}
	}
	fetched := "waiting for a busy server: fetch " + payload + ": "
	want := []string{fetched + "HTTP 503 Service Unavailable; ", fetched + "HTTP 429 Too Many Requests; "}
	if len(heard) != len(want) {
		t.Fatalf("the depositor heard %d waits of its batch, want %d (one an answer waited for, not one a try): %+v", len(heard), len(want), heard)
	}
	for i, ev := range heard {
		next, _ := ev.Attrs["next_try"].(string)
		at, err := time.Parse(time.RFC3339, next)
		if ev.BatchID != sub.BID || ev.JobID != "" || ev.To != string(queue.Pending) || ev.Attrs["waiting"] != true ||
			!strings.HasPrefix(ev.Message, want[i]) || !strings.Contains(ev.Message, "next try at ") || err != nil || at.IsZero() {
			t.Errorf("the batch's wait %d heard as %+v; want a progress event of batch %s, no job, in Pending, attrs.waiting and next_try, "+
				"its message starting %q", i+1, ev, sub.BID, want[i])
		}
	}
}
