package events

import (
	"context"
	"slices"
	"testing"
	"time"
)

// A follower replays what was recorded since Since, then goes on live:
// events recorded between its subscription and its replay (delivered by
// both) come once, in order; the filter applies to both parts.
func TestFollowerReplaysThenGoesLive(t *testing.T) {
	t.Parallel()
	bus, _ := openBus(t, Config{Listen: "127.0.0.1:0"})
	cli := connect(t, bus.ClientURL())
	evs := mixedEvents(40)
	for _, e := range evs[:20] {
		bus.Publish(e)
	}
	flush(t, bus)
	f := Filter{BatchID: "bid-a", Since: time.Now().Add(-time.Hour)}
	fl, err := NewFollower(cli, f)
	if err != nil {
		t.Fatal(err)
	}
	defer fl.Close()
	for _, e := range evs[20:30] { // recorded and live: the seam
		bus.Publish(e)
	}
	flush(t, bus)

	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan Event, 100)
	done := make(chan error, 1)
	go func() { done <- fl.Run(ctx, "", func(e Event) error { got <- e; return nil }) }()
	want := messages(evs[:30], func(e Event) bool { return e.BatchID == "bid-a" })
	var seen []string
	for range want {
		seen = append(seen, receive(t, got, "a followed event").Message)
	}
	for _, e := range evs[30:] { // live only
		bus.Publish(e)
	}
	live := messages(evs[30:], func(e Event) bool { return e.BatchID == "bid-a" })
	for range live {
		seen = append(seen, receive(t, got, "a live event").Message)
	}
	want = append(want, live...)
	if !slices.Equal(seen, want) {
		t.Fatalf("followed %v,\nwant      %v", head(seen), head(want))
	}
	flush(t, bus)
	select {
	case e := <-got:
		t.Fatalf("event %s delivered twice (or unfiltered): %+v", e.Message, e)
	default:
	}
	cancel()
	if err := receive(t, done, "Run to return"); err != nil {
		t.Errorf("Run = %v, want nil on cancel", err)
	}
}
