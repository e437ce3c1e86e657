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

// Objects gives the ARKs after `after`, sorted, at most limit, without
// holding the root's keys; an inventory.json at another object's root is
// an error naming it.
func TestObjectsAfterAndLimit(t *testing.T) {
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
		limit int
		want  []string
	}{
		{"", 0, arks},
		{"", 1, arks[:1]}, // trimmed as it goes, at 2
		{arks[1], 3, arks[2:5]},
		{arks[1] + "x", 3, arks[2:5]}, // an ARK no object has
		{arks[4], 10, arks[5:]},
		{arks[6], 0, nil},
	} {
		got, err := s.Objects(ctx, c.after, c.limit)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("Objects(%q, %d) = %q, %v; want %q", c.after, c.limit, got, err, c.want)
		}
	}

	// An object whose inventory.json names another id.
	misplaced := filepath.Join(dir, filepath.FromSlash(objectRoot(arks[3])), inventoryName)
	b, err := os.ReadFile(misplaced)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(misplaced, []byte(strings.ReplaceAll(string(b), arks[3], arks[2])), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = s.Objects(ctx, "", 0)
	if err == nil || !strings.Contains(err.Error(), objectRoot(arks[3])+"/"+inventoryName) ||
		!strings.Contains(err.Error(), "belongs at "+objectRoot(arks[2])) {
		t.Fatalf("Objects over a misplaced inventory: %v; want the key and where its id belongs", err)
	}
	// Put back, for newStore's validation.
	if err := os.WriteFile(misplaced, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
