package audit_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/handlers/audit"
	"github.com/ingestq/ingestq/handlers/inventory"
)

// own gives the bench's auditor an own inventory (bbolt) named name, of
// profiles.
func (b *bench) own(name string, profiles ...string) inventory.Handle {
	b.t.Helper()
	own, err := inventory.Open(b.t.Context(), "", filepath.Join(b.t.TempDir(), "own.db"), nil)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { _ = own.Close() })
	b.a.Own = []audit.Own{{Name: name, Inventory: own, Profiles: profiles}}
	return own
}

// A profile's own inventory is walked with the daemon's, merged by ARK:
// an object recorded only there is audited, one of another daemon's
// profile recorded there is not, an ARK in both is audited in each and
// is one object for the limit (and a recorded-twice finding), and after
// and limit take the walk up across both.
func TestAuditWalksAProfilesOwnInventory(t *testing.T) {
	t.Parallel()
	b := newBench(t, "", t.TempDir())
	own := b.own("the inventory of profile demo", profile)
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

	lost := want{audit.FileMissing, only, 0, 1, "a.txt"}
	walk := []want{lost, {audit.RecordedTwice, both, -1, 0, ""}}
	got, sum := b.run(audit.Options{})
	b.check("the whole walk", got, walk)
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
	b.check("a walk one object at a time", walked, walk)
	if after != both || objects != 4 {
		t.Errorf("a walk one object at a time ended after %s with %d objects, want %s and 4", after, objects, both)
	}
	if _, sum := b.run(audit.Options{After: daemons, Limit: 1}); sum.Last != only || !sum.More {
		t.Errorf("after %s, limit 1: %+v, want %s, more", daemons, sum, only)
	}

	got, sum = b.run(audit.Options{ARKs: []string{only, other, missing}, Fixity: true, Record: true})
	b.check("ARKs", got, []want{lost, {audit.NotRecorded, other, -1, 0, ""}, {audit.NotRecorded, missing, -1, 0, ""}})
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

// An ARK that two inventories record is a finding of its own, naming both
// and the one its profile records into, in the walk and when asked for by
// its ARK; records of two profiles under one ARK say so.
func TestAuditFindsAnARKRecordedTwice(t *testing.T) {
	t.Parallel()
	b := newBench(t, "", t.TempDir())
	const ownName = "the inventory of profiles demo, second"
	own := b.own(ownName, profile, "second")
	demoTargets := b.a.Targets
	b.a.Targets = func(ctx context.Context, name string) ([]audit.Target, error) {
		return demoTargets(ctx, profile) // both profiles store at the bench's target
	}

	const (
		moved = "ark:/99999/fk4a" // demo's, recorded in the daemon's before demo named its own
		taken = "ark:/99999/fk4b" // demo's in the daemon's, second's in the own one
	)
	v1 := b.put(moved, object{"a.txt": "one"}, 0)
	b.record(moved, profile, 1, v1)
	b.recordIn(own, moved, profile, 1, v1)
	b.recordIn(own, moved, profile, 2, b.put(moved, object{"a.txt": "two"}, 0))
	files := b.put(taken, object{"a.txt": "x"}, 0)
	b.record(taken, profile, 1, files)
	b.recordIn(own, taken, "second", 1, files)

	// The daemon's record of moved, behind, finds version 2 unrecorded.
	movedFound := []want{{audit.RecordedTwice, moved, -1, 0, ""}, {audit.VersionsUnrecorded, moved, 0, 2, ""}}
	got, sum := b.run(audit.Options{})
	b.check("the walk", got, append(movedFound, want{audit.RecordedTwice, taken, -1, 0, ""}))
	if sum.Objects != 4 || sum.Findings != 3 {
		t.Errorf("the walk: %+v, want 4 objects (each ARK audited from each inventory), 3 findings", sum)
	}
	says := []string{
		moved + ` is recorded in the inventory (profile "demo", version 1) and in ` + ownName + ` (profile "demo", versions 1 to 2)`,
		`profile "demo" records each new version into ` + ownName + ` alone`,
		"ingestq object " + moved + " --inventory URL",
	}
	for _, s := range says {
		if len(got) == 3 && !strings.Contains(got[0].Message, s) {
			t.Errorf("the walk: %q does not say %q", got[0].Message, s)
		}
	}
	if len(got) == 3 && !strings.Contains(got[2].Message, "the records name different profiles") {
		t.Errorf("the walk: %q does not say the records name different profiles", got[2].Message)
	}

	got, _ = b.run(audit.Options{ARKs: []string{moved}})
	b.check("by ARK", got, movedFound)
}
