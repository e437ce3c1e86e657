package inventory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	arkA    = "ark:/99999/fk4aaaaaaa"
	arkB    = "ark:/99999/fk4bbbbbbb"
	profile = "demo_content"
)

func digest(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:])
}

// record returns a version of ark whose files depend on content.
func record(ark string, version int, content string, localIDs ...string) Record {
	return Record{
		ARK: ark, Profile: profile, LocalIDs: localIDs, Version: version,
		Created: time.Date(2025, 3, 1, 12, 0, version, 0, time.UTC),
		Files: []FileRow{
			{Name: "system/mrt-erc.txt", Size: 20, SHA256: digest("erc" + content)},
			{Name: "producer/a.txt", Size: int64(len(content)), SHA256: digest(content)},
		},
		Batch: "bid-1", Job: "jid-" + content,
		Who: "Someone", What: "Thing " + content, When: "2025", Where: ark,
	}
}

func openTemp(t *testing.T) (*Local, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "inventory.db")
	l, err := OpenLocal(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, path
}

func mustRecord(t *testing.T, inv Inventory, r Record) {
	t.Helper()
	if err := inv.Record(context.Background(), r); err != nil {
		t.Fatal(err)
	}
}

func TestRecordAndRead(t *testing.T) {
	ctx := context.Background()
	l, _ := openTemp(t)
	r := record(arkA, 1, "one", "loc-2", "loc-1", "loc-2")
	mustRecord(t, l, r)

	vs, err := l.Versions(ctx, arkA)
	if err != nil || len(vs) != 1 {
		t.Fatalf("Versions = %v, %v; want one", vs, err)
	}
	want, _ := normalize(r)
	if !reflect.DeepEqual(vs[0], want) {
		t.Fatalf("recorded\n %+v\nwant\n %+v", vs[0], want)
	}
	if vs[0].Files[0].Name != "producer/a.txt" || !slices.Equal(vs[0].LocalIDs, []string{"loc-1", "loc-2"}) {
		t.Fatalf("files and local ids are not sorted: %+v", vs[0])
	}
	rows, err := l.Objects(ctx)
	wantRow := ObjectRow{ARK: arkA, Profile: profile, LocalIDs: []string{"loc-1", "loc-2"}, LatestVersion: 1,
		Who: "Someone", What: "Thing one", When: "2025", Where: arkA}
	if err != nil || len(rows) != 1 || !reflect.DeepEqual(rows[0], wantRow) {
		t.Fatalf("Objects = %+v, %v; want %+v", rows, err, wantRow)
	}
	if vs, err := l.Versions(ctx, arkB); err != nil || len(vs) != 0 {
		t.Fatalf("Versions of an unknown ark = %v, %v", vs, err)
	}
}

// Recording a version again, even from another batch, changes nothing.
func TestRecordAgainIsIdempotent(t *testing.T) {
	ctx := context.Background()
	l, _ := openTemp(t)
	r := record(arkA, 1, "one", "loc-1")
	mustRecord(t, l, r)
	mustRecord(t, l, r)
	again := r
	again.Batch, again.Job, again.Created = "bid-2", "jid-2", r.Created.Add(time.Hour)
	again.LocalIDs = []string{"loc-1", "loc-1"}
	mustRecord(t, l, again)

	vs, err := l.Versions(ctx, arkA)
	if err != nil || len(vs) != 1 {
		t.Fatalf("Versions = %v, %v; want exactly one", vs, err)
	}
	if vs[0].Batch != "bid-1" || !vs[0].Created.Equal(r.Created) {
		t.Fatalf("a repeat record replaced the first: %+v", vs[0])
	}
}

func TestRecordDifferentContentForSameVersion(t *testing.T) {
	ctx := context.Background()
	l, _ := openTemp(t)
	mustRecord(t, l, record(arkA, 1, "one"))
	other := record(arkA, 1, "other")
	other.Batch = "bid-9"
	err := l.Record(ctx, other)
	if !errors.Is(err, ErrMismatch) {
		t.Fatalf("different content for version 1: %v, want ErrMismatch", err)
	}
	for _, want := range []string{arkA, `"bid-1"`, `"jid-one"`, `"bid-9"`, `"jid-other"`, "files"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	vs, _ := l.Versions(ctx, arkA)
	if len(vs) != 1 || vs[0].Job != "jid-one" {
		t.Fatalf("the first record changed: %+v", vs)
	}
	moved := record(arkA, 2, "two")
	moved.Profile = "other_profile"
	if err := l.Record(ctx, moved); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "other_profile") {
		t.Fatalf("a version in another profile: %v, want ErrMismatch naming it", err)
	}
}

func TestLocalIDLookupAndConflict(t *testing.T) {
	ctx := context.Background()
	l, _ := openTemp(t)
	mustRecord(t, l, record(arkA, 1, "one", "loc-1"))

	ark, ok, err := l.LookupLocalID(ctx, profile, "loc-1")
	if err != nil || !ok || ark != arkA {
		t.Fatalf("lookup loc-1 = %q, %v, %v; want %s", ark, ok, err, arkA)
	}
	for _, q := range [][2]string{{profile, "loc-9"}, {"other_profile", "loc-1"}} {
		if ark, ok, err := l.LookupLocalID(ctx, q[0], q[1]); err != nil || ok || ark != "" {
			t.Fatalf("lookup %v = %q, %v, %v; want none", q, ark, ok, err)
		}
	}

	err = l.Record(ctx, record(arkB, 1, "bee", "loc-new", "loc-1"))
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("a taken local id: %v, want ErrConflict", err)
	}
	for _, want := range []string{`"loc-1"`, arkA, arkB} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	// The failed record left nothing behind: not its version, not its other id.
	if vs, _ := l.Versions(ctx, arkB); len(vs) != 0 {
		t.Fatalf("a conflicting record wrote a version: %+v", vs)
	}
	if _, ok, _ := l.LookupLocalID(ctx, profile, "loc-new"); ok {
		t.Fatal("a conflicting record wrote one of its local ids")
	}
	// The same local id in another profile is another id.
	elsewhere := record(arkB, 1, "bee", "loc-1")
	elsewhere.Profile = "other_profile"
	mustRecord(t, l, elsewhere)
	if ark, ok, _ := l.LookupLocalID(ctx, "other_profile", "loc-1"); !ok || ark != arkB {
		t.Fatalf("lookup in the other profile = %q, %v; want %s", ark, ok, arkB)
	}
	if _, _, err := l.LookupLocalID(ctx, profile, "a\x00b"); err == nil {
		t.Fatal("a lookup with a NUL was accepted")
	}
}

func TestTwoVersionsOfOneObject(t *testing.T) {
	ctx := context.Background()
	l, _ := openTemp(t)
	mustRecord(t, l, record(arkA, 2, "two", "loc-2"))
	mustRecord(t, l, record(arkA, 1, "one", "loc-1")) // late, after a crash: must not win
	vs, err := l.Versions(ctx, arkA)
	if err != nil || len(vs) != 2 || vs[0].Version != 1 || vs[1].Version != 2 {
		t.Fatalf("Versions = %+v, %v; want 1 then 2", vs, err)
	}
	rows, err := l.Objects(ctx)
	if err != nil || len(rows) != 1 {
		t.Fatalf("Objects = %+v, %v", rows, err)
	}
	if r := rows[0]; r.LatestVersion != 2 || r.What != "Thing two" || !slices.Equal(r.LocalIDs, []string{"loc-1", "loc-2"}) {
		t.Fatalf("object row = %+v; want latest 2 with both local ids", r)
	}
}

func TestReopenKeepsData(t *testing.T) {
	ctx := context.Background()
	l, path := openTemp(t)
	mustRecord(t, l, record(arkA, 1, "one", "loc-1"))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, err := OpenLocal(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if ark, ok, err := l2.LookupLocalID(ctx, profile, "loc-1"); err != nil || !ok || ark != arkA {
		t.Fatalf("after reopening, lookup = %q, %v, %v", ark, ok, err)
	}
	if vs, err := l2.Versions(ctx, arkA); err != nil || len(vs) != 1 {
		t.Fatalf("after reopening, Versions = %+v, %v", vs, err)
	}
}

func TestSecondOpenIsLocked(t *testing.T) {
	_, path := openTemp(t)
	second, err := OpenLocalTimeout(path, 50*time.Millisecond)
	if err == nil {
		second.Close()
		t.Fatal("a second open of a held database succeeded")
	}
	want := fmt.Sprintf("inventory database %s is locked by another process", path)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), want) {
		t.Fatalf("second open: %v, want %q", err, want)
	}
}

func TestRecordRejectsBadInput(t *testing.T) {
	l, _ := openTemp(t)
	dup := record(arkA, 1, "one")
	dup.Files = append(dup.Files, dup.Files[0])
	badDigest := record(arkA, 1, "one")
	badDigest.Files[0].SHA256 = "ABC"
	noProfile := record(arkA, 1, "one")
	noProfile.Profile = ""
	for name, r := range map[string]Record{
		"empty ARK": record("", 1, "one"), "version 0": record(arkA, 0, "one"),
		"NUL in local id": record(arkA, 1, "one", "a\x00b"), "duplicate file": dup,
		"bad digest": badDigest, "no profile": noProfile,
	} {
		if err := l.Record(context.Background(), r); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if rows, _ := l.Objects(context.Background()); len(rows) != 0 {
		t.Fatalf("rejected records wrote rows: %+v", rows)
	}
}

func TestConcurrentRecords(t *testing.T) {
	ctx := context.Background()
	l, _ := openTemp(t)
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			ark := fmt.Sprintf("ark:/99999/fk4c%03d", i)
			if err := l.Record(ctx, record(ark, 1, ark, "loc-"+ark)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	rows, err := l.Objects(ctx)
	if err != nil || len(rows) != n {
		t.Fatalf("Objects = %d rows, %v; want %d", len(rows), err, n)
	}
	if !slices.IsSortedFunc(rows, func(a, b ObjectRow) int { return strings.Compare(a.ARK, b.ARK) }) {
		t.Fatal("Objects are not sorted by ARK")
	}
}
