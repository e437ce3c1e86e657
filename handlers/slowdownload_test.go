package handlers_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/internal/queuetest"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/reactor/stalled"
)

// A download running long is listed in its host's node with the
// depositor's server it waits on, and `ls jobs --stalled` says it of the
// job: a download of hours said only "lock held by". The server sends a
// file's headers and first 1,000 bytes, then nothing until the node says
// the wait (the client's stall limit is far off).
func TestSlowDownloadSaysItsDepositorsServer(t *testing.T) {
	t.Parallel()
	data := bytes.Repeat([]byte("a slow depositor\n"), 600)
	release := make(chan struct{})
	let := sync.OnceFunc(func() { close(release) })
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		_, _ = w.Write(data[:1000])
		w.(http.Flusher).Flush()
		select {
		case <-release:
			_, _ = w.Write(data[1000:])
		case <-req.Context().Done():
		}
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(let) // before the server's Close waits for its handler
	r := newRig(t, nil, func(hc *handlers.Config, _ *reactor.Config) { hc.Fetch.Timeout = 5 * time.Minute })
	b := r.submit(r.content.put("/slow.checkm", manifest("mrt-ingest-manifest", fileRow(hs.URL+"/a.txt", "a.txt", data))))
	u, _ := url.Parse(hs.URL)
	says := "the depositor's server " + u.Host
	queuetest.AwaitHostNode(t, r.q, "test", time.Minute, "the download's wait", func(h reactor.HostInfo) bool {
		for _, w := range h.Waits {
			if w.What == says {
				return true
			}
		}
		return false
	})
	j := r.jobsOf(b.ID)["manifest"]
	th, err := stalled.Parse("1s")
	if err != nil {
		t.Fatal(err)
	}
	found, err := stalled.Find(t.Context(), r.q, []*queue.Job{j}, th, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if st := found[j.ID]; st.Kind != stalled.KindLocked || !strings.Contains(st.Reason, "its step waits on "+says+" since ") {
		t.Errorf("the slow download's job is flagged %+v; want locked, saying its depositor's server", st)
	}
	let()
	if got := r.waitBatch(b.ID, queue.Completed, queue.Failed); got.State() != queue.Completed {
		t.Fatalf("batch %s (%s), want Completed once the server sends the rest", got.State(), got.Status.Message)
	}
}
