package ocfl

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/handlers/storage"
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

func mustLocal(t *testing.T, dir string) place.Place {
	t.Helper()
	p, err := place.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
