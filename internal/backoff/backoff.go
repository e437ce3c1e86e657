// Package backoff is ingestq's one exponential back-off: the wait before
// each try again of something that failed for a reason that may pass (a
// ZooKeeper outage, a step's retryable error, a lost watch), and a sleep
// that ends with its context, so that no retry loop holds up a shutdown.
// HTTP requests use go-retryablehttp's own back-off (with jitter), in
// handlers/fetch; every wait for a server that asked to be asked later
// (Retry-After) is NotBeforeAsked.
package backoff

import (
	"context"
	"time"
)

// Delay is base for the first attempt, doubled for each one after it, and
// never more than max.
func Delay(base, max time.Duration, attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	d := base << min(attempt-1, 62)
	if d > max || d <= 0 { // past max, or shifted out of range
		return max
	}
	return d
}

// NotBeforeAsked is end, a back-off's end, or, when later, the time a
// server asked to be asked again (asked, its Retry-After; zero when it did
// not say), that at most longest from now: no server is asked again
// sooner than it asked, a Retry-After of 0 is no reason to ask sooner than
// the back-off, and an hour asked for is waited no longer than longest.
func NotBeforeAsked(end, asked, now time.Time, longest time.Duration) time.Time {
	if asked.IsZero() {
		return end
	}
	if limit := now.Add(longest); asked.After(limit) {
		asked = limit
	}
	if asked.After(end) {
		return asked
	}
	return end
}

// Sleep waits d or until ctx ends; it reports false when ctx ended first.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
