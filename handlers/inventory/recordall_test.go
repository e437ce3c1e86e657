package inventory

import (
	"context"
	"errors"
	"testing"
)

// RecordAll records several versions: in one transaction where the
// inventory has them (VersionsRecorder: bbolt, PostgreSQL), so a record
// refused among them leaves every one unrecorded; else each in turn up to
// the refused one. Recorded again, with events, they gain the events.
func testRecordAll(t *testing.T, inv Inventory) {
	ctx := context.Background()
	mustRecord(t, inv, record(arkA, 1, "one"))
	err := RecordAll(ctx, inv, []Record{record(arkA, 2, "two"), record(arkA, 1, "other")})
	if !errors.Is(err, ErrMismatch) {
		t.Fatalf("a batch with other content for version 1: %v, want ErrMismatch", err)
	}
	_, oneTransaction := inv.(VersionsRecorder)
	want := 2 // version 2 recorded before the refusal
	if oneTransaction {
		want = 1
	}
	if got := len(mustObject(t, inv, arkA).Versions); got != want {
		t.Fatalf("after a refused batch (one transaction: %v): %d versions, want %d", oneTransaction, got, want)
	}

	checked := []Record{record(arkA, 1, "one"), record(arkA, 2, "two")}
	for i := range checked {
		checked[i].Events = []Event{event(EventFixityCheck, 10+i)}
	}
	if err := RecordAll(ctx, inv, checked); err != nil {
		t.Fatal(err)
	}
	d := mustObject(t, inv, arkA)
	if len(d.Versions) != 2 || len(d.Versions[0].Events) != 1 || len(d.Versions[1].Events) != 1 ||
		d.Versions[1].Events[0].ID != checked[1].Events[0].ID {
		t.Errorf("after a batch of both versions with an event each: %+v", d.Versions)
	}
}
