package audit_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/handlers/audit"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/storage"
)

// An unrecorded object whose version 2 cannot be recorded from storage has
// version 1 repaired and one repair-failed finding for version 2: the
// versions-unrecorded of the compare after the repair does not repair it
// a second time.
func TestAuditRepairFailsAVersionOnce(t *testing.T) {
	b := newBench(t, "", t.TempDir())
	const ark = "ark:/99999/fk4lost"
	b.put(ark, object{"a.txt": "one"}, 0)
	b.put(ark, object{"a.txt": "two"}, 0)
	b.a.Agent, b.a.Profiles = "ingestq test", []string{profile}
	b.a.IngestHeld = func(context.Context) (bool, error) { return true, nil }
	b.a.FromStorage = func(_ context.Context, _ storage.Stored, v storage.Version) (inventory.Record, error) {
		if v.Number == 2 {
			return inventory.Record{}, fmt.Errorf("version 2's system file is unreadable")
		}
		return inventory.Record{Job: "jid-1", Batch: "bid-1"}, nil
	}
	var repaired []int
	var found []audit.Finding
	sum, err := b.a.Run(t.Context(), audit.Options{Repair: true}, audit.Report{
		Finding:  func(f audit.Finding) error { found = append(found, f); return nil },
		Repaired: func(r audit.Repaired) error { repaired = append(repaired, r.Version); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	var failed int
	for _, f := range found {
		if f.Kind == audit.RepairFailed {
			failed++
			if f.Version != 2 || !strings.Contains(f.Message, "system file is unreadable") {
				t.Errorf("repair-failed %s: want version 2 and why", f)
			}
		}
	}
	if len(repaired) != 1 || repaired[0] != 1 || sum.Repaired != 1 || failed != 1 {
		t.Errorf("repaired %v (summary %d), %d repair-failed findings:\n%s\nwant version 1 repaired and one repair-failed",
			repaired, sum.Repaired, failed, strings.Join(lines(found), "\n"))
	}
	d, err := b.inv.Object(t.Context(), ark)
	if err != nil || d.Object.LatestVersion != 1 {
		t.Errorf("recorded %+v, %v; want version 1 alone", d.Object, err)
	}
}

func lines(fs []audit.Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.String())
	}
	return out
}
