package events

import (
	"context"
	"slices"
	"testing"
	"time"
)

// Recorded finds an event by its ID on its subject, and a copy of an event
// published again (a recovered move whose maker's own publish lands too)
// is stored once.
func TestRecordedAndDuplicates(t *testing.T) {
	t.Parallel()
	bus, _ := openBus(t, Config{})
	ctx := t.Context()
	first := Event{ID: "jid1.downloading.1.0", Kind: KindJob, BatchID: "bid1", JobID: "jid1", To: "Downloading"}
	again := Event{ID: "jid1.downloading.2.0", Kind: KindJob, BatchID: "bid1", JobID: "jid1", To: "Downloading"}
	if ok, err := bus.Recorded(ctx, first); ok || err != nil {
		t.Fatalf("Recorded before any publish = %v, %v; want false, nil", ok, err)
	}
	bus.Publish(first)
	flush(t, bus)
	if ok, err := bus.Recorded(ctx, first); !ok || err != nil {
		t.Fatalf("Recorded after the publish = %v, %v; want true, nil", ok, err)
	}
	if ok, _ := bus.Recorded(ctx, again); ok {
		t.Fatalf("Recorded(%s) = true: only %s is in the stream", again.ID, first.ID)
	}

	recovered := first
	recovered.RecoveredBy, recovered.Message = "host-b", "recovered"
	bus.Publish(recovered)
	bus.Publish(again)
	flush(t, bus)
	var ids []string
	err := Replay(context.Background(), bus.Conn(), "", Filter{BatchID: "bid1"}, func(e Event) error {
		ids = append(ids, e.ID)
		if e.ID == first.ID && (e.RecoveredBy != "" || e.Host != "test-host") {
			t.Errorf("the first copy was replaced: %+v", e)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 || ids[0] != first.ID || ids[1] != again.ID {
		t.Fatalf("stream holds %v, want [%s %s]", ids, first.ID, again.ID)
	}
}

// Timeline orders a batch's events as they happened: each job's own in
// order, a recovered event (recorded late) where its move was, and the
// jobs' and the batch's merged by time; events of one time in stream order.
func TestTimeline(t *testing.T) {
	t.Parallel()
	at := func(s int) time.Time { return time.Date(2026, 11, 23, 10, 0, s, 0, time.UTC) }
	ev := func(job, from, to string, s int, rec string) Event {
		kind := KindJob
		if job == "" {
			kind = KindBatch
		}
		return Event{ID: job + "." + to, Kind: kind, BatchID: "bid1", JobID: job, From: from, To: to, Time: at(s), RecoveredBy: rec}
	}
	stream := []Event{ // as a replay reads them: the batch's first, then the jobs'
		ev("", "", "Pending", 0, ""),
		ev("", "Pending", "Processing", 1, ""),
		ev("", "Processing", "Reporting", 9, ""),
		ev("", "Reporting", "Failed", 10, ""),
		ev("jid1", "Estimating", "Provisioning", 2, ""),
		ev("jid1", "Downloading", "Processing", 4, ""),
		ev("jid1", "Processing", "Failed", 8, ""),
		ev("jid2", "Pending", "Estimating", 2, ""),
		ev("jid2", "Estimating", "Failed", 5, ""),
		ev("jid1", "Provisioning", "Downloading", 3, "host-b"), // found late
	}
	var got []string
	for _, e := range Timeline(stream) {
		got = append(got, e.JobID+":"+e.To)
	}
	want := []string{":Pending", ":Processing", "jid1:Provisioning", "jid2:Estimating", "jid1:Downloading",
		"jid1:Processing", "jid2:Failed", "jid1:Failed", ":Reporting", ":Failed"}
	if !slices.Equal(got, want) {
		t.Fatalf("timeline\n%v, want\n%v", got, want)
	}

	// One job alone: its order, the recovered one placed, even when its
	// time (last_modified's, to the second) is before the move before it.
	one := []Event{ev("jid3", "Pending", "Estimating", 7, ""), ev("jid3", "Provisioning", "Downloading", 8, ""),
		ev("jid3", "", "Provisioning", 6, "host-b")}
	one[0].Time = at(7).Add(500 * time.Millisecond)
	got = nil
	for _, e := range Timeline(one) {
		got = append(got, e.To)
	}
	if want := []string{"Estimating", "Provisioning", "Downloading"}; !slices.Equal(got, want) {
		t.Fatalf("one job's timeline %v, want %v", got, want)
	}
}
