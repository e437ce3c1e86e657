package ocfl

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/handlers/storage/place"
)

// noList is a place whose sorted List of the whole root fails the test:
// Objects must not hold a root's every key (gigabytes at millions of
// objects).
type noList struct {
	place.Place
	t *testing.T
}

func (p noList) List(ctx context.Context, prefix string) ([]string, error) {
	if prefix == "" {
		p.t.Errorf("List(%q): the whole root's keys held at once", prefix)
	}
	return p.Place.List(ctx, prefix)
}

// Objects gives the ARKs after `after`, sorted, without holding the
// root's keys; an inventory.json at another object's root, or not JSON,
// is that object named as unreadable, and the others are listed.
func TestObjectsAfterAndPastDamage(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t)
	var arks []string
	for i := range 7 {
		ark := fmt.Sprintf("ark:/99999/fk4obj%d", i)
		files := workFiles(t, map[string]string{"producer/data.txt": ark})
		if _, err := s.Put(ctx, storage.Object{ARK: ark, Files: files}); err != nil {
			t.Fatal(err)
		}
		arks = append(arks, ark)
	}
	s.p = noList{Place: s.p, t: t}
	for _, c := range []struct {
		after string
		want  []string
	}{
		{"", arks},
		{arks[1], arks[2:]},
		{arks[1] + "x", arks[2:]}, // an ARK no object has
		{arks[6], nil},
	} {
		got, bad, err := s.Objects(ctx, c.after)
		if err != nil || len(bad) > 0 || !slices.Equal(got, c.want) {
			t.Errorf("Objects(%q) = %q, %v, %v; want %q", c.after, got, bad, err, c.want)
		}
	}

	// An object whose inventory.json names another id, and one whose
	// inventory.json is not JSON: each named, the others listed.
	misplaced := filepath.Join(dir, filepath.FromSlash(objectRoot(arks[3])), inventoryName)
	garbled := filepath.Join(dir, filepath.FromSlash(objectRoot(arks[5])), inventoryName)
	var kept [][]byte
	for _, f := range []string{misplaced, garbled} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		kept = append(kept, b)
	}
	if err := os.WriteFile(misplaced, []byte(strings.ReplaceAll(string(kept[0]), arks[3], arks[2])), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(garbled, kept[1][:len(kept[1])/2], 0o644); err != nil {
		t.Fatal(err)
	}
	got, bad, err := s.Objects(ctx, "")
	if want := []string{arks[0], arks[1], arks[2], arks[4], arks[6]}; err != nil || !slices.Equal(got, want) {
		t.Errorf("Objects over two damaged objects = %q, %v; want the other five, %q", got, err, want)
	}
	wantBad := map[string]string{ // by root: what its error names
		objectRoot(arks[3]): objectRoot(arks[3]) + "/" + inventoryName + " holds \"" + arks[2] + "\", which belongs at " + objectRoot(arks[2]),
		objectRoot(arks[5]): objectRoot(arks[5]) + "/" + inventoryName + ": unexpected end of JSON input",
	}
	if len(bad) != len(wantBad) {
		t.Fatalf("unreadable = %v; want %d", bad, len(wantBad))
	}
	for _, u := range bad {
		if want, ok := wantBad[u.Root]; !ok || u.Err == nil || u.Err.Error() != want {
			t.Errorf("unreadable %s: %v; want %q", u.Root, u.Err, want)
		}
	}
	// Put back, for newStore's validation.
	for i, f := range []string{misplaced, garbled} {
		if err := os.WriteFile(f, kept[i], 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
