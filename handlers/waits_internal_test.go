package handlers

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/internal/queuetest"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// A job's waits in a row for its object are forgotten once the watch of
// its end (look, under tend) sees it failed or gone, and kept while it is
// in the pipeline. They stayed for ever for a job failed or deleted while
// it waited (decision 668 (c)).
func TestObjectWaitsEndWithTheJob(t *testing.T) {
	ctx := t.Context()
	log := slog.New(slog.NewTextHandler(logtest.NewT(t), nil))
	q := queuetest.Queue(t, queuetest.Session(t, log), zktest.Root(t), log)
	closing, stop := context.WithCancel(ctx)
	defer stop()
	p := &Pipeline{q: q, log: log, closing: closing}
	b, err := q.CreateBatch(ctx, queue.SubmissionOf(map[string]any{"profile_name": "demo"}))
	if err != nil {
		t.Fatal(err)
	}
	if b, _, err = q.AcquirePendingBatch(ctx, func(x *queue.Batch) bool { return x.ID == b.ID }); err != nil {
		t.Fatal(err)
	}
	newJob := func() string {
		t.Helper()
		j, err := q.CreateJob(ctx, b, queue.JobSpec{Priority: 5})
		if err != nil {
			t.Fatal(err)
		}
		p.waits.Store(j.ID, waitsInRow{n: 3})
		return j.ID
	}
	waits := func(jid, when string, want bool) {
		t.Helper()
		if _, err := p.look(jid, filepath.Join(t.TempDir(), jid)); err != nil {
			t.Fatal(err)
		}
		if _, has := p.waits.Load(jid); has != want {
			t.Errorf("job %s %s: waits kept %v, want %v", jid, when, has, want)
		}
	}
	failed, purged := newJob(), newJob()
	waits(failed, "in the pipeline", true)
	if err := q.FailJob(ctx, failed, "", false); err != nil {
		t.Fatal(err)
	}
	waits(failed, "failed", false)
	if err := q.FailJob(ctx, purged, "", false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := q.DeleteJob(ctx, purged, true); err != nil {
		t.Fatal(err)
	}
	waits(purged, "purged", false)
}

// The waits in a row of a job or batch that waited here last longer ago
// than --fetch-busy-limit and waitsLeftAfter (cancelled, deleted, finished
// on another host: nothing here ends them) are forgotten at the next wait
// of any other; one that waited since, however long ago its waits began
// (a job waiting hours for a Storing's lock), is kept. They stayed until
// the daemon's restart.
func TestLeftWaitsAreForgotten(t *testing.T) {
	p := &Pipeline{cfg: Config{BusyLimit: time.Hour}}
	now := time.Now()
	p.waits.Store("left", waitsInRow{n: 7, since: now.Add(-3 * time.Hour), last: now.Add(-time.Hour - waitsLeftAfter - time.Minute)})
	p.waits.Store("waiting", waitsInRow{n: 200, since: now.Add(-3 * time.Hour), last: now.Add(-time.Minute)})
	if w := p.nextWait("other", nil); w.n != 1 {
		t.Fatalf("another job's first wait counted %d; want 1", w.n)
	}
	if _, kept := p.waits.Load("left"); kept {
		t.Error("the waits of a batch that last waited here 1h11m ago (past the limit, 1h, and 10m) were kept")
	}
	if w := p.nextWait("waiting", nil); w.n != 201 || !w.since.Equal(now.Add(-3*time.Hour)) {
		t.Errorf("a job still waiting: its waits %d since %v; want 201 since its first, 3h ago", w.n, w.since)
	}
	// One sweep a waitsLeftAfter: the next waits do not read every entry.
	p.waits.Store("left later", waitsInRow{n: 1, last: now.Add(-2 * time.Hour)})
	p.nextWait("other", nil)
	if _, kept := p.waits.Load("left later"); !kept {
		t.Error("a second sweep ran within 10m of the first")
	}
}

// A download's try that runs longer than the sweep's bound (a big file
// downloaded while another file stays busy) keeps its job's waits in a
// row: forgotten, its busy clock started again at the try's end, and the
// job waited past --fetch-busy-limit. Once the try ends they may go.
func TestWaitsOfARunningTryAreKept(t *testing.T) {
	p := &Pipeline{cfg: Config{BusyLimit: time.Hour}}
	now := time.Now()
	since := now.Add(-2 * time.Hour)
	p.waits.Store("downloading", waitsInRow{n: 3, since: since, last: now.Add(-time.Hour - waitsLeftAfter - time.Minute)})
	_, tried := p.tryAfterWaits("downloading")
	p.nextWait("other", nil) // the sweep, while the try runs
	if w, kept := p.waits.Load("downloading"); !kept || w.(waitsInRow).n != 3 || !w.(waitsInRow).since.Equal(since) {
		t.Fatalf("the waits of a job whose try runs here were forgotten by the sweep (kept %v): its busy clock starts again", kept)
	}
	tried()
	p.waitsSwept.Store(0) // the next sweep, past waitsLeftAfter
	p.nextWait("other", nil)
	if _, kept := p.waits.Load("downloading"); kept {
		t.Error("the waits of a job whose try ended, untouched past the bound, were kept")
	}
}

// A busy-server wait is the same while its file's answer is: the requests
// the fetch client made, the other busy files, when the server asked to be
// asked again and the next try change from try to try. Another file or
// another answer is another wait, as is any message not a busy wait.
func TestSameBusyWait(t *testing.T) {
	const first = "waiting for a busy server: producer/a.txt: download https://example.org/a.txt: HTTP 503 Service Unavailable"
	tail := "; it asked to be asked again in 20s (Retry-After); next try at 2026-11-28 05:55:45, spending no attempt; the job fails if it is still busy at 2026-11-28 06:55:44 (--fetch-busy-limit 1h)"
	for _, c := range []struct {
		was, msg string
		same     bool
	}{
		{first + tail, first + "; next try at 2026-11-28 05:56:45, spending no attempt", true},
		{first + " (and 2 other files)" + tail, first + " (3 requests) (and 1 other files)" + tail, true},
		{"waiting for a busy server: object manifest: fetch https://example.org/m: HTTP 429 Too Many Requests" + tail,
			"waiting for a busy server: object manifest: fetch https://example.org/m: HTTP 429 Too Many Requests (2 requests)", true},
		{first + tail, strings.Replace(first, "a.txt", "b.txt", 2) + tail, false},
		{first + tail, strings.Replace(first, "503 Service Unavailable", "429 Too Many Requests", 1) + tail, false},
		{"retrying after error (attempt 1 of 3): boom", first + tail, false},
		{"", first + tail, false},
	} {
		if got := sameWait(c.was, c.msg); got != c.same {
			t.Errorf("sameWait(%q, %q) = %v, want %v", c.was, c.msg, got, c.same)
		}
	}
}
