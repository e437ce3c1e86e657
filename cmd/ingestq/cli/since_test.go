package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/events"
)

// --since takes days and weeks besides Go's units, and times with dates.
func TestParseSince(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.Local)
	for in, want := range map[string]time.Time{
		"10m":                  now.Add(-10 * time.Minute),
		"1d":                   now.Add(-24 * time.Hour),
		"2w":                   now.Add(-14 * 24 * time.Hour),
		"1d12h":                now.Add(-36 * time.Hour),
		"1w1d30m":              now.Add(-(8*24*time.Hour + 30*time.Minute)),
		"2026-11-20":           time.Date(2026, 11, 20, 0, 0, 0, 0, time.Local),
		"2026-11-20 08:30:00":  time.Date(2026, 11, 20, 8, 30, 0, 0, time.Local),
		"2026-11-20T08:30:00Z": time.Date(2026, 11, 20, 8, 30, 0, 0, time.UTC),
	} {
		got, err := parseSince(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("--since %s: %v (%v), want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"yesterday", "-5m", "1.5d", "d", "1d-", "3x"} {
		if _, err := parseSince(bad, now); err == nil {
			t.Errorf("--since %s was accepted", bad)
		}
	}
}

// An event's line, replayed or live, carries its local date and time to
// the millisecond: a tail left running past midnight, or kept in a file,
// still says which day.
func TestEventLineDates(t *testing.T) {
	at := time.Date(2026, 11, 20, 8, 30, 1, 500e6, time.Local)
	ev := events.Event{Kind: events.KindJob, Time: at, Host: "h", JobID: "jid0000000001", From: "Pending", To: "Estimating"}
	if got := eventLine(ev); got[:24] != "2026-11-20 08:30:01.500 " {
		t.Errorf("event line %q: want it to start with the date and time", got)
	}
}

// A recovered event names no host (its maker is unknown) and says which
// host found its move: without that, a replay after a lost data folder
// showed a bare "-" where the host goes.
func TestEventLineSaysRecovered(t *testing.T) {
	ev := events.Event{Kind: events.KindBatch, Time: time.Now(), BatchID: "bid0000000000", To: "Failed", RecoveredBy: "vm"}
	got := eventLine(ev)
	if !strings.Contains(got, " -  batch bid0000000000") || !strings.Contains(got, "recovered by vm") {
		t.Errorf("recovered event line %q: want host - and \"recovered by vm\"", got)
	}
}

// A batch's wait (a progress event with no job) is a line of the batch's
// in `events tail` and `replay`. Before, it read "progress  (bid…)".
func TestEventLineOfABatchWait(t *testing.T) {
	ev := events.Event{Kind: events.KindProgress, Time: time.Now(), Host: "h", BatchID: "bid0000000003", To: "Pending",
		Message: "waiting for a busy server: fetch …", Attrs: map[string]any{"waiting": true}}
	if got := eventLine(ev); !strings.Contains(got, " h  progress batch bid0000000003  [waiting for a busy server: fetch …]  waiting=yes") {
		t.Errorf("a batch's wait reads %q; want it named as the batch's progress", got)
	}
}

// An access request's take-over (a progress event of the request) is a line
// of the request's in `events replay --access`. Before, it read "progress  (…)"
// with no request.
func TestEventLineOfAnAccessTakeOver(t *testing.T) {
	ev := events.Event{Kind: events.KindProgress, Time: time.Now(), Host: "h2", AccessID: "large/qid0000000001", To: "Processing",
		Message: "taken over from h1 (its session ended) in Processing", Attrs: map[string]any{"taken_over_from": "h1"}}
	if got := eventLine(ev); !strings.Contains(got, " h2  progress access large/qid0000000001  [taken over from h1 (its session ended) in Processing]") {
		t.Errorf("an access request's take-over reads %q; want it named as the request's progress", got)
	}
}
