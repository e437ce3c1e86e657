package queue

import (
	"testing"
	"time"
)

// A move's time is its last_modified made precise by the node's mtime,
// only when the mtime falls in the stamp's second: otherwise the node was
// written again since, or the clocks disagree.
func TestMovedAt(t *testing.T) {
	const stamp = "2026-11-26 23:00:05 +0100"
	second := time.Date(2026, 11, 26, 22, 0, 5, 0, time.UTC)
	for _, tt := range []struct {
		name  string
		mtime time.Time
		want  time.Time
	}{
		{"written in the stamp's second", second.Add(250 * time.Millisecond), second.Add(250 * time.Millisecond)},
		{"written at the stamp", second, second},
		{"written again later", second.Add(3 * time.Second), second},
		{"ZooKeeper's clock behind", second.Add(-20 * time.Millisecond), second},
		{"not read from ZooKeeper", time.Time{}, second},
	} {
		if got := movedAt(stamp, tt.mtime); !got.Equal(tt.want) || got.Location() != time.UTC {
			t.Errorf("%s: movedAt = %v, want %v in UTC", tt.name, got, tt.want)
		}
	}
	if got := movedAt("yesterday", second); !got.IsZero() {
		t.Errorf("a stamp that does not parse gave %v, want the zero time", got)
	}
}
