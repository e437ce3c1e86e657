package cli

import (
	"testing"
	"time"
)

// A host that last wrote its node more than its rewrite period and a
// margin (20 s) ago is shown late: dead or cut off, its session not ended
// yet. It took 30 s, more than a default session (10 s) and a rewrite: a
// killed host went from the list before it was shown late.
func TestSeenSaysLate(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		at   time.Time
		want string
	}{
		{now.Add(-3 * time.Second), "3s ago"},
		{now.Add(-17 * time.Second), "17s ago"}, // a live host's rewrite (every 15 s) just due
		{now.Add(-21 * time.Second), "21s ago (late: dead or cut off?)"},
		{now.Add(-31 * time.Second), "31s ago (late: dead or cut off?)"},
		{now.Add(time.Second), "0s ago"}, // another host's clock ahead
		{time.Time{}, "-"},
	} {
		if got := seen(c.at, now); got != c.want {
			t.Errorf("seen(%v ago) = %q, want %q", now.Sub(c.at), got, c.want)
		}
	}
}
