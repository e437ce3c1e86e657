package handlers_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// stallingFiles serves files whose first GET each sends its headers and
// 1,000 bytes, once every file's first GET has come (so their stalls
// overlap), then nothing until the client gives up on it; a later GET
// (the client's Range from byte 1,000) is served, after at(name) looked at
// what the job says then.
type stallingFiles struct {
	files   map[string][]byte
	at      func(name string)
	mu      sync.Mutex
	gets    map[string]int
	allIn   chan struct{}
	release chan struct{} // closed at the test's end, before the server's Close waits for its handlers
}

func (s *stallingFiles) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	name := strings.TrimPrefix(req.URL.Path, "/")
	data, ok := s.files[name]
	if !ok {
		http.NotFound(w, req)
		return
	}
	s.mu.Lock()
	s.gets[name]++
	first := s.gets[name] == 1
	if first && len(s.gets) == len(s.files) {
		close(s.allIn)
	}
	s.mu.Unlock()
	if !first {
		s.at(name)
		http.ServeContent(w, req, name, time.Time{}, bytes.NewReader(data))
		return
	}
	select {
	case <-s.allIn:
	case <-req.Context().Done():
		return
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(data)))
	_, _ = w.Write(data[:1000])
	w.(http.Flusher).Flush()
	select { // stalled
	case <-req.Context().Done():
	case <-s.release:
	}
}

// A depositor's server that sends headers and 1,000 bytes of a file, then
// nothing: the fetch client gives the request up after --fetch-timeout and
// asks again (Range), and the job says so, once a request asked again, in
// its status message (read by the server as the request asked again
// arrives) and as its progress event: two files stalling at once, one
// message each. Before, only the daemon's log said it, for a timeout per
// request (five minutes per attempt with the defaults).
func TestStalledDownloadIsSaid(t *testing.T) {
	t.Parallel()
	data := bytes.Repeat([]byte("stalled mid-body\n"), 6000) // 102,000 bytes
	srv := &stallingFiles{files: map[string][]byte{"a.txt": data, "b.txt": data[1:]}, gets: map[string]int{},
		allIn: make(chan struct{}), release: make(chan struct{})}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(srv.release) })
	r := newRig(t, nil, func(hc *handlers.Config, _ *reactor.Config) {
		hc.Fetch.Timeout, hc.Fetch.Attempts = time.Second, 3
	})
	var bid string
	submitted := make(chan struct{}) // closed once bid is set
	var mu sync.Mutex
	seen := map[string]string{} // file → the job's message as its request was asked again
	srv.at = func(name string) {
		<-submitted
		msg, err := jobMessage(t.Context(), r.q, bid)
		if err != nil {
			msg = err.Error()
		}
		mu.Lock()
		defer mu.Unlock()
		seen[name] = msg
	}
	b := r.submit(r.content.put("/stall.checkm", manifest("mrt-ingest-manifest",
		fileRow(hs.URL+"/a.txt", "a.txt", data), fileRow(hs.URL+"/b.txt", "b.txt", data[1:]))))
	bid = b.ID
	close(submitted)
	if got := r.waitBatch(b.ID, queue.Completed, queue.Failed); got.State() != queue.Completed {
		t.Fatalf("batch %s (%s), want Completed once each file's request asked again is served", got.State(), got.Status.Message)
	}
	said := func(name string) string {
		return fmt.Sprintf("downloading producer/%s: cut off at byte 1000: stalled: no byte moved for 1s; asked again (request 2 of 3, --fetch-attempts)", name)
	}
	mu.Lock()
	for _, name := range []string{"a.txt", "b.txt"} {
		// The other file's note may come between its own and its request.
		if msg := seen[name]; msg != said(name) && msg != said(map[string]string{"a.txt": "b.txt", "b.txt": "a.txt"}[name]) {
			t.Errorf("the job's message as %s was asked again: %q; want %q", name, msg, said(name))
		}
	}
	mu.Unlock()
	j := r.jobsOf(b.ID)["manifest"]
	heard := map[string]int{}
	for _, ev := range r.jobEvents(j.ID) {
		if ev.Kind == events.KindProgress && ev.Attrs["waiting"] == true {
			heard[ev.Message]++
			if ev.To != string(queue.Downloading) {
				t.Errorf("progress event %q in %s, want Downloading", ev.Message, ev.To)
			}
		}
	}
	if want := map[string]int{said("a.txt"): 1, said("b.txt"): 1}; fmt.Sprint(heard) != fmt.Sprint(want) {
		t.Errorf("the job's wait events %v; want one for each request asked again: %v", heard, want)
	}
}

// jobMessage is the status message of batch bid's one job.
func jobMessage(ctx context.Context, q *queue.Queue, bid string) (string, error) {
	buckets, err := q.BatchJobs(ctx, bid)
	if err != nil {
		return "", err
	}
	for _, jids := range buckets {
		for _, jid := range jids {
			j, err := q.LoadJob(ctx, jid)
			if err != nil {
				return "", err
			}
			return j.Status.Message, nil
		}
	}
	return "", fmt.Errorf("batch %s has no job", bid)
}
