package handlers

import (
	"strings"
	"testing"
)

// A waiting job's message names first the limit that holds it back, with
// its setting, within the 48 characters `ingestq ls` shows of it: on a disk
// past --max-fill with plenty free, the fill; short of bytes, the margin.
// RoomLimit reads that limit back; any other message names none.
func TestWaitingForRoomNamesTheLimitFirst(t *testing.T) {
	for _, c := range []struct {
		name              string
		free              uint64
		fill              float64
		first, whole, not string
		limit             string
	}{
		{"past --max-fill", 50_000 << 20, 0.99, "waiting for room: 99% full, --max-fill 80%",
			"(with the job; 50000 MiB free, needs 3 MiB + 64 MiB margin)", "--space-margin", "--max-fill"},
		// Whole percents would show the fill at the limit it passed.
		{"just past --max-fill", 50_000 << 20, 0.803, "waiting for room: over 80% full, --max-fill 80%",
			"(with the job; 50000 MiB free, needs 3 MiB + 64 MiB margin)", "--space-margin", "--max-fill"},
		{"short of the margin", 20 << 20, 0.995, "waiting for room: 20 MiB free, needs 3 MiB + 64",
			"(--space-margin; 100% full, --max-fill 80% with the job)", "", "--space-margin"},
	} {
		msg := waitingForRoom(3<<20, 64<<20, c.free, c.fill, 0.8)
		if shown := string([]rune(msg)[:48]); !strings.HasPrefix(shown, c.first) {
			t.Errorf("%s: `ingestq ls` shows %q, want it to start %q", c.name, shown, c.first)
		}
		if !strings.HasSuffix(msg, c.whole) || c.not != "" && strings.Contains(msg, c.not) {
			t.Errorf("%s: %q, want it to end %q (and not name %q)", c.name, msg, c.whole, c.not)
		}
		if got := RoomLimit(msg); got != c.limit {
			t.Errorf("%s: RoomLimit(%q) = %q, want %q", c.name, msg, got, c.limit)
		}
	}
	for _, other := range []string{"", "waiting for a back end: the working storage /w: no space left on device"} {
		if got := RoomLimit(other); got != "" {
			t.Errorf("RoomLimit(%q) = %q, want none", other, got)
		}
	}
}
