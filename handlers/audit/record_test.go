package audit_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ingestq/ingestq/handlers/audit"
	"github.com/ingestq/ingestq/handlers/inventory"
)

// batching is the bench's inventory, counting how the audit records:
// versions in a RecordVersions (a transaction), or each alone. Neither
// takes version refuse.
type batching struct {
	audit.Inventory
	refuse                  int
	batches, batched, alone atomic.Int32
}

func (b *batching) RecordVersions(ctx context.Context, rs []inventory.Record) error {
	b.batches.Add(1)
	b.batched.Add(int32(len(rs)))
	for _, r := range rs {
		if r.Version == b.refuse {
			return errors.New("version refused")
		}
	}
	// Not named as inventory.VersionsRecorder, so that the test builds at
	// the code before it, to fail there.
	return b.Inventory.(interface {
		RecordVersions(context.Context, []inventory.Record) error
	}).RecordVersions(ctx, rs)
}

func (b *batching) Record(ctx context.Context, r inventory.Record) error {
	b.alone.Add(1)
	if r.Version == b.refuse {
		return errors.New("version refused")
	}
	return b.Inventory.Record(ctx, r)
}

// The fixity check events of an object's versions, and of the objects
// whose audits end meanwhile, go into the inventory in one transaction
// (one commit, not one per version); when it fails, each version is
// recorded alone: the one refused is a finding, the others' events are
// recorded.
func TestAuditRecordsVersionsInOneTransaction(t *testing.T) {
	b := localBench(t)
	b.a.Agent = "ingestq test on host1"
	const two, one = "ark:/99999/fk4a-two", "ark:/99999/fk4b-one"
	b.deposit(two, 1, object{"a.txt": "one"})
	b.deposit(two, 2, object{"a.txt": "two"})
	b.deposit(one, 1, object{"a.txt": "one"})
	counted := &batching{Inventory: b.inv}
	b.a.Inventory = counted

	got, sum := b.run(audit.Options{Fixity: true, Record: true})
	b.check("every version taken", got, nil)
	if n, v, m := counted.batches.Load(), counted.batched.Load(), counted.alone.Load(); n < 1 || n > 2 || v != 3 || m != 0 ||
		sum.EventsRecorded != 6 {
		t.Errorf("%d transactions of %d versions, %d versions alone, %d events: want the 3 versions in 1 or 2 transactions "+
			"(one per object at most), none alone, 6 events (3 versions at 2 targets)", n, v, m, sum.EventsRecorded)
	}

	counted.refuse = 2
	got, sum = b.run(audit.Options{Fixity: true, Record: true, ARKs: []string{two}})
	b.check("version 2 refused", got, []want{{audit.RecordFailed, two, -1, 2, ""}})
	if len(got) != 1 || !strings.Contains(got[0].Message, "version refused") || sum.EventsRecorded != 2 || counted.alone.Load() != 2 {
		t.Errorf("version 2 refused: %+v, %d events, %d versions alone; want the refusal, version 1's 2 events recorded, "+
			"each version alone after the transaction failed", got, sum.EventsRecorded, counted.alone.Load())
	}
	d, err := b.inv.Object(t.Context(), two)
	if err != nil {
		t.Fatal(err)
	}
	if n1, n2 := len(d.Versions[0].Events), len(d.Versions[1].Events); n1 != 4 || n2 != 2 {
		t.Errorf("%s has %d and %d events in versions 1 and 2, want 4 (two audits at 2 targets) and 2 (the first audit's)", two, n1, n2)
	}
}
