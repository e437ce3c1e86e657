// Package backoff is ingestq's one exponential back-off: the wait before
// each try again of something that failed for a reason that may pass (a
// ZooKeeper outage, a step's retryable error, a lost watch), and a sleep
// that ends with its context, so that no retry loop holds up a shutdown.
// HTTP requests use go-retryablehttp's own back-off (with Retry-After and
// jitter), in handlers/fetch.
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
