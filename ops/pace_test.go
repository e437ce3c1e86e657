package ops

import (
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor/queue"
)

// The pace is learned from job events: the rate a state's queue drains and
// the median time jobs spend in each later state give a job's ETA; the
// rate jobs finish gives a batch's. Unknown stays unknown (nil).
func TestPaceEstimates(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	p := NewPace()
	now := t0
	p.now = func() time.Time { return now }
	if p.JobETA(queue.Pending, 1, time.Time{}) != nil || p.BatchETA(5, 0, time.Time{}) != nil {
		t.Fatal("an estimate before anything was seen")
	}
	move := func(jid string, at time.Duration, from, to queue.State) {
		p.Observe(events.Event{Kind: events.KindJob, JobID: jid, From: string(from), To: string(to), Time: t0.Add(at)})
	}
	// Two jobs go through, one every 10 s; each step takes 2 s, Processing 6 s.
	path := []queue.State{queue.Pending, queue.Estimating, queue.Provisioning, queue.Downloading, queue.Processing,
		queue.Storing, queue.Recording, queue.Notify, queue.Completed}
	at := map[string]time.Duration{"jid1": 0, "jid2": 10 * time.Second}
	for jid, start := range at {
		d := start
		for i, s := range path[1:] {
			move(jid, d, path[i], s)
			d += 2 * time.Second
			if s == queue.Processing {
				d += 4 * time.Second
			}
		}
	}
	now = t0.Add(time.Minute)
	// Pending drained one job in 10 s: 3rd in line is 30 s away, then
	// Estimating … Notify: 6 × 2 s + 6 s = 18 s.
	eta := p.JobETA(queue.Pending, 3, time.Time{})
	if eta == nil || eta.Seconds != 48 || !eta.At.Equal(now.Add(48*time.Second)) || !strings.Contains(eta.Basis, "place 3 in Pending") {
		t.Fatalf("Pending ETA %+v, want 48 s", eta)
	}
	if eta := p.JobETA(queue.Notify, 1, time.Time{}); eta == nil || eta.Seconds != 10 {
		t.Fatalf("Notify ETA %+v, want 10 s (its queue drains one in 10 s; nothing after)", eta)
	}
	// A job whose step a busy server deferred leaves its state no sooner
	// than its next try (before, its ETA was the queue's rate alone:
	// seconds away, before the next try its message named); a next try
	// past changes nothing.
	plain := p.JobETA(queue.Downloading, 1, time.Time{})
	if plain == nil || plain.Seconds != 22 {
		t.Fatalf("Downloading ETA %+v, want 22 s", plain)
	}
	if eta := p.JobETA(queue.Downloading, 1, now.Add(-time.Minute)); eta == nil || *eta != *plain {
		t.Errorf("a next try past: ETA %+v, want %+v", eta, plain)
	}
	eta = p.JobETA(queue.Downloading, 1, now.Add(5*time.Minute))
	if eta == nil || eta.Seconds != 312 || !strings.Contains(eta.Basis, "its next try in Downloading at 2026-11-23T12:06:00Z") {
		t.Fatalf("deferred 5 min: ETA %+v, want 312 s from its next try", eta)
	}
	for _, s := range []queue.State{queue.Held, queue.Failed, queue.Completed} {
		if p.JobETA(s, 1, time.Time{}) != nil {
			t.Errorf("an ETA for a %s job", s)
		}
	}
	// Two finishes 10 s apart: 0.1 jobs/s, so 5 jobs take 50 s.
	if eta := p.BatchETA(5, 0, time.Time{}); eta == nil || eta.Seconds != 50 || !strings.HasPrefix(eta.Basis, "5 unfinished jobs at") {
		t.Fatalf("batch ETA %+v, want 50 s for 5 unfinished jobs", eta)
	}
	if eta := p.BatchETA(1, 0, time.Time{}); eta == nil || !strings.HasPrefix(eta.Basis, "1 unfinished job at") { // was "1 unfinished jobs"
		t.Fatalf("batch ETA %+v, want its basis of 1 unfinished job", eta)
	}
	// A batch whose unfinished jobs wait for a busy server reports no sooner
	// than the latest next try (before, the finish rate alone: 10 s for a
	// job waiting 15 minutes); a next try past changes nothing.
	plainBatch := p.BatchETA(2, 0, time.Time{})
	if eta := p.BatchETA(2, 1, now.Add(-time.Minute)); eta == nil || *eta != *plainBatch {
		t.Errorf("a next try past: batch ETA %+v, want %+v", eta, plainBatch)
	}
	eta = p.BatchETA(2, 1, now.Add(15*time.Minute))
	if eta == nil || eta.Seconds != 900 || eta.Basis != "not before the latest next try of its jobs that wait for a busy server (1 of 2 unfinished jobs), at 2026-11-23T12:16:00Z, which the server asked for" {
		t.Fatalf("a job deferred 15 min: batch ETA %+v, want 900 s from its next try", eta)
	}
	// A cancel is no pace: its failures do not count as finishes.
	for i := range 100 {
		p.Observe(events.Event{Kind: events.KindJob, JobID: "c" + strings.Repeat("x", i), From: "Pending", To: "Failed",
			Time: t0.Add(30 * time.Second), Attrs: map[string]any{"action": "cancel"}})
	}
	if eta := p.BatchETA(5, 0, time.Time{}); eta == nil || eta.Seconds != 50 {
		t.Fatalf("batch ETA after a cancel %+v, want 50 s still", eta)
	}
	// Long after, the rates are stale: unknown again.
	now = t0.Add(time.Hour)
	if p.JobETA(queue.Pending, 1, time.Time{}) != nil || p.BatchETA(5, 0, time.Time{}) != nil {
		t.Fatal("an estimate from rates an hour old")
	}
	// A job never seen entering a state gives no step time.
	move("jid3", time.Hour, queue.Storing, queue.Recording)
	if n := len(p.steps[queue.Storing]); n != 2 {
		t.Fatalf("%d Storing samples, want the 2 seen whole", n)
	}
}
