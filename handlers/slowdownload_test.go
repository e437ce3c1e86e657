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
// job: a download of hours said only "lock held by". While bytes come,
// however slowly, it says they move; once none came for a while, since
// when: a slow server and a hung one read alike before. The server sends
// 10 bytes every 100 ms until told to stall, then nothing until released
// (the client's stall limit is far off).
func TestSlowDownloadSaysItsDepositorsServer(t *testing.T) {
	t.Parallel()
	data := bytes.Repeat([]byte("a slow depositor\n"), 600)
	stall, release := make(chan struct{}), make(chan struct{})
	stallNow, let := sync.OnceFunc(func() { close(stall) }), sync.OnceFunc(func() { close(release) })
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		tick := time.NewTicker(100 * time.Millisecond) // the server's pace, not the test's synchronisation
		defer tick.Stop()
		sent := 0
		for ; sent < len(data)-10; sent += 10 {
			select {
			case <-tick.C:
				_, _ = w.Write(data[sent : sent+10])
				w.(http.Flusher).Flush()
				continue
			case <-stall:
			case <-req.Context().Done():
				return
			}
			break
		}
		select {
		case <-release:
			_, _ = w.Write(data[sent:])
		case <-req.Context().Done():
		}
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(let) // before the server's Close waits for its handler
	r := newRig(t, nil, func(hc *handlers.Config, _ *reactor.Config) { hc.Fetch.Timeout = 5 * time.Minute })
	b := r.submit(r.content.put("/slow.checkm", manifest("mrt-ingest-manifest", fileRow(hs.URL+"/a.txt", "a.txt", data))))
	u, _ := url.Parse(hs.URL)
	says := "the depositor's server " + u.Host
	listed := func(what string, cond func(reactor.WaitingOn) bool) {
		t.Helper()
		queuetest.AwaitHostNode(t, r.q, "test", time.Minute, what, func(h reactor.HostInfo) bool {
			for _, w := range h.Waits {
				if w.What == says && cond(w) {
					return true
				}
			}
			return false
		})
	}
	var j *queue.Job // read once its download runs
	flagged := func(want string) {
		t.Helper()
		th, err := stalled.Parse("1s")
		if err != nil {
			t.Fatal(err)
		}
		found, err := stalled.Find(t.Context(), r.q, []*queue.Job{j}, th, time.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if st := found[j.ID]; st.Kind != stalled.KindLocked || !strings.Contains(st.Reason, want) {
			t.Errorf("the slow download's job is flagged %+v; want locked, saying %q", st, want)
		}
	}
	listed("the download's bytes moving", func(w reactor.WaitingOn) bool { return w.Moving })
	j = r.jobsOf(b.ID)["manifest"]
	flagged("; its step moves bytes with " + says + " (since ")
	stallNow()
	listed("no byte since a time", func(w reactor.WaitingOn) bool { return !w.Moving && !w.NoByteSince.IsZero() })
	flagged("; its step waits on " + says + " since ")
	flagged(", no byte since ")
	let()
	if got := r.waitBatch(b.ID, queue.Completed, queue.Failed); got.State() != queue.Completed {
		t.Fatalf("batch %s (%s), want Completed once the server sends the rest", got.State(), got.Status.Message)
	}
}
