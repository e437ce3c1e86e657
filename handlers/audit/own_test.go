package audit_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/handlers/audit"
	"github.com/ingestq/ingestq/handlers/inventory"
)

// A profile's own inventory is walked with the daemon's, merged by ARK:
// an object recorded only there is audited, one of another daemon's
// profile recorded there is not, an ARK in both is audited in each and
// is one object for the limit, and after and limit take the walk up
// across both.
func TestAuditWalksAProfilesOwnInventory(t *testing.T) {
	t.Parallel()
	b := newBench(t, "", t.TempDir())
	own, err := inventory.Open(t.Context(), "", filepath.Join(t.TempDir(), "own.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = own.Close() })
	b.a.Own = []audit.Own{{Name: "the inventory of profile demo", Inventory: own, Profiles: []string{profile}}}
	b.a.Agent = "ingestq test on host1"

	const (
		daemons = "ark:/99999/fk4a"  // in the daemon's inventory
		only    = "ark:/99999/fk4b"  // only in the profile's own, its file lost
		both    = "ark:/99999/fk4c"  // in both
		other   = "ark:/99999/fk4d"  // in the profile's own, of another daemon's profile
		missing = "ark:/99999/fk4zz" // in neither
	)
	b.deposit(daemons, 1, object{"a.txt": daemons})
	b.recordIn(own, only, profile, 1, b.put(only, object{"a.txt": only}, 0))
	if err := b.places[0].Delete(t.Context(), key(only, "v1/content/a.txt")); err != nil {
		t.Fatal(err)
	}
	files := b.put(both, object{"a.txt": both}, 0)
	b.record(both, profile, 1, files)
	b.recordIn(own, both, profile, 1, files)
	b.recordIn(own, other, "elsewhere", 1, b.put(other, object{"a.txt": other}))

	lost := []want{{audit.FileMissing, only, 0, 1, "a.txt"}}
	got, sum := b.run(audit.Options{})
	b.check("the whole walk", got, lost)
	if sum.Objects != 4 || sum.Last != both || sum.More {
		t.Errorf("the whole walk: %+v, want 4 objects (%s in each inventory), last %s, no more", sum, both, both)
	}

	var walked []audit.Finding
	after, objects := "", 0
	for range 4 {
		got, sum := b.run(audit.Options{After: after, Limit: 1})
		walked, after, objects = append(walked, got...), sum.Last, objects+sum.Objects
		if !sum.More {
			break
		}
	}
	b.check("a walk one object at a time", walked, lost)
	if after != both || objects != 4 {
		t.Errorf("a walk one object at a time ended after %s with %d objects, want %s and 4", after, objects, both)
	}
	if _, sum := b.run(audit.Options{After: daemons, Limit: 1}); sum.Last != only || !sum.More {
		t.Errorf("after %s, limit 1: %+v, want %s, more", daemons, sum, only)
	}

	got, sum = b.run(audit.Options{ARKs: []string{only, other, missing}, Fixity: true, Record: true})
	b.check("ARKs", got, []want{lost[0], {audit.NotRecorded, other, -1, 0, ""}, {audit.NotRecorded, missing, -1, 0, ""}})
	if sum.Objects != 1 || sum.NotRecorded != 2 || sum.EventsRecorded != 1 {
		t.Errorf("ARKs: %+v, want 1 object, 2 not recorded, 1 event", sum)
	}
	d, err := own.Object(t.Context(), only)
	if err != nil || len(d.Versions) != 1 || len(d.Versions[0].Events) == 0 ||
		d.Versions[0].Events[len(d.Versions[0].Events)-1].Outcome != inventory.OutcomeFailure {
		t.Errorf("%s in the profile's own inventory: %+v (%v), want the audit's failed fixity check recorded there", only, d, err)
	}

	// A profile's own inventory that cannot list ends the walk, named.
	b.a.Own[0].Inventory = failingList{own}
	sum, err = b.a.Run(t.Context(), audit.Options{}, audit.Report{})
	if err == nil || !strings.Contains(err.Error(), "listing the objects of the inventory of profile demo after "+both) ||
		!strings.Contains(err.Error(), "after="+both) || sum.Objects != 4 {
		t.Errorf("audit: %v, %+v: want the profile's inventory named, the 4 objects listed before audited, and after=%s", err, sum, both)
	}
}
