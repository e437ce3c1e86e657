package events

import (
	"context"
	"testing"
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
