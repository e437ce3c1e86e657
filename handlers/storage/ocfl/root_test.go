package ocfl

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/handlers/storage/ocfl/ocfltest"
	"github.com/ingestq/ingestq/handlers/storage/place"
)

func newAt(t *testing.T, dir string) error {
	t.Helper()
	p, err := place.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(context.Background(), p)
	return err
}

func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A place holding anything but a storage root of ours is refused, with a
// message that says what is there and what would do.
func TestNewRefusesOtherPlaces(t *testing.T) {
	notes := t.TempDir()
	writeFile(t, notes, "notes.txt", "mine")
	err := newAt(t, notes)
	if err == nil || !strings.Contains(err.Error(), "notes.txt") || !strings.Contains(err.Error(), "0=ocfl_1.1") {
		t.Fatalf("New on a folder of notes: %v", err)
	}

	other := t.TempDir()
	if _, err := New(context.Background(), mustLocal(t, other)); err != nil {
		t.Fatal(err)
	}
	writeFile(t, other, layoutConfigFile, `{"extensionName":"0004-hashed-n-tuple-storage-layout","digestAlgorithm":"sha256","tupleSize":2,"numberOfTuples":3,"shortObjectRoot":false}`)
	if err := newAt(t, other); err == nil || !strings.Contains(err.Error(), "TupleSize:2") {
		t.Fatalf("New on another layout: %v", err)
	}

	old := t.TempDir()
	writeFile(t, old, rootDeclaration, "ocfl_1.0\n")
	if err := newAt(t, old); err == nil || !strings.Contains(err.Error(), "ocfl_1.0") {
		t.Fatalf("New on a bad declaration: %v", err)
	}
}

// A creation that died before its declaration is taken over; an existing
// root is opened with its objects.
func TestNewCompletesAndReopens(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, layoutFile, "half")
	s := openStore(t, dir)
	if b, err := os.ReadFile(filepath.Join(dir, rootDeclaration)); err != nil || string(b) != rootDeclared {
		t.Fatalf("declaration %q, %v", b, err)
	}
	if _, err := s.Put(context.Background(), storage.Object{ARK: testARK, Files: sampleFiles(t)}); err != nil {
		t.Fatal(err)
	}
	again := openStore(t, dir)
	if v, err := again.Latest(context.Background(), testARK); err != nil || v.Number != 1 {
		t.Fatalf("latest after reopening = %+v, %v", v, err)
	}
}

// Open writes nothing: a place without a root (empty, or a creation that
// died before its declaration) is ErrNoRoot and stays as it was; a root is
// opened with its objects, and a bad one refused as New refuses it.
func TestOpenWritesNothing(t *testing.T) {
	empty, half := t.TempDir(), t.TempDir()
	writeFile(t, half, layoutFile, "half")
	for _, dir := range []string{empty, half} {
		before := ocfltest.Files(t, dir)
		_, err := Open(context.Background(), mustLocal(t, dir))
		if !errors.Is(err, ErrNoRoot) || !strings.Contains(err.Error(), dir) {
			t.Errorf("Open on %q: %v, want ErrNoRoot naming the place", before, err)
		}
		if after := ocfltest.Files(t, dir); !slices.Equal(after, before) {
			t.Errorf("Open wrote to %s: it held %q, then %q", dir, before, after)
		}
	}

	root := t.TempDir()
	if _, err := openStore(t, root).Put(context.Background(), storage.Object{ARK: testARK, Files: sampleFiles(t)}); err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), mustLocal(t, root))
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.Latest(context.Background(), testARK); err != nil || v.Number != 1 {
		t.Errorf("latest through Open = %+v, %v", v, err)
	}

	old := t.TempDir()
	writeFile(t, old, rootDeclaration, "ocfl_1.0\n")
	if _, err := Open(context.Background(), mustLocal(t, old)); err == nil || !strings.Contains(err.Error(), "ocfl_1.0") {
		t.Errorf("Open on a bad declaration: %v", err)
	}
}

func mustLocal(t *testing.T, dir string) place.Place {
	t.Helper()
	p, err := place.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
