package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor/stalled"
)

// The progress line tells completed jobs from failed ones (a bar with
// failures is never all #), and shows bytes with their rate, and the total
// and the time left once every job's size is known.
func TestProgressText(t *testing.T) {
	for _, c := range []struct {
		n          progress
		plain, bar string
	}{
		{progress{total: -1}, "bid7: 0/? jobs finished (0 completed, 0 failed)", "[--------------------]"},
		{progress{finished: 1, total: 4}, "bid7: 1/4 jobs finished (1 completed, 0 failed)", "[#####---------------]"},
		{progress{finished: 4, failed: 1, total: 4}, "bid7: 4/4 jobs finished (3 completed, 1 failed)", "[###############xxxxx]"},
		{progress{finished: 100, failed: 1, total: 100}, "bid7: 100/100 jobs finished (99 completed, 1 failed)", "[###################x]"},
		{progress{finished: 1, total: 4, bytes: 512}, "bid7: 1/4 jobs finished (1 completed, 0 failed), 512 B downloaded", ""},
		{progress{finished: 1, total: 4, bytes: 3 << 30, rate: 1.5 * (1 << 20)},
			"bid7: 1/4 jobs finished (1 completed, 0 failed), 3.0 GiB downloaded, 1.5 MiB/s", ""},
		{progress{finished: 1, total: 4, bytes: 1 << 20, bytesTotal: 11 << 20, rate: 1 << 20},
			"bid7: 1/4 jobs finished (1 completed, 0 failed), 1.0 MiB of 11.0 MiB downloaded, 1.0 MiB/s, ETA 10s", ""},
		{progress{finished: 4, total: 4, bytes: 11 << 20, bytesTotal: 11 << 20, rate: 1 << 20},
			"bid7: 4/4 jobs finished (4 completed, 0 failed), 11.0 MiB of 11.0 MiB downloaded, 1.0 MiB/s", ""},
	} {
		if got := c.n.text("bid7", false); got != c.plain {
			t.Errorf("%+v:\n%q, want\n%q", c.n, got, c.plain)
		}
		if got := c.n.text("bid7", true); c.bar != "" && got != c.bar+" "+strings.TrimPrefix(c.plain, "bid7: ") {
			t.Errorf("%+v on a terminal: %q, want the bar %s", c.n, got, c.bar)
		}
	}
}

// The tally measures the rate over the time bytes kept coming (a waiting
// job's progress event, without bytes, starts no clock), knows the total
// once every job has a size, and keeps a requeued job's last state.
func TestTallyProgress(t *testing.T) {
	tl := newTally()
	tl.total = 2
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ev := func(kind, jid, to string, attrs map[string]any) events.Event {
		return events.Event{Kind: kind, JobID: jid, To: to, Attrs: attrs}
	}
	tl.sawEvent(ev(events.KindJob, "jid1", "Provisioning", map[string]any{"space_needed": 4096.0}), t0.Add(-time.Hour))
	// An hour's wait for room before the download is no download time.
	tl.sawEvent(ev(events.KindProgress, "jid1", "Provisioning", map[string]any{"waiting": true}), t0.Add(-time.Hour))
	tl.sawEvent(ev(events.KindProgress, "jid1", "Downloading", map[string]any{"bytes_done": 1024.0}), t0)
	tl.sawEvent(ev(events.KindProgress, "jid1", "Downloading", map[string]any{"bytes_done": 3072.0}), t0.Add(2*time.Second))
	tl.sawEvent(ev(events.KindProgress, "jid1", "Downloading", map[string]any{"bytes_done": 3072.0}), t0.Add(9*time.Second))
	n := tl.progress(t0)
	if n.bytes != 3072 || n.rate != 1024 || n.bytesTotal != 0 {
		t.Fatalf("%+v: want 3072 bytes at 1024 B/s (the idle 7 s and the wait before do not count), no total while jid2's size is unknown", n)
	}
	tl.sawEvent(ev(events.KindProgress, "jid2", "Downloading", map[string]any{"bytes_done": 0.0, "bytes_total": 2048.0}), t0.Add(10*time.Second))
	if n = tl.progress(t0); n.bytesTotal != 6144 {
		t.Fatalf("%+v: want a total of 6144 bytes", n)
	}
	tl.set("jid1", "Failed")
	tl.set("jid1", "Completed") // requeued, then done
	tl.set("jid2", "Failed")
	if n = tl.progress(t0); n.finished != 2 || n.failed != 1 {
		t.Fatalf("%+v: want 2 finished, 1 of them failed", n)
	}
}

// While jobs wait for a busy server the line says so, and until when, not
// an ETA from the bytes: before, the walk's batch said "ETA 0s" for as long
// as its last job waited (an hour at most).
func TestProgressSaysJobsWaitForABusyServer(t *testing.T) {
	at := time.Date(2026, 11, 28, 5, 41, 7, 0, time.UTC)
	next := at.Add(30 * time.Second)
	after := "ETA after " + next.Local().Format(time.TimeOnly)
	walk := progress{finished: 3, failed: 2, total: 4, bytes: 300_749, bytesTotal: 301_261, rate: 4915, at: at}
	for _, c := range []struct {
		what string
		n    func(n progress) progress
		want string
	}{
		{"the walk's last job waits", func(n progress) progress { n.busy, n.nextTry = 1, next; return n },
			"3/4 jobs finished (1 completed, 2 failed), 293.7 KiB of 294.2 KiB downloaded, 4.8 KiB/s, " + after + ": 1 job waits for a busy server"},
		{"its next try not said", func(n progress) progress { n.busy = 1; return n },
			"3/4 jobs finished (1 completed, 2 failed), 293.7 KiB of 294.2 KiB downloaded, 4.8 KiB/s, ETA unknown: 1 job waits for a busy server"},
		{"none waits, under a second left: no ETA 0s", func(n progress) progress { return n },
			"3/4 jobs finished (1 completed, 2 failed), 293.7 KiB of 294.2 KiB downloaded, 4.8 KiB/s"},
		{"two unfinished, one waits past the bytes' ETA", func(n progress) progress {
			n.finished, n.bytesTotal, n.busy, n.nextTry = 2, n.bytes+10*4915, 1, next
			return n
		}, "2/4 jobs finished (0 completed, 2 failed), 293.7 KiB of 341.7 KiB downloaded, 4.8 KiB/s, " + after + ": 1 job waits for a busy server"},
		{"two unfinished, one waits less than the bytes take", func(n progress) progress {
			n.finished, n.bytesTotal, n.busy, n.nextTry = 2, n.bytes+60*4915, 1, next
			return n
		}, "2/4 jobs finished (0 completed, 2 failed), 293.7 KiB of 581.7 KiB downloaded, 4.8 KiB/s, ETA 1m0s"},
		{"before any byte, two wait", func(progress) progress {
			return progress{total: 2, busy: 2, nextTry: next, at: at}
		}, "0/2 jobs finished (0 completed, 0 failed), " + after + ": 2 jobs wait for a busy server"},
	} {
		if got := c.n(walk).text("bid7", false); got != "bid7: "+c.want {
			t.Errorf("%s:\n%q, want\n%q", c.what, got, "bid7: "+c.want)
		}
	}
}

// The tally knows which unfinished jobs wait for a busy server, from their
// progress events (a move or more bytes end the wait), and counts a failed
// job in the total for the bytes it downloaded, not its estimate: before,
// the walk's batch ended "4/4 jobs finished …, 293.7 KiB of 294.2 KiB".
func TestTallyBusyServerAndFailedBytes(t *testing.T) {
	tl := newTally()
	tl.total = 3
	t0 := time.Date(2026, 11, 28, 5, 41, 0, 0, time.UTC)
	next := t0.Add(20 * time.Second)
	wait := func(jid string) events.Event {
		return events.Event{Kind: events.KindProgress, JobID: jid, To: "Downloading", Message: stalled.BusyServerPrefix + ": fetch …",
			Attrs: map[string]any{"waiting": true, "next_try": next.Format(time.RFC3339)}}
	}
	got := func(jid string, done, total float64) events.Event {
		return events.Event{Kind: events.KindProgress, JobID: jid, To: "Downloading", Attrs: map[string]any{"bytes_done": done, "bytes_total": total}}
	}
	tl.sawEvent(got("jid1", 1000, 1000), t0)
	tl.set("jid1", "Completed")
	tl.sawEvent(got("jid2", 200, 500), t0)
	tl.sawEvent(events.Event{Kind: events.KindJob, JobID: "jid2", To: "Failed"}, t0)
	tl.set("jid2", "Failed")
	tl.sawEvent(got("jid3", 0, 300), t0)
	tl.set("jid3", "Downloading")
	tl.sawEvent(wait("jid3"), t0)
	tl.sawEvent(got("jid3", 0, 300), t0.Add(time.Second)) // no byte moved: still waits
	n := tl.progress(t0)
	if n.bytesTotal != 1500 || n.busy != 1 || !n.nextTry.Equal(next) {
		t.Fatalf("%+v: want a total of 1500 bytes (jid2 failed at 200 of 500), 1 job waiting until %s", n, next)
	}
	// Its next try gone by, the job still waits (a steady busy wait's later
	// tries publish no event): their time is unknown, not the past one.
	if n = tl.progress(next.Add(time.Minute)); n.busy != 1 || !n.nextTry.IsZero() || !strings.HasPrefix(n.eta(), "ETA unknown: 1 job waits") {
		t.Fatalf("%+v (%q): want 1 job waiting, its next try unknown once %s has gone by", n, n.eta(), next)
	}
	tl.total = 4 // a fourth job, deleted at 50 of 700 bytes, owes no more either
	tl.sawEvent(got("jid4", 50, 700), t0)
	tl.set("jid4", "Deleted")
	if n = tl.progress(t0); n.bytesTotal != 1550 {
		t.Fatalf("%+v: want a total of 1550 bytes (jid4 deleted at 50 of 700)", n)
	}
	tl.sawEvent(got("jid3", 100, 300), t0.Add(2*time.Second)) // its server answered
	if n = tl.progress(t0); n.busy != 0 {
		t.Fatalf("%+v: want none waiting once bytes came", n)
	}
	tl.sawEvent(wait("jid3"), t0)
	tl.sawEvent(events.Event{Kind: events.KindJob, JobID: "jid3", To: "Processing"}, t0)
	if n = tl.progress(t0); n.busy != 0 {
		t.Fatalf("%+v: want none waiting after its move", n)
	}
}

// On a terminal narrower than the progress line, the line is cut to its
// width (a wrapped line is redrawn from its last row, leaving the rows
// above at each draw); the command's last line, in its place, stays whole.
func TestProgressLineFitsTheTerminal(t *testing.T) {
	var b strings.Builder
	p := newProgressLine(&b, true, "")
	p.cols = func() int { return 20 }
	p.draw("auditing: 3 objects, 3 versions, 12 files", time.Now(), true)
	if want := "\rauditing: 3 object…" + eraseLine; b.String() != want {
		t.Errorf("drawn %q on 20 columns, want %q", b.String(), want)
	}
	b.Reset()
	p.endWith("audited 3 objects, 3 versions, 12 files")
	if want := "\r" + eraseLine + "audited 3 objects, 3 versions, 12 files\n"; b.String() != want {
		t.Errorf("the last line %q, want %q", b.String(), want)
	}
}
