package ocfl

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/handlers/storage"
)

// Every version of the built-in store's objects is imported in order with
// its creation time; importing again writes nothing, and picks up a newer
// version.
func TestImportFromTheBuiltInStore(t *testing.T) {
	ctx := context.Background()
	oldDir := t.TempDir()
	old, err := storage.NewLocal(oldDir)
	if err != nil {
		t.Fatal(err)
	}
	other := "ark:/99999/fk4other"
	changed := map[string]string{"producer/a.txt": "v2\n", "system/mrt-erc.txt": sample["system/mrt-erc.txt"]}
	var olds []storage.Version
	for _, o := range []storage.Object{
		{ARK: testARK, LocalIDs: []string{"local-1"}, Files: sampleFiles(t)},
		{ARK: testARK, Files: workFiles(t, changed)},
		{ARK: other, Files: workFiles(t, map[string]string{"x": "y"})},
	} {
		v, err := old.Put(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		olds = append(olds, v)
	}

	s, dir := newStore(t)
	n, err := Import(ctx, s, oldDir)
	if err != nil || n != 3 {
		t.Fatalf("Import = %d, %v; want 3 versions", n, err)
	}
	inv := readInventory(t, dir, testARK)
	for i, want := range olds[:2] {
		v := inv.Versions[versionName(i+1)]
		created, _ := time.Parse(time.RFC3339, v.Created)
		if !created.Equal(want.Created.Truncate(time.Second)) || !strings.Contains(v.Message, "imported") {
			t.Fatalf("version %d: created %s message %q; want created %s", i+1, v.Created, v.Message, want.Created)
		}
		sameFiles(t, withSizes(v.files(), want.Files), want.Files)
	}
	if arks, bad, err := s.Objects(ctx, ""); err != nil || len(bad) > 0 || !slices.Equal(arks, []string{testARK, other}) {
		t.Fatalf("Objects() = %v, %v, %v", arks, bad, err)
	}

	before := keysUnder(t, dir, testARK)
	if n, err := Import(ctx, s, oldDir); err != nil || n != 0 {
		t.Fatalf("Import again = %d, %v; want 0", n, err)
	}
	if got := keysUnder(t, dir, testARK); !slices.Equal(got, before) {
		t.Fatalf("Import again changed the object: %q", got)
	}
	if _, err := old.Put(ctx, storage.Object{ARK: other, Files: workFiles(t, map[string]string{"x": "z"})}); err != nil {
		t.Fatal(err)
	}
	if n, err := Import(ctx, s, oldDir); err != nil || n != 1 {
		t.Fatalf("Import of a newer version = %d, %v; want 1", n, err)
	}
}

// An OCFL object that already has the version with other files is not
// overwritten.
func TestImportRefusesADifferentVersion(t *testing.T) {
	ctx := context.Background()
	oldDir := t.TempDir()
	old, err := storage.NewLocal(oldDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Put(ctx, storage.Object{ARK: testARK, Files: sampleFiles(t)}); err != nil {
		t.Fatal(err)
	}
	s, _ := newStore(t)
	if _, err := s.Put(ctx, storage.Object{ARK: testARK, Files: workFiles(t, map[string]string{"a": "b"})}); err != nil {
		t.Fatal(err)
	}
	if _, err := Import(ctx, s, oldDir); err == nil || !strings.Contains(err.Error(), "other files") {
		t.Fatalf("Import over a different version 1: %v", err)
	}
}
