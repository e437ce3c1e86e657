package ocfl

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/handlers/storage/place"
	"github.com/ingestq/ingestq/internal/linktest"
)

// contentFile is where a version's content file lies in the store's folder.
func contentFile(dir, ark, version, name string) string {
	return filepath.Join(dir, filepath.FromSlash(objectRoot(ark)), version, "content", filepath.FromSlash(name))
}

// Files the caller vouches for are stored by a hard link: no byte is
// copied or hashed again, and removing the working folder afterwards
// leaves the stored object whole (the validator reads every file back
// with its digest when the test ends).
func TestPutLinksVouchedFiles(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t)
	files := sampleFiles(t)
	for i := range files {
		files[i].Linkable = true
	}
	if _, err := s.Put(ctx, storage.Object{ARK: testARK, Files: files}); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Name == "producer/copy-of-a.txt" {
			continue // the same content as a.txt: stored once, as a.txt
		}
		if !linktest.SameFile(t, f.Path, contentFile(dir, testARK, "v1", f.Name)) {
			t.Errorf("%s was copied, not linked", f.Name)
		}
	}
	if err := os.RemoveAll(filepath.Dir(filepath.Dir(files[0].Path))); err != nil {
		t.Fatal(err)
	}
	v, err := s.Latest(ctx, testARK)
	if err != nil {
		t.Fatal(err)
	}
	sameFiles(t, v.Files, files)
}

// Without the caller's word, a file is copied (and the copy verified).
func TestPutCopiesFilesNotVouchedFor(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t)
	files := sampleFiles(t)
	if _, err := s.Put(ctx, storage.Object{ARK: testARK, Files: files}); err != nil {
		t.Fatal(err)
	}
	if linktest.SameFile(t, files[0].Path, contentFile(dir, testARK, "v1", files[0].Name)) {
		t.Fatalf("%s was linked without Linkable", files[0].Name)
	}
}

// A working folder on another file system is copied, and the copy is
// checked against the digest as always: a wrong one is refused.
func TestPutLinkableAcrossFileSystemsCopies(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t)
	other := linktest.OtherFileSystem(t, dir)
	src := filepath.Join(other, "a.txt")
	if err := os.WriteFile(src, []byte("on tmpfs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := storage.File{Name: "producer/a.txt", Path: src, Size: 9, SHA256: digest([]byte("on tmpfs\n")), Linkable: true}

	wrong := f
	wrong.SHA256 = digest([]byte("something else\n"))
	if _, err := s.Put(ctx, storage.Object{ARK: testARK, Files: []storage.File{wrong}}); !errors.Is(err, place.ErrDigest) {
		t.Fatalf("a wrong digest across file systems: %v, want place.ErrDigest", err)
	}
	if _, err := s.Put(ctx, storage.Object{ARK: testARK, Files: []storage.File{f}}); err != nil {
		t.Fatal(err)
	}
	if linktest.SameFile(t, src, contentFile(dir, testARK, "v1", f.Name)) {
		t.Fatal("linked across file systems?")
	}
}
