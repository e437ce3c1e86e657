package inventory

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// runConformance runs the behaviour every Inventory shares against the
// ones open makes (a fresh, empty inventory per call).
func runConformance(t *testing.T, open func(t *testing.T) Inventory) {
	for _, c := range []struct {
		name string
		test func(*testing.T, Inventory)
	}{
		{"RecordAndObject", testRecordAndObject},
		{"RecordAgainIsIdempotent", testRecordAgainIsIdempotent},
		{"ReplicasAndEventsAreAdded", testReplicasAndEventsAreAdded},
		{"DifferentContentForSameVersion", testDifferentContent},
		{"LocalIDLookupAndConflict", testLookupAndConflict},
		{"TwoVersionsOfOneObject", testTwoVersions},
		{"BadInput", testBadInput},
		{"ConcurrentRecords", testConcurrentRecords},
		{"ListInPages", testListInPages},
		{"RecordAll", testRecordAll},
	} {
		t.Run(c.name, func(t *testing.T) { c.test(t, open(t)) })
	}
}

func testRecordAndObject(t *testing.T, inv Inventory) {
	ctx := context.Background()
	r := record(arkA, 1, "one", "loc-2", "loc-1", "loc-2")
	r.Replicas = []Replica{replica("secondary", 3), replica("primary", 2)}
	r.Events = []Event{event(EventFixityCheck, 2), event(EventIngestion, 1)}
	r.Events[0].File = "producer/a.txt"
	r.Events[1].ID = strings.ToUpper(r.Events[1].ID)
	mustRecord(t, inv, r)

	want := ObjectDetail{
		Object: ObjectRow{ARK: arkA, Profile: profile, LocalIDs: []string{"loc-1", "loc-2"}, LatestVersion: 1,
			Who: "Someone", What: "Thing one", When: "2025", Where: arkA},
		Versions: []Record{mustNormalize(t, r)},
	}
	got := mustObject(t, inv, arkA)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Object =\n %+v\nwant\n %+v", got, want)
	}
	v := got.Versions[0]
	if v.Files[0].Name != "producer/a.txt" || v.Replicas[0].Target != "primary" || v.Events[0].Type != EventIngestion {
		t.Fatalf("files, replicas or events are not in order: %+v", v)
	}
	if v.Events[0].ID != strings.ToLower(r.Events[1].ID) || v.Events[0].At.Nanosecond() != 123_456_000 || v.Events[0].At.Location() != time.UTC {
		t.Fatalf("event not canonical (lower-case id, UTC to the microsecond): %+v", v.Events[0])
	}
	byID, err := ObjectByLocalID(ctx, inv, profile, "loc-2")
	if err != nil || !reflect.DeepEqual(byID, want) {
		t.Fatalf("ObjectByLocalID = %+v, %v; want the object", byID, err)
	}
	if _, err := inv.Object(ctx, arkB); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), arkB) {
		t.Fatalf("Object of an unknown ARK: %v, want ErrNotFound naming it", err)
	}
	if _, err := ObjectByLocalID(ctx, inv, profile, "loc-9"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `"loc-9"`) {
		t.Fatalf("ObjectByLocalID of an unknown id: %v, want ErrNotFound naming it", err)
	}
}

// Recording a version again, even from another batch, changes nothing.
func testRecordAgainIsIdempotent(t *testing.T, inv Inventory) {
	r := record(arkA, 1, "one", "loc-1")
	mustRecord(t, inv, r)
	mustRecord(t, inv, r)
	again := r
	again.Batch, again.Job, again.Created = "bid-2", "jid-2", r.Created.Add(time.Hour)
	again.LocalIDs = []string{"loc-1", "loc-1"}
	again.What = "Another title"
	mustRecord(t, inv, again)

	d := mustObject(t, inv, arkA)
	if len(d.Versions) != 1 || !reflect.DeepEqual(d.Versions[0], mustNormalize(t, r)) || d.Object.What != r.What {
		t.Fatalf("a repeat record changed the first: %+v", d)
	}
}

// Replicas are added by target and events by id; what was recorded first
// stays.
func testReplicasAndEventsAreAdded(t *testing.T, inv Inventory) {
	r := record(arkA, 1, "one", "loc-1")
	primary, ingest := replica("primary", 1), event(EventIngestion, 1)
	r.Replicas, r.Events = []Replica{primary}, []Event{ingest}
	mustRecord(t, inv, r)

	again := r
	again.Batch, again.Job = "bid-2", "jid-2"
	movedPrimary, changedIngest := replica("primary", 9), ingest
	movedPrimary.URL, changedIngest.Detail = "s3://elsewhere/a", "another detail"
	secondary, copied := replica("secondary", 5), event(EventReplication, 5)
	again.Replicas = []Replica{movedPrimary, secondary}
	again.Events = []Event{copied, changedIngest}
	mustRecord(t, inv, again)

	want := mustNormalize(t, r)
	want.Replicas = append(want.Replicas, mustNormalize(t, Record{ARK: arkA, Profile: profile, Version: 1,
		Replicas: []Replica{secondary}}).Replicas...)
	want.Events = append(want.Events, mustNormalize(t, Record{ARK: arkA, Profile: profile, Version: 1,
		Events: []Event{copied}}).Events...)
	got := mustObject(t, inv, arkA).Versions
	if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Fatalf("after adding:\n %+v\nwant\n %+v", got, want)
	}

	// A record of other content adds nothing, not even its new replicas.
	other := record(arkA, 1, "other", "loc-1")
	other.Replicas = []Replica{replica("tertiary", 7)}
	if err := inv.Record(context.Background(), other); !errors.Is(err, ErrMismatch) {
		t.Fatalf("other content with a new replica: %v, want ErrMismatch", err)
	}
	if got := mustObject(t, inv, arkA).Versions; !reflect.DeepEqual(got[0], want) {
		t.Fatalf("a mismatching record changed the version: %+v", got[0])
	}
}

func testDifferentContent(t *testing.T, inv Inventory) {
	ctx := context.Background()
	mustRecord(t, inv, record(arkA, 1, "one"))
	other := record(arkA, 1, "other")
	other.Batch = "bid-9"
	err := inv.Record(ctx, other)
	if !errors.Is(err, ErrMismatch) || !Refused(err) || errors.Is(err, ErrConflict) {
		t.Fatalf("different content for version 1: %v, want ErrMismatch, a refusal", err)
	}
	for _, want := range []string{arkA, `"bid-1"`, `"jid-one"`, `"bid-9"`, `"jid-other"`, "files (2 vs 2)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if vs := mustObject(t, inv, arkA).Versions; len(vs) != 1 || vs[0].Job != "jid-one" {
		t.Fatalf("the first record changed: %+v", vs)
	}
	moved := record(arkA, 2, "two")
	moved.Profile = "other_profile"
	err = inv.Record(ctx, moved)
	if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), `is in profile "demo_content", not "other_profile"`) {
		t.Fatalf("a version in another profile: %v, want ErrMismatch naming both", err)
	}
}

func testLookupAndConflict(t *testing.T, inv Inventory) {
	ctx := context.Background()
	odd := "a b/c?d%2F#é"
	mustRecord(t, inv, record(arkA, 1, "one", "loc-1", odd))
	for _, id := range []string{"loc-1", odd} {
		if ark, ok, err := inv.LookupLocalID(ctx, profile, id); err != nil || !ok || ark != arkA {
			t.Fatalf("lookup %q = %q, %v, %v; want %s", id, ark, ok, err, arkA)
		}
	}
	for _, q := range [][2]string{{profile, "loc-9"}, {"other_profile", "loc-1"}, {profile, "a b"}} {
		if ark, ok, err := inv.LookupLocalID(ctx, q[0], q[1]); err != nil || ok || ark != "" {
			t.Fatalf("lookup %q = %q, %v, %v; want none", q, ark, ok, err)
		}
	}

	err := inv.Record(ctx, record(arkB, 1, "bee", "loc-new", "loc-1"))
	if !errors.Is(err, ErrConflict) || Refused(err) {
		t.Fatalf("a taken local id: %v, want ErrConflict", err)
	}
	if want := fmt.Sprintf(`local id "loc-1" in profile %q maps to %s, not %s`, profile, arkA, arkB); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	// The failed record left nothing behind: not its object, not its other id.
	if _, err := inv.Object(ctx, arkB); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a conflicting record left its object: %v", err)
	}
	if _, ok, _ := inv.LookupLocalID(ctx, profile, "loc-new"); ok {
		t.Fatal("a conflicting record wrote one of its local ids")
	}
	// The same local id in another profile is another id.
	elsewhere := record(arkB, 1, "bee", "loc-1")
	elsewhere.Profile = "other_profile"
	mustRecord(t, inv, elsewhere)
	if ark, ok, _ := inv.LookupLocalID(ctx, "other_profile", "loc-1"); !ok || ark != arkB {
		t.Fatalf("lookup in the other profile = %q, %v; want %s", ark, ok, arkB)
	}
}

func testTwoVersions(t *testing.T, inv Inventory) {
	mustRecord(t, inv, record(arkA, 2, "two", "loc-2"))
	mustRecord(t, inv, record(arkA, 1, "one", "loc-1")) // late, after a crash: must not win
	d := mustObject(t, inv, arkA)
	if len(d.Versions) != 2 || d.Versions[0].Version != 1 || d.Versions[1].Version != 2 {
		t.Fatalf("versions = %+v; want 1 then 2", d.Versions)
	}
	if o := d.Object; o.LatestVersion != 2 || o.What != "Thing two" || !slices.Equal(o.LocalIDs, []string{"loc-1", "loc-2"}) {
		t.Fatalf("object row = %+v; want latest 2 with both local ids", o)
	}
	if r, err := inv.Latest(context.Background(), arkA); err != nil || !reflect.DeepEqual(r, d.Versions[1]) {
		t.Fatalf("Latest = %+v, %v; want version 2 as Object gives it: %+v", r, err, d.Versions[1])
	}
	three := record(arkA, 3, "three")
	three.Replicas = []Replica{replica("primary", 1)}
	mustRecord(t, inv, three)
	d = mustObject(t, inv, arkA)
	if o := d.Object; o.LatestVersion != 3 || o.What != "Thing three" {
		t.Fatalf("object row after v3 = %+v", o)
	}
	if r, err := inv.Latest(context.Background(), arkA); err != nil || !reflect.DeepEqual(r, d.Versions[2]) || len(r.Replicas) != 1 {
		t.Fatalf("Latest = %+v, %v; want version 3 with its copy, as Object gives it: %+v", r, err, d.Versions[2])
	}
	if _, err := inv.Latest(context.Background(), arkB); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), arkB) {
		t.Fatalf("Latest of an unknown ARK: %v, want ErrNotFound naming it", err)
	}
}

// badRecords are records no inventory takes, with what the error says.
func badRecords() map[string]struct {
	r    Record
	want string
} {
	edit := func(f func(*Record)) Record { r := record(arkA, 1, "one"); f(&r); return r }
	return map[string]struct {
		r    Record
		want string
	}{
		"empty ARK":        {record("", 1, "one"), "ARK is empty"},
		"version 0":        {record(arkA, 0, "one"), "version is not in 1..99999999"},
		"NUL in local id":  {record(arkA, 1, "one", "a\x00b"), `local id "a\x00b" is empty, or has a NUL`},
		"bad UTF-8 in who": {edit(func(r *Record) { r.Who = "\xff" }), "batch, job or ERC has a NUL or bad UTF-8"},
		"duplicate file":   {edit(func(r *Record) { r.Files = append(r.Files, r.Files[0]) }), `file "system/mrt-erc.txt" listed twice`},
		"bad digest":       {edit(func(r *Record) { r.Files[0].SHA256 = "ABC" }), `sha256 "ABC" is not 64 lower-case hex digits`},
		"no profile":       {edit(func(r *Record) { r.Profile = "" }), `profile "" is empty`},
		"unverified copy":  {edit(func(r *Record) { r.Replicas = []Replica{{Target: "t", URL: "u"}} }), `replica "t" has no verified time`},
		"copy twice": {edit(func(r *Record) { r.Replicas = []Replica{replica("t", 1), replica("t", 2)} }),
			`replica target "t" listed twice`},
		"event id":   {edit(func(r *Record) { r.Events = []Event{{ID: "e1"}} }), `event id "e1" is not a UUID`},
		"event type": {edit(func(r *Record) { r.Events = []Event{event("virus check", 1)} }), `type "virus check" is not one of`},
		"event outcome": {edit(func(r *Record) { r.Events = []Event{event(EventFixityCheck, 1)}; r.Events[0].Outcome = "ok" }),
			`outcome "ok" is not "success" or "failure"`},
		"event agent": {edit(func(r *Record) { r.Events = []Event{event(EventFixityCheck, 1)}; r.Events[0].Agent = "" }),
			"agent is empty"},
	}
}

func testBadInput(t *testing.T, inv Inventory) {
	ctx := context.Background()
	for name, c := range badRecords() {
		err := inv.Record(ctx, c.r)
		if !errors.Is(err, ErrInvalid) || !Refused(err) || !strings.Contains(err.Error(), c.want) ||
			!strings.HasPrefix(err.Error(), "inventory: invalid record of") {
			t.Errorf("%s: %v, want an invalid record saying %q", name, err, c.want)
		}
	}
	if _, err := inv.Object(ctx, arkA); !errors.Is(err, ErrNotFound) {
		t.Fatalf("rejected records wrote an object: %v", err)
	}
	for _, q := range [][2]string{{profile, "a\x00b"}, {"", "x"}, {profile, "\xff"}} {
		if _, _, err := inv.LookupLocalID(ctx, q[0], q[1]); !errors.Is(err, ErrInvalid) {
			t.Errorf("lookup %q: %v, want ErrInvalid", q, err)
		}
	}
	for _, ark := range []string{"", "ark:/\x00", "\xff"} {
		if _, err := inv.Object(ctx, ark); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "empty, or has a NUL") {
			t.Errorf("Object(%q): %v, want ErrInvalid", ark, err)
		}
	}
}

// Goroutines record versions of a few objects, each object's versions
// claiming one contested local id that goroutines of other objects claim
// too: exactly one object gets it, every version of that object is
// recorded once, the others are conflicts.
func testConcurrentRecords(t *testing.T, inv Inventory) {
	ctx := context.Background()
	const objects, versions = 6, 3
	ark := func(i int) string { return fmt.Sprintf("ark:/99999/fk4c%03d", i) }
	var wg sync.WaitGroup
	errs := make([][]error, objects)
	for i := range objects {
		errs[i] = make([]error, versions)
		for v := 1; v <= versions; v++ {
			wg.Go(func() {
				r := record(ark(i), v, fmt.Sprintf("%d-%d", i, v), "contested", "own-"+ark(i))
				errs[i][v-1] = inv.Record(ctx, r)
			})
		}
	}
	wg.Wait()
	winner, ok, err := inv.LookupLocalID(ctx, profile, "contested")
	if err != nil || !ok {
		t.Fatalf("nobody got the contested id: %v", err)
	}
	for i := range objects {
		for v, err := range errs[i] {
			if wins := ark(i) == winner; wins && err != nil || !wins && !errors.Is(err, ErrConflict) {
				t.Errorf("%s v%d (winner %s): %v", ark(i), v+1, winner, err)
			}
		}
		d, err := inv.Object(ctx, ark(i))
		if ark(i) == winner && (err != nil || len(d.Versions) != versions || d.Object.LatestVersion != versions) {
			t.Errorf("winner %s: %d versions, latest %d, %v; want %d", winner, len(d.Versions), d.Object.LatestVersion, err, versions)
		}
		if ark(i) != winner && !errors.Is(err, ErrNotFound) {
			t.Errorf("loser %s was recorded: %+v, %v", ark(i), d, err)
		}
	}
}

// List walks every object in bytewise ARK order, a page at a time, though
// a locale's order differs (en-US: "_" before "a" before "A" before "Z");
// an object of two versions is one row, with the latest's ERC. An ARK
// with &, +, %2F, # and ? is an after a client must escape.
func testListInPages(t *testing.T, inv Inventory) {
	ctx := context.Background()
	const odd = "ark:/99999/fk4+&b=%2F#?"
	bytewise := []string{odd, "ark:/99999/fk4A", "ark:/99999/fk4Z", "ark:/99999/fk4_", "ark:/99999/fk4a"}
	for _, i := range []int{4, 3, 0, 2, 1} {
		mustRecord(t, inv, record(bytewise[i], 1, bytewise[i], "loc-"+bytewise[i]))
	}
	mustRecord(t, inv, record(bytewise[4], 2, "a two", "loc-a2"))
	var want []ObjectRow
	for _, ark := range bytewise {
		want = append(want, mustObject(t, inv, ark).Object)
	}
	if o := want[4]; o.LatestVersion != 2 || o.What != "Thing a two" || !slices.Equal(o.LocalIDs, []string{"loc-a2", "loc-" + o.ARK}) {
		t.Fatalf("object of two versions = %+v; want latest 2 with both local ids", o)
	}

	var walked []ObjectRow
	for row, err := range Objects(ctx, inv, 2) {
		if err != nil || len(walked) == len(want) {
			t.Fatalf("a walk in pages of 2 after %d objects: %v", len(walked), err)
		}
		walked = append(walked, row)
	}
	if !reflect.DeepEqual(walked, want) {
		var arks []string
		for _, o := range walked {
			arks = append(arks, o.ARK)
		}
		t.Fatalf("a walk in pages of 2 gave %q; want, bytewise, %q\n %+v\nwant\n %+v", arks, bytewise, walked, want)
	}

	var rest []ObjectRow // a walk taken up after the second object
	for row, err := range ObjectsAfter(ctx, inv, want[1].ARK, 2) {
		if err != nil || len(rest) == len(want) {
			t.Fatalf("a walk after %s after %d objects: %v", want[1].ARK, len(rest), err)
		}
		rest = append(rest, row)
	}
	if !reflect.DeepEqual(rest, want[2:]) {
		t.Errorf("a walk after %s gave %+v; want %+v", want[1].ARK, rest, want[2:])
	}

	for _, c := range []struct {
		after string
		limit int
		want  []ObjectRow
	}{
		{"", 2, want[:2]}, // the pages of the walk
		{want[1].ARK, 2, want[2:4]},
		{want[3].ARK, 2, want[4:]},
		{want[4].ARK, 2, nil},
		{"", 10, want},
		{odd, 1, want[1:2]},
		{"ark:/99999/fk4B", 1, want[2:3]}, // not recorded: the page starts after it
		{"ark:/99999/fk4", 2, want[:2]},
	} {
		page, err := inv.List(ctx, c.after, c.limit)
		if err != nil || len(page) != len(c.want) || len(page) > 0 && !reflect.DeepEqual(page, c.want) {
			t.Errorf("List(%q, %d) = %+v, %v; want %+v", c.after, c.limit, page, err, c.want)
		}
	}
	for _, c := range []struct {
		after string
		limit int
		want  string
	}{
		{"", 0, "limit 0 is below 1"},
		{odd, -1, "limit -1 is below 1"},
		{"ark:/\x00", 1, "has a NUL or bad UTF-8"},
		{"\xff", 1, "has a NUL or bad UTF-8"},
	} {
		if _, err := inv.List(ctx, c.after, c.limit); !errors.Is(err, ErrInvalid) || !Refused(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("List(%q, %d): %v; want ErrInvalid saying %q", c.after, c.limit, err, c.want)
		}
	}
	var yielded []error
	for _, err := range Objects(ctx, inv, 0) {
		yielded = append(yielded, err)
	}
	if len(yielded) != 1 || !errors.Is(yielded[0], ErrInvalid) {
		t.Errorf("a walk in pages of 0 yielded %v; want one ErrInvalid", yielded)
	}
}
