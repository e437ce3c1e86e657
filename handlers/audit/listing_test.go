package audit_test

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ingestq/ingestq/handlers/audit"
	"github.com/ingestq/ingestq/handlers/storage/ocfl"
	"github.com/ingestq/ingestq/handlers/storage/ocfl/ocfltest"
	"github.com/ingestq/ingestq/handlers/storage/place"
)

// countingPlace counts the listings of its whole root.
type countingPlace struct {
	place.Place
	listings *atomic.Int32
}

func (p countingPlace) Keys(ctx context.Context, prefix string) iter.Seq2[string, error] {
	if prefix == "" {
		p.listings.Add(1)
	}
	return p.Place.Keys(ctx, prefix)
}

// countListings makes the bench's primary count its listings.
func (b *bench) countListings() *atomic.Int32 {
	b.t.Helper()
	n := &atomic.Int32{}
	st, err := ocfl.New(b.t.Context(), countingPlace{Place: b.places[0], listings: n})
	if err != nil {
		b.t.Fatal(err)
	}
	b.stores[0] = st
	return n
}

// unrecordedFound are the ARKs of the object-unrecorded findings.
func unrecordedFound(fs []audit.Finding) []string {
	var out []string
	for _, f := range fs {
		if f.Kind == audit.ObjectUnrecorded {
			out = append(out, f.ARK)
		}
	}
	return out
}

// A split audit lists a target once: each part that continues the one
// before it (After its Last) takes the rest of that listing, finds the
// unrecorded objects of its own part there, and says in a note that it
// did not list again; an object gone from storage since it was listed is
// not reported. A part that continues none lists anew.
func TestASplitAuditListsEachTargetOnce(t *testing.T) {
	t.Parallel()
	b := newBench(t, "", t.TempDir())
	b.a.Profiles = []string{profile}
	arks := []string{"ark:/99999/fk4a", "ark:/99999/fk4b", "ark:/99999/fk4c", "ark:/99999/fk4d", "ark:/99999/fk4e", "ark:/99999/fk4f", "ark:/99999/fk4g"}
	lost := []string{arks[3], arks[5]} // stored, not recorded: in the second and third parts
	gone := arks[6]                    // stored, not recorded, and removed after the first part
	for _, ark := range arks {
		if slices.Contains(lost, ark) || ark == gone {
			b.put(ark, object{"a.txt": ark}, 0)
		} else {
			b.deposit(ark, 1, object{"a.txt": ark})
		}
	}
	listings := b.countListings()

	var found []string
	after := ""
	for part := 1; ; part++ {
		got, sum := b.run(audit.Options{After: after, Limit: 2})
		found = append(found, unrecordedFound(got)...)
		kept := slices.ContainsFunc(sum.Notes, func(n string) bool { return strings.Contains(n, "was not listed again") })
		if kept != (part > 1) {
			t.Errorf("part %d: notes %q; want the note of a kept listing in the parts after the first", part, sum.Notes)
		}
		if !sum.More {
			break
		}
		if part == 1 {
			b.restore(0, gone, nil)
		}
		after = sum.Last
	}
	if !slices.Equal(found, lost) || listings.Load() != 1 {
		t.Errorf("split audit: object-unrecorded %q, the target listed %d times; want %q, listed once", found, listings.Load(), lost)
	}

	// A part that continues no part (the last ended the walk) lists anew.
	got, _ := b.run(audit.Options{After: arks[2], Limit: 2})
	if found := unrecordedFound(got); !slices.Equal(found, lost[:1]) || listings.Load() != 2 {
		t.Errorf("after %s: object-unrecorded %q, listed %d times in all; want %q, listed again", arks[2], found, listings.Load(), lost[:1])
	}
}

// One object whose inventory.json does not say which object it is is an
// object-unreadable finding naming where it is; the target's other
// objects are still listed, and the unrecorded ones found.
func TestAuditListsPastAnUnreadableObject(t *testing.T) {
	t.Parallel()
	b := newBench(t, "", t.TempDir())
	b.a.Profiles = []string{profile}
	recorded, damaged := "ark:/99999/fk4a", "ark:/99999/fk4b"
	lost := []string{"ark:/99999/fk4c", "ark:/99999/fk4d"}
	b.deposit(recorded, 1, object{"a.txt": recorded})
	for _, ark := range append([]string{damaged}, lost...) {
		b.put(ark, object{"a.txt": ark}, 0)
	}
	b.write(0, damaged, "inventory.json", []byte(`{"id": "ark:/99999/fk4b", "truncat`))

	got, sum := b.run(audit.Options{})
	if found := unrecordedFound(got); !slices.Equal(found, lost) || len(sum.Notes) > 0 {
		t.Errorf("object-unrecorded %q, notes %q; want %q and no note", found, sum.Notes, lost)
	}
	// With no newer inventory to restore, the repair that records it.
	for _, f := range got {
		if repair := "`ingestq audit --repair " + f.ARK + "`"; f.Kind == audit.ObjectUnrecorded && !strings.Contains(f.Message, repair) {
			t.Errorf("%q does not say %s", f.Message, repair)
		}
	}
	var unreadable []audit.Finding
	for _, f := range got {
		if f.Kind == audit.ObjectUnreadable {
			unreadable = append(unreadable, f)
		}
	}
	root := ocfltest.ObjectRoot(damaged)
	if len(unreadable) != 1 || unreadable[0].Target != b.targets[0] || unreadable[0].ARK != "" ||
		!strings.Contains(unreadable[0].Message, "at "+root+" ") || !strings.Contains(unreadable[0].Message, root+"/inventory.json: unexpected end of JSON input") {
		t.Errorf("object-unreadable findings:\n%s\nwant one at %s naming %s/inventory.json and why", strings.Join(lines(unreadable), "\n"), b.targets[0], root)
	}
	if sum.Findings != len(got) || sum.Objects != 1 || sum.Last != lost[1] {
		t.Errorf("summary %+v; want %d findings, 1 object audited, last %s", sum, len(got), lost[1])
	}
}

// BenchmarkSplitAudit walks 1,000 objects of a local OCFL root, recorded
// in the bbolt inventory, in parts of 100 (each after the last's Last, as
// the CLI prints for going on), the root listed for unrecorded objects.
// One op is the whole walk; listings/op counts the root's listings, each
// of which reads every object's inventory.json. -short: 50 in parts of 5.
//
//	go test -run '^$' -bench SplitAudit -benchtime 3x -count 3 ./handlers/audit/
func BenchmarkSplitAudit(b *testing.B) {
	objects, part := 1000, 100
	if testing.Short() {
		objects, part = 50, 5
	}
	ab := newBench(b, "", b.TempDir())
	ab.a.Profiles = []string{profile}
	for i := range objects {
		ark := fmt.Sprintf("ark:/99999/fk4split%04d", i)
		ab.deposit(ark, 1, object{"a.txt": ark})
	}
	listings := ab.countListings()
	b.ResetTimer()
	for range b.N {
		after, audited := "", 0
		for {
			_, sum := ab.run(audit.Options{After: after, Limit: part})
			audited += sum.Objects
			if !sum.More {
				break
			}
			after = sum.Last
		}
		if audited != objects {
			b.Fatalf("a split walk audited %d objects; want %d", audited, objects)
		}
	}
	b.ReportMetric(float64(listings.Load())/float64(b.N), "listings/op")
}
