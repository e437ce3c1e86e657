package durable

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteFileReplacesAtomically(t *testing.T) {
	name := filepath.Join(t.TempDir(), "new", "folder", "f.txt")
	for _, data := range []string{"first", "second"} {
		if err := WriteFile(name, []byte(data)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(name)
		if err != nil || string(got) != data {
			t.Fatalf("after writing %q: %q, %v", data, got, err)
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(name))
	if len(entries) != 1 {
		t.Errorf("%d entries beside the file, want no temporary file left", len(entries)-1)
	}
}

// CreateFile writes a file that is not there, and leaves one that is as
// it is, saying so.
func TestCreateFileNeverReplaces(t *testing.T) {
	name := filepath.Join(t.TempDir(), "f.txt")
	if err := CreateFile(name, []byte("first")); err != nil {
		t.Fatal(err)
	}
	if err := CreateFile(name, []byte("second")); !errors.Is(err, fs.ErrExist) {
		t.Errorf("creating it again: %v, want fs.ErrExist", err)
	}
	if got, err := os.ReadFile(name); err != nil || string(got) != "first" {
		t.Errorf("the file after creating it again: %q %v, want the first", got, err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(name)); len(entries) != 1 {
		t.Errorf("%d entries beside the file, want no temporary file left", len(entries)-1)
	}
}

func TestSyncTreeAndDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "a", "b"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a", "b", "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := SyncTree(dir); err != nil {
		t.Fatal(err)
	}
	err := SyncTree(filepath.Join(dir, "missing"))
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("SyncTree of a missing folder: %v, want an error naming it", err)
	}
	if err := SyncDir(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "sync folder") {
		t.Errorf("SyncDir of a missing folder: %v", err)
	}
}

func TestSyncFiles(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for _, name := range []string{"a", "b", "c"} {
		files = append(files, filepath.Join(dir, name))
		if err := os.WriteFile(files[len(files)-1], []byte(name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := SyncFiles(files, 2); err != nil {
		t.Fatal(err)
	}
	gone := filepath.Join(dir, "gone")
	if err := SyncFiles(append(files, gone), 2); err == nil || !strings.Contains(err.Error(), gone) {
		t.Errorf("SyncFiles with a missing file: %v, want an error naming %s", err, gone)
	}
}
