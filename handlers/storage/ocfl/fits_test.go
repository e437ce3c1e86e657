package ocfl

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/handlers/storage/place"
)

// Fits asks the place about the keys the object's next version would
// write: a name whose path in v1's content folder is PATH_MAX exactly
// fits a new object, and not one at version 9, whose v10 is a byte
// longer. Put refuses that name before writing anything, naming the file.
func TestFitsAtTheObjectsNextVersion(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for len(dir) < 3000 {
		dir = filepath.Join(dir, strings.Repeat("d", 200))
	}
	s := openStore(t, dir)
	// The path: dir, "/", the object's root (76), "/v1/content/" (12), the
	// name, whose last part (55 to 255 bytes) is longer than a temporary
	// file's.
	name := "producer/"
	for n := 4095 - len(dir) - 89; len(name)+255 < n; {
		name += strings.Repeat("f", 200) + "/"
	}
	name += strings.Repeat("x", 4095-len(dir)-89-len(name))
	long := workFiles(t, map[string]string{name: "long\n"})

	const fresh = "ark:/99999/fk4fresh"
	if err := s.Fits(ctx, storage.Object{ARK: fresh, Files: long}); err != nil {
		t.Fatalf("a new object: %v, want its version 1 to fit", err)
	}
	for i := range 9 {
		if _, err := s.Put(ctx, storage.Object{ARK: testARK, Files: workFiles(t, map[string]string{"producer/n.txt": fmt.Sprint(i)})}); err != nil {
			t.Fatal(err)
		}
	}
	before := keysUnder(t, dir, testARK)
	err := s.Fits(ctx, storage.Object{ARK: testARK, Files: long})
	var tl *place.TooLong
	if !errors.As(err, &tl) || tl.Over() != 1 || !strings.Contains(err.Error(), "version 10") || !strings.Contains(err.Error(), fmt.Sprintf("%q", name)) {
		t.Fatalf("an object at version 9: %v, want its version 10 a byte too long, naming the file", err)
	}
	if _, err := s.Put(ctx, storage.Object{ARK: testARK, Files: long}); !errors.As(err, &tl) || tl.Over() != 1 {
		t.Fatalf("put at version 10: %v, want refused a byte too long", err)
	}
	if after := keysUnder(t, dir, testARK); !slices.Equal(after, before) {
		t.Errorf("the refused put left %d keys, had %d", len(after), len(before))
	}
	if v, err := s.Put(ctx, storage.Object{ARK: fresh, Files: long}); err != nil || v.Number != 1 {
		t.Fatalf("put of the new object: %+v, %v; want version 1", v, err)
	}
}
