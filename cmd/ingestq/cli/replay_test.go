package cli

import (
	"slices"
	"testing"
	"time"

	"github.com/ingestq/ingestq/events"
)

// A recovered event, recorded after the job's later moves, is printed
// where the move it stands for happened: before the move out of its state.
func TestReplayPlacesRecoveredEvents(t *testing.T) {
	at := func(s int) time.Time { return time.Date(2026, 11, 23, 10, 0, s, 0, time.UTC) }
	ev := func(from, to string, s int, rec string) events.Event {
		return events.Event{Kind: events.KindJob, BatchID: "bid1", JobID: "jid1", From: from, To: to, Time: at(s), RecoveredBy: rec}
	}
	groups := replayGroups([]events.Event{
		ev("Estimating", "Provisioning", 1, ""),
		ev("Downloading", "Processing", 3, ""),
		ev("Processing", "Storing", 4, ""),
		ev("Provisioning", "Downloading", 2, "host-b"), // found late
	}, true)
	var got []string
	for _, e := range groups[0] {
		got = append(got, e.To)
	}
	if want := []string{"Provisioning", "Downloading", "Processing", "Storing"}; !slices.Equal(got, want) {
		t.Fatalf("timeline %v, want %v", got, want)
	}
}
