package cli_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// A batch whose payload cannot be read yet (a 502; a busy answer, 503 or
// 429, is waited for instead, spending no attempt) says why while its
// intake is tried again, as a job says why its step is: Pending, locked,
// "retrying after error (attempt N of M): …", the same for every reader
// of the queue (show, the API, the dashboard). Its move to Processing
// writes its own message: none, once the payload is read.
func TestBatchSaysWhyItsIntakeIsRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	content := []byte("read on the third try\n")
	seen := make(chan *queue.Batch, 2) // the batch as the second and third tries find it
	var tries atomic.Int32
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := tries.Add(1)
		if n == 2 || n == 3 {
			var b *queue.Batch
			if bs, _, err := e.q.ListBatches(r.Context()); err == nil && len(bs) == 1 {
				b = bs[0]
			}
			seen <- b
		}
		if n <= 2 {
			http.Error(w, "not there yet", http.StatusBadGateway)
			return
		}
		http.ServeContent(w, r, "late.txt", time.Time{}, bytes.NewReader(content))
	}))
	t.Cleanup(web.Close)
	nats := closedAddr(t)
	serve(t, zktest.Shared(t).Addr, e.root, "--nats-listen", nats, "--fetch-attempts", "1", "--backoff", "10ms")
	payload := web.URL + "/late.txt"
	out, stderr, code := e.run("--nats", "nats://"+nats, "submit", "--profile", "demo", "--wait", payload)
	wantCode(t, code, 0)
	for attempt := 1; attempt <= 2; attempt++ {
		b := <-seen
		want := fmt.Sprintf("retrying after error (attempt %d of 3): fetch %s: HTTP 502 Bad Gateway", attempt, payload)
		if b == nil || b.State() != queue.Pending || !b.Locked || b.Status.Message != want {
			t.Fatalf("the batch while its intake is retried: %+v; want Pending, locked, its message %q\n%s%s", b, want, out, stderr)
		}
	}
	b := e.onlyBatch()
	if b.State() != queue.Completed || b.Status.Message != "" {
		t.Errorf("the batch once its payload was read: %s, message %q; want Completed, no message", b.State(), b.Status.Message)
	}
}
