package handlers_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/fetch"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// batchWaits is the daemon's line for each wait of a batch for its busy
// payload server.
const batchWaits = "payload: a depositor's server is busy; batch waits"

// busyManifest serves, behind svc, a batch manifest of one object whose
// file the rig's content server holds; it returns the manifest's URL.
func busyManifest(t *testing.T, r *rig, svc *busyService) string {
	alpha := []byte("alpha\n")
	return busyPayload(t, svc, manifest("mrt-ingest-manifest", fileRow(r.content.put("/busybatch/a.txt", alpha), "a.txt", alpha))).url
}

// A batch whose payload server answers 503 or 429 with a Retry-After
// waits as long as asked, spending no attempt and holding neither its lock
// nor the daemon's one batch worker: another batch submitted after it is
// made and completes meanwhile, and the waiting batch's message says what
// it waits for and until when; once the server serves, it completes.
// Before, the batch's attempts were spent within the fetch client's waits
// and it failed: `payload: fetch …: HTTP 503 Service Unavailable (2
// requests)`.
func TestPayloadServerBusyBatchWaitsForIt(t *testing.T) {
	forEachBusyAnswer(t, func(t *testing.T, c busyAnswer, svc *busyService) { // busy until the other batch is done
		var logs logtest.Buffer
		r := newRig(t, nil, withAttempts(2, 10*time.Millisecond), withLogs(t, &logs), func(hc *handlers.Config, rc *reactor.Config) {
			hc.Fetch.MaxWait = fetch.Defaults.MaxWait // the client's own longest wait, 10 s, is no reason to hold a batch worker
			rc.BatchWorkers = 1
		})
		url := busyManifest(t, r, svc)
		busy := r.submit(url)
		fine := r.submitObject("/fine.checkm", object{"b.txt": []byte("beta\n")})
		if b := r.waitBatch(fine.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
			t.Fatalf("the other batch %s (%s), want Completed while the busy one waits", b.State(), b.Status.Message)
		}
		// Tried first (the older), it waits: its message was written
		// before the batch worker took the other one.
		var b *queue.Batch
		r.read(func() (err error) { b, err = r.q.LoadBatch(t.Context(), busy.ID); return err })
		if b.State() != queue.Pending || b.Locked {
			t.Fatalf("when the other batch completed, the busy one was %s (%s), locked %v; want Pending, unlocked, waiting",
				b.State(), b.Status.Message, b.Locked)
		}
		msg := b.Status.Message
		for _, want := range []string{fmt.Sprintf("waiting for a busy server: fetch %s: HTTP %d %s", url, c.status, http.StatusText(c.status)),
			"; it asked to be asked again in ", "s (Retry-After); next try at ", ", spending no attempt; the batch fails if it is still busy at ", " (--fetch-busy-limit 1h)"} {
			if !strings.Contains(msg, want) {
				t.Errorf("the waiting batch's message %q lacks %q", msg, want)
			}
		}
		svc.left.Store(2) // two more waits, past the batch's 2 attempts
		if b := r.waitBatch(busy.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
			t.Fatalf("batch %s (%s), want Completed once the server serves", b.State(), b.Status.Message)
		}
		n := svc.busyAnswers()
		svc.checkWaitedAsFor(t, n)
		if n < 3 {
			t.Errorf("%d busy answers; want 3 or more", n)
		}
		if waits := len(logs.Lines(batchWaits, busy.ID)); waits != n {
			t.Errorf("the batch waited %d times for %d busy answers; want a wait after each, no request asked again in the fetch client", waits, n)
		}
		r.checkBatchWaitHeard(t, busy.ID, fmt.Sprintf("waiting for a busy server: fetch %s: HTTP %d %s; ", url, c.status, http.StatusText(c.status)))
		if retried := logs.Lines("batch handler failed; retrying"); len(retried) > 0 {
			t.Errorf("the batch spent attempts: %q", retried)
		}
	})
}

// A batch whose payload server is still busy after it waited
// --fetch-busy-limit fails, its message naming the URL, the answer and how
// long it waited.
func TestPayloadServerBusyBatchPastTheLimitFails(t *testing.T) {
	t.Parallel()
	svc := busyOneSecond(1 << 20)
	r := newRig(t, nil, func(hc *handlers.Config, _ *reactor.Config) { hc.BusyLimit = 1500 * time.Millisecond })
	url := busyManifest(t, r, svc)
	b := r.submit(url)
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Failed {
		t.Fatalf("batch %s (%s), want Failed", b.State(), b.Status.Message)
	}
	want := "payload: fetch " + url + ": HTTP 503 Service Unavailable; its server still answered so after the batch waited "
	if msg := b.Status.Message; !strings.HasPrefix(msg, want) || !strings.HasSuffix(msg, " for it (--fetch-busy-limit)") {
		t.Errorf("batch message %q; want %q… for it (--fetch-busy-limit)", msg, want)
	}
	if n := svc.busyAnswers(); n < 2 || n > 3 {
		t.Errorf("the busy server was asked %d times in 1.5 s, each wait 1 s as asked; want 2 or 3", n)
	}
}

// A batch waiting for its busy payload server is deferred in its status:
// a second daemon, woken when the first lets go of the batch's lock, asks
// the server no sooner than it asked either; the batch completes.
func TestPayloadServerBusyBatchDeferredOnEveryDaemon(t *testing.T) {
	t.Parallel()
	svc := busyOneSecond(3)
	r := newRig(t, nil)
	data := t.TempDir()
	r.start(anotherHost, func(hc *handlers.Config, _ *reactor.Config) { hc.DataDir = data }) // its own inventory
	b := r.submit(busyManifest(t, r, svc))
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("batch %s (%s), want Completed", b.State(), b.Status.Message)
	}
	svc.checkWaitedAsFor(t, 3)
	r.checkBatchWaitHeard(t, b.ID, "waiting for a busy server: fetch ")
}

// checkBatchWaitHeard checks that batch bid's events said its wait for
// its busy payload server once, as one progress event of the batch (no
// job), in Pending: its message, beginning with prefix, and when it tries
// again. Before, a batch's events were its moves only.
func (r *rig) checkBatchWaitHeard(t *testing.T, bid, prefix string) {
	t.Helper()
	var heard []events.Event
	for _, ev := range r.jobEvents("") { // the rig files progress events by job
		if ev.BatchID == bid {
			heard = append(heard, ev)
		}
	}
	if len(heard) != 1 {
		t.Fatalf("batch %s's wait heard as %d events, want one (not one a try): %+v", bid, len(heard), heard)
	}
	ev := heard[0]
	next, _ := ev.Attrs["next_try"].(string)
	if ev.Kind != events.KindProgress || ev.To != string(queue.Pending) || ev.Attrs["waiting"] != true || !strings.HasPrefix(ev.Message, prefix) || next == "" {
		t.Errorf("batch %s's wait heard as %+v; want a progress event in Pending, attrs.waiting and next_try, its message starting %q", bid, ev, prefix)
	}
}

// anotherHost is a second daemon's host name.
func anotherHost(hc *handlers.Config, rc *reactor.Config) { hc.Host, rc.Host = "test2", "test2" }

// A daemon that stops while a batch waits for its busy payload server
// leaves it Pending and unlocked: another host takes it once its deferral
// is over, and completes it.
func TestPayloadServerBusyBatchLeftToAnotherHost(t *testing.T) {
	t.Parallel()
	svc := newBusyService(http.StatusServiceUnavailable, retryAfterSeconds(3), 1)
	var logs logtest.Buffer
	r := newRig(t, nil, withLogs(t, &logs))
	b := r.submit(busyManifest(t, r, svc))
	logs.WaitFor(t, batchWaits, b.ID)
	r.stop()
	r.start(withLogs(t, &logs), anotherHost)
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("batch %s (%s), want Completed by the other host", b.State(), b.Status.Message)
	}
	svc.checkWaitedAsFor(t, 1)
}

// A batch held while it waits for its busy payload server, and released
// after --fetch-busy-limit, waits again from its release: the hold ended
// its waits, as a requeue ends a job's. Before, the waits in a row of its
// daemon's memory outlived the hold, and its first busy answer after the
// release failed it: `…; its server still answered so after the batch
// waited 2s for it (--fetch-busy-limit)`.
func TestPayloadServerBusyBatchHeldWaitsAgainOnRelease(t *testing.T) {
	t.Parallel()
	const limit = 1500 * time.Millisecond
	svc := busyOneSecond(1)
	var logs logtest.Buffer
	r := newRig(t, nil, withLogs(t, &logs), func(hc *handlers.Config, _ *reactor.Config) { hc.BusyLimit = limit })
	b := r.submit(busyManifest(t, r, svc))
	logs.WaitFor(t, batchWaits, b.ID)
	first := time.Now()
	asOperator(t, "hold", func() error { _, err := r.q.HoldBatch(t.Context(), b.ID); return err })
	time.Sleep(time.Until(first.Add(limit))) // held past the limit
	svc.left.Store(1)
	if _, err := r.q.ReleaseBatch(t.Context(), b.ID); err != nil {
		t.Fatal(err)
	}
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("batch %s (%s) after its release; want Completed, after a wait for the busy answer", b.State(), b.Status.Message)
	}
	svc.checkWaitedAsFor(t, 2)
}

// asOperator runs act, an operator's action (what) on a batch waiting for
// its busy payload server, again while the batch is locked: the action is
// refused while the handler holds the batch's lock, which it lets go of as
// soon as it has written the wait.
func asOperator(t *testing.T, what string, act func() error) {
	t.Helper()
	for try := 0; ; try++ {
		err := act()
		if err == nil {
			return
		}
		if !errors.Is(err, queue.ErrLocked) || try == 100 {
			t.Fatalf("%s of the waiting batch: %v", what, err)
		}
		time.Sleep(10 * time.Millisecond) // an operator trying again
	}
}

// A batch cancelled while it waits for its busy payload server ends
// Deleted: its deferral's end wakes no try of it, and the server is not
// asked again.
func TestPayloadServerBusyBatchCancelledWhileItWaits(t *testing.T) {
	t.Parallel()
	svc := busyOneSecond(1 << 20)
	var logs logtest.Buffer
	r := newRig(t, nil, withLogs(t, &logs))
	b := r.submit(busyManifest(t, r, svc))
	logs.WaitFor(t, batchWaits, b.ID)
	next := time.Now().Add(time.Second)
	asOperator(t, "cancel", func() error {
		_, err := r.q.CancelPendingBatch(t.Context(), b.ID, "cancelled by the test")
		return err
	})
	time.Sleep(time.Until(next)) // past its deferral
	// A batch made after: the Pending pool looked at the queue since.
	if o := r.waitBatch(r.submitObject("/after.checkm", object{"b.txt": []byte("beta\n")}).ID, queue.Completed, queue.Failed); o.State() != queue.Completed {
		t.Fatalf("the other batch %s (%s), want Completed", o.State(), o.Status.Message)
	}
	r.read(func() (err error) { b, err = r.q.LoadBatch(t.Context(), b.ID); return err })
	if b.State() != queue.Deleted || b.Status.Deferred != nil {
		t.Errorf("the cancelled batch is %s, deferred %v (%s); want Deleted, no deferral", b.State(), b.Status.Deferred, b.Status.Message)
	}
	if n := svc.busyAnswers(); n != 1 {
		t.Errorf("the busy server was asked %d times; want once, before the cancel", n)
	}
}
