package handlers_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/fetch"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// busyPayload serves data at /a.txt behind svc, a server answering busy
// while svc.left lasts; it returns the file's manifest row.
func busyPayload(t *testing.T, svc *busyService, data []byte) row {
	svc.next = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		http.ServeContent(w, req, "a.txt", time.Time{}, bytes.NewReader(data))
	})
	srv := httptest.NewServer(svc)
	t.Cleanup(srv.Close)
	return fileRow(srv.URL+"/a.txt", "a.txt", data)
}

// A depositor's server that answers a download 503 or 429 with a
// Retry-After, even one shorter than the fetch client's longest wait: the
// job waits as long as asked, spending no attempt and holding no worker (the daemon's
// one Downloading worker downloads another object meanwhile, and the busy
// server stays busy until that one is done), its file on another server
// fetched once, its message saying what it waits for and until when; then
// it completes. Before, the request was
// asked again within the client's longest wait (10 s by default) and the
// job's attempts were spent: a server asking for 30 s failed its jobs in
// seconds.
func TestPayloadServerBusyWaitsForIt(t *testing.T) {
	forEachBusyAnswer(t, func(t *testing.T, c busyAnswer, svc *busyService) { // busy until the other object is in
		busyRow := busyPayload(t, svc, []byte("alpha\n"))
		obs := watchBackEnds(t)
		r := newRig(t, nil, withAttempts(2, 10*time.Millisecond), obs.option(), func(hc *handlers.Config, rc *reactor.Config) {
			hc.Fetch.MaxWait = fetch.Defaults.MaxWait // the client's own longest wait, 10 s, is no reason to hold a worker
			rc.Workers = map[queue.State]int{queue.Downloading: 1}
		})
		beta := []byte("beta, from another server\n")
		betaRow := fileRow(r.content.put("/busy/b.txt", beta), "b.txt", beta)
		busy := r.submit(r.content.put("/busy.checkm", manifest("mrt-ingest-manifest", busyRow, betaRow)))
		fine := r.submitObject("/fine.checkm", object{"b.txt": []byte("beta\n")})
		if b := r.waitBatch(fine.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
			t.Fatalf("the other batch %s (%s), want Completed while the busy server's job waits", b.State(), b.Status.Message)
		}
		if svc.busyAnswers() == 0 {
			t.Fatal("the busy server was not asked before the other object was in")
		}
		j := r.jobsOf(busy.ID)["manifest"]
		if d := j.Status.Deferred; d == nil || d.Host != "test" || d.Until.IsZero() {
			t.Errorf("the waiting job's deferral %+v; want one until its next try, by this daemon (test), for every daemon to honour", d)
		}
		msg := j.Status.Message
		for _, want := range []string{fmt.Sprintf("waiting for a busy server: producer/a.txt: download %s: HTTP %d %s", busyRow.url, c.status, http.StatusText(c.status)),
			"; it asked to be asked again in ", "s (Retry-After); next try at ", ", spending no attempt; the job fails if it is still busy at ", " (--fetch-busy-limit 1h)"} {
			if !strings.Contains(msg, want) {
				t.Errorf("the waiting job's message %q lacks %q", msg, want)
			}
		}
		svc.left.Store(0)
		if b := r.waitBatch(busy.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
			t.Fatalf("batch %s (%s), want Completed once the server serves", b.State(), b.Status.Message)
		}
		svc.checkWaitedAsFor(t, svc.busyAnswers())
		checkWaitsHeard(t, r.jobEvents(j.ID), "waiting for a busy server: producer/a.txt: ")
		if waits := len(obs.states); waits != svc.busyAnswers() {
			t.Errorf("the job waited %d times for %d busy answers; want a wait after each, no request asked again in the fetch client", waits, svc.busyAnswers())
		}
		if n := obs.spent.Load(); n != 0 {
			t.Errorf("steps spent %d attempts; want none while the server was busy", n)
		}
		if n := r.content.getCount("/busy/b.txt"); n != 1 {
			t.Errorf("the job's file on another server was fetched %d times; want once, kept while the job waited", n)
		}
	})
}

// checkWaitsHeard checks that a job's events say its wait, each answer
// of a busy server (prefixes, one for each answer in turn), as one
// progress event: its message, beginning with the answer's prefix, and
// when it tries again.
func checkWaitsHeard(t *testing.T, evs []events.Event, prefixes ...string) {
	t.Helper()
	var heard []string
	for _, ev := range evs {
		if ev.Kind != events.KindProgress || ev.Attrs["waiting"] != true {
			continue
		}
		heard = append(heard, ev.Message)
		if i := len(heard) - 1; i >= len(prefixes) || !strings.HasPrefix(ev.Message, prefixes[i]) || ev.To != string(queue.Downloading) {
			t.Errorf("wait %d's progress event in %s says %q; want one for each of %q in turn", i+1, ev.To, ev.Message, prefixes)
		}
		if next, _ := ev.Attrs["next_try"].(string); !strings.Contains(ev.Message, "next try at ") || next == "" {
			t.Errorf("a wait's progress event (%q) gives its next try as %q", ev.Message, next)
		}
	}
	if len(heard) != len(prefixes) {
		t.Errorf("%d waits heard as progress events, want %d (one an answer waited for, not one a try): %q", len(heard), len(prefixes), heard)
	}
}

// A job whose file's server answers 503 three times in a row, then 429,
// then serves: its events say its wait once for each answer, with the
// first try's message and next try, though each try writes its message and
// deferral. Before, each try published one (4 here): a job waiting an hour
// made 70 to 180 near-identical rows of its timeline.
func TestABusyWaitIsOneEventPerAnswer(t *testing.T) {
	t.Parallel()
	answers := []int{http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusTooManyRequests}
	var asked atomic.Int32
	data := []byte("alpha\n")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if i := int(asked.Add(1)) - 1; i < len(answers) {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "busy: answered by the test", answers[i])
			return
		}
		http.ServeContent(w, req, "a.txt", time.Time{}, bytes.NewReader(data))
	}))
	t.Cleanup(srv.Close)
	var logs logtest.Buffer
	r := newRig(t, nil, withLogs(t, &logs))
	busyRow := fileRow(srv.URL+"/a.txt", "a.txt", data)
	b := r.submit(r.content.put("/answers.checkm", manifest("mrt-ingest-manifest", busyRow)))
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("batch %s (%s), want Completed once the server serves", b.State(), b.Status.Message)
	}
	if waits := logs.Lines("a depositor's server is busy; job waits"); len(waits) != len(answers) {
		t.Fatalf("the job waited %d times; want %d, one a busy answer", len(waits), len(answers))
	}
	download := "waiting for a busy server: producer/a.txt: download " + busyRow.url + ": "
	checkWaitsHeard(t, r.jobEvents(r.jobsOf(b.ID)["manifest"].ID), download+"HTTP 503 Service Unavailable; ", download+"HTTP 429 Too Many Requests; ")
}

// busyAnswer is a busy answer with a Retry-After, as a depositor's server
// gives it.
type busyAnswer struct {
	name       string
	status     int
	retryAfter func(time.Time) (string, time.Time)
}

// forEachBusyAnswer runs test, in parallel, for each of busyCases,
// with a server giving it until the test says otherwise (svc.left).
func forEachBusyAnswer(t *testing.T, test func(t *testing.T, c busyAnswer, svc *busyService)) {
	t.Parallel()
	for _, c := range busyCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			test(t, c, newBusyService(c.status, c.retryAfter, 1<<20))
		})
	}
}

// busyCases are 503 asking for 1 s in seconds and 429 asking for up to
// 2 s by an HTTP date.
func busyCases() []busyAnswer {
	return []busyAnswer{
		{"503 Retry-After seconds", http.StatusServiceUnavailable, retryAfterSeconds(1)},
		{"429 Retry-After date", http.StatusTooManyRequests, retryAfterDate(2 * time.Second)},
	}
}

// A depositor's server still busy after the job waited --fetch-busy-limit:
// the job fails, its message naming the file, the URL, the answer and how
// long it waited, and the batch's report lists it.
func TestPayloadServerBusyPastTheLimitFails(t *testing.T) {
	t.Parallel()
	svc := busyOneSecond(1 << 20)
	busyRow := busyPayload(t, svc, []byte("alpha\n"))
	r := newRig(t, nil, func(hc *handlers.Config, _ *reactor.Config) { hc.BusyLimit = 1500 * time.Millisecond })
	b := r.submit(r.content.put("/busy.checkm", manifest("mrt-ingest-manifest", busyRow)))
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Failed {
		t.Fatalf("batch %s (%s), want Failed", b.State(), b.Status.Message)
	}
	j := r.jobsOf(b.ID)["manifest"]
	want := "Downloading: producer/a.txt: download " + busyRow.url + ": HTTP 503 Service Unavailable; its server still answered so after the job waited "
	if msg := j.Status.Message; j.State() != queue.Failed || !strings.HasPrefix(msg, want) || !strings.HasSuffix(msg, " for it (--fetch-busy-limit)") {
		t.Errorf("job %s: %q; want Failed, %q… for it (--fetch-busy-limit)", j.State(), msg, want)
	}
	if n := svc.busyAnswers(); n < 2 || n > 3 {
		t.Errorf("the busy server was asked %d times in 1.5 s, each wait 1 s as asked; want 2 or 3", n)
	}
	if b.Report == nil || !strings.Contains(b.Report.Failures[j.ID], busyRow.url) {
		t.Errorf("the report %+v; want the failure of %s naming %s", b.Report, j.ID, busyRow.url)
	}
}

// A depositor's server that answers a file's download 500 (each of the
// fetch client's tries: the step fails, and is tried again) and then 503
// with a Retry-After, over and over: the job fails once it has waited
// --fetch-busy-limit from the first busy answer. Before, the step's
// retryable failure ended the job's busy waits in a row and the wait reset
// its attempts, so the job neither spent its attempts nor reached the
// limit: it waited without end (here until the server served, after 4
// busy answers, 4 times the limit).
func TestPayloadServerBusyBetween500sFailsAtTheLimit(t *testing.T) {
	t.Parallel()
	const limit = time.Second
	var (
		mu       sync.Mutex
		requests int
		busy     []time.Time
	)
	data := []byte("alpha\n")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if len(busy) >= 4 {
			http.ServeContent(w, req, "a.txt", time.Time{}, bytes.NewReader(data))
			return
		}
		requests++
		if requests%3 != 0 { // the rig's fetch client tries twice: the step fails
			http.Error(w, "broken: answered by the test", http.StatusInternalServerError)
			return
		}
		busy = append(busy, time.Now())
		w.Header().Set("Retry-After", "1")
		http.Error(w, "busy: answered by the test", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	r := newRig(t, nil, func(hc *handlers.Config, _ *reactor.Config) { hc.BusyLimit = limit })
	b := r.submit(r.content.put("/alternating.checkm", manifest("mrt-ingest-manifest", fileRow(srv.URL+"/a.txt", "a.txt", data))))
	b = r.waitBatch(b.ID, queue.Completed, queue.Failed)
	j := r.jobsOf(b.ID)["manifest"]
	mu.Lock()
	defer mu.Unlock()
	if j.State() != queue.Failed || !strings.Contains(j.Status.Message, "(--fetch-busy-limit)") {
		t.Fatalf("job %s (%q) after %d busy answers over %v; want Failed once it has waited the limit, %v",
			j.State(), j.Status.Message, len(busy), busy[len(busy)-1].Sub(busy[0]).Round(time.Millisecond), limit)
	}
	if n := len(busy); n != 2 {
		t.Errorf("%d busy answers; want 2: the second, a second after the first, is past the limit", n)
	}
}

// A job's files verified by its last try, unchanged since, are not read
// again at its next try after a wait for a busy server: each try read
// them all (2 s a GiB by MD5 here), holding a Downloading worker as long,
// at each of dozens of tries an hour. Its wait's log line says how many
// were kept unread.
func TestPayloadServerBusyKeptFilesNotReadAgain(t *testing.T) {
	t.Parallel()
	var logs logtest.Buffer
	svc := busyOneSecond(2)
	busyRow := busyPayload(t, svc, []byte("alpha\n"))
	r := newRig(t, nil, withLogs(t, &logs))
	beta := []byte("beta, from another server\n")
	betaRow := fileRow(r.content.put("/kept/b.txt", beta), "b.txt", beta)
	b := r.submit(r.content.put("/kept.checkm", manifest("mrt-ingest-manifest", busyRow, betaRow)))
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("batch %s (%s), want Completed once the server serves", b.State(), b.Status.Message)
	}
	waits := logs.Lines("a depositor's server is busy; job waits")
	if len(waits) != 2 || !strings.Contains(waits[0], "kept_unread=0") || !strings.Contains(waits[1], "kept_unread=1") {
		t.Errorf("the waits' lines %q; want two, the second with producer/b.txt kept unread (kept_unread=1)", waits)
	}
	if n := r.content.getCount("/kept/b.txt"); n != 1 {
		t.Errorf("the job's file on another server was fetched %d times; want once", n)
	}
}

// A job whose object manifest (a batch manifest's line naming an
// mrt-ingest-manifest) is on a server answering 503 or 429 with a
// Retry-After waits as a download's file does: unlocked, deferred, its
// attempts unspent, no request sooner than asked, its message saying what
// it waits for; once the server serves, it completes. Before, the fetch
// client asked again under the Estimating worker and gave up (estimate 0),
// then Downloading spent the job's attempts on it: Failed.
func TestObjectManifestServerBusyWaitsForIt(t *testing.T) {
	forEachBusyAnswer(t, func(t *testing.T, c busyAnswer, svc *busyService) { // busy until the job is seen waiting
		obs := watchBackEnds(t)
		r := newRig(t, nil, withAttempts(2, 10*time.Millisecond), obs.option(), func(hc *handlers.Config, _ *reactor.Config) {
			hc.Fetch.MaxWait = fetch.Defaults.MaxWait // the client's own longest wait, 10 s, is no reason to hold a worker
		})
		alpha := []byte("alpha\n")
		obj := busyPayload(t, svc, manifest("mrt-ingest-manifest", fileRow(r.content.put("/objbusy/a.txt", alpha), "a.txt", alpha)))
		b := r.submit(r.content.put("/objbusy.checkm", manifest("mrt-batch-manifest", row{url: obj.url, size: -1})))
		obs.waited(t, queue.Estimating, 1, "the object manifest's busy server")
		jobs := r.jobsOf(b.ID)
		if len(jobs) != 1 {
			t.Fatalf("%d jobs, want 1", len(jobs))
		}
		for _, j := range jobs {
			if d := j.Status.Deferred; d == nil || d.Host != "test" {
				t.Errorf("the waiting job's deferral %+v; want one until its next try, by this daemon (test)", d)
			}
			want := fmt.Sprintf("waiting for a busy server: object manifest: fetch %s: HTTP %d %s; it asked to be asked again in ", obj.url, c.status, http.StatusText(c.status))
			if msg := j.Status.Message; !strings.HasPrefix(msg, want) || !strings.Contains(msg, ", spending no attempt; the job fails if it is still busy at ") {
				t.Errorf("the waiting job's message %q; want %q…, spending no attempt; the job fails if it is still busy at …", msg, want)
			}
		}
		svc.left.Store(2) // two more waits, past the job's 2 attempts
		if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
			t.Fatalf("batch %s (%s), want Completed once the server serves", b.State(), b.Status.Message)
		}
		n := svc.busyAnswers()
		svc.checkWaitedAsFor(t, n)
		if n < 3 {
			t.Errorf("%d busy answers; want 3 or more", n)
		}
		if waits := len(obs.states) + 1; waits != n {
			t.Errorf("the job waited %d times for %d busy answers; want a wait after each, no request asked again in the fetch client", waits, n)
		}
		if spent := obs.spent.Load(); spent != 0 {
			t.Errorf("steps spent %d attempts; want none while the server was busy", spent)
		}
	})
}
