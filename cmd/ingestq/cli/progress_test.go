package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/events"
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
	n := tl.progress()
	if n.bytes != 3072 || n.rate != 1024 || n.bytesTotal != 0 {
		t.Fatalf("%+v: want 3072 bytes at 1024 B/s (the idle 7 s and the wait before do not count), no total while jid2's size is unknown", n)
	}
	tl.sawEvent(ev(events.KindProgress, "jid2", "Downloading", map[string]any{"bytes_done": 0.0, "bytes_total": 2048.0}), t0.Add(10*time.Second))
	if n = tl.progress(); n.bytesTotal != 6144 {
		t.Fatalf("%+v: want a total of 6144 bytes", n)
	}
	tl.set("jid1", "Failed")
	tl.set("jid1", "Completed") // requeued, then done
	tl.set("jid2", "Failed")
	if n = tl.progress(); n.finished != 2 || n.failed != 1 {
		t.Fatalf("%+v: want 2 finished, 1 of them failed", n)
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
