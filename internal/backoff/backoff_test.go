package backoff

import (
	"context"
	"testing"
	"time"
)

func TestDelay(t *testing.T) {
	for _, c := range []struct {
		attempt int
		want    time.Duration
	}{{0, time.Second}, {1, time.Second}, {2, 2 * time.Second}, {6, 32 * time.Second}, {7, time.Minute}, {100, time.Minute}} {
		if got := Delay(time.Second, time.Minute, c.attempt); got != c.want {
			t.Errorf("Delay(1s, 1m, %d) = %v, want %v", c.attempt, got, c.want)
		}
	}
}

func TestSleepEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) {
		t.Fatal("Sleep of an hour on an ended context reported a full sleep")
	}
	if !Sleep(context.Background(), time.Nanosecond) {
		t.Fatal("a nanosecond's Sleep reported its context ended")
	}
}

func TestNotBeforeAsked(t *testing.T) {
	now := time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)
	end := now.Add(2 * time.Second)
	for _, c := range []struct {
		name  string
		asked time.Time
		want  time.Time
	}{
		{"not asked", time.Time{}, end},
		{"asked sooner", now.Add(time.Second), end},
		{"asked later", now.Add(30 * time.Second), now.Add(30 * time.Second)},
		{"asked past the cap", now.Add(time.Hour), now.Add(time.Minute)},
	} {
		if got := NotBeforeAsked(end, c.asked, now, time.Minute); !got.Equal(c.want) {
			t.Errorf("%s: NotBeforeAsked = %v, want %v", c.name, got, c.want)
		}
	}
}
