package container

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestSniff(t *testing.T) {
	tests := []struct {
		head string
		want bool
	}{
		{"PK\x03\x04rest", true},
		{"PK\x05\x06", false}, // an empty zip: nothing to extract
		{"PK", false},
		{"#%checkm_0.7", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := Sniff([]byte(tt.head)); got != tt.want {
			t.Errorf("Sniff(%q) = %v, want %v", tt.head, got, tt.want)
		}
	}
}

func TestExtract(t *testing.T) {
	zipPath := writeZip(t,
		zipEntry{name: "obj/"},
		zipEntry{name: "obj/hello.txt", body: "hello, world\n"},
		zipEntry{name: "obj/docs/readme.md", body: "# Readme\n"},
		zipEntry{name: "./obj/./data//table.csv", body: "id\n1\n"},
		zipEntry{name: "obj/empty"},
		zipEntry{name: "obj/folder only/"},
		zipEntry{name: "./"},
	)
	dest := filepath.Join(t.TempDir(), "new", "dest")
	files, err := Extract(zipPath, dest, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := []File{
		{"obj/hello.txt", 13, sha256hex("hello, world\n")}, {"obj/docs/readme.md", 9, sha256hex("# Readme\n")},
		{"obj/data/table.csv", 5, sha256hex("id\n1\n")}, {"obj/empty", 0, sha256hex("")},
	}
	if !reflect.DeepEqual(files, want) {
		t.Errorf("files %v, want %v", files, want)
	}
	for name, body := range map[string]string{
		"obj/hello.txt": "hello, world\n", "obj/docs/readme.md": "# Readme\n", "obj/data/table.csv": "id\n1\n", "obj/empty": "",
	} {
		got, err := os.ReadFile(filepath.Join(dest, filepath.FromSlash(name)))
		if err != nil || string(got) != body {
			t.Errorf("%s holds %q, %v; want %q", name, got, err, body)
		}
	}
	if fi, err := os.Stat(filepath.Join(dest, "obj", "folder only")); err != nil || !fi.IsDir() {
		t.Errorf("folder entry not created: %v", err)
	}
}

func TestExtractAgainReplaces(t *testing.T) {
	zipPath := writeZip(t, zipEntry{name: "a/b.txt", body: "short"})
	dest := t.TempDir()
	if _, err := Extract(zipPath, dest, Limits{}); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dest, "a", "b.txt")
	leftover := "a much longer leftover from an earlier run"
	if err := os.WriteFile(target, []byte(leftover), 0o644); err != nil {
		t.Fatal(err)
	}
	// A hard link to the leftover stands for a stored copy of it.
	stored := filepath.Join(t.TempDir(), "stored")
	if err := os.Link(target, stored); err != nil {
		t.Fatal(err)
	}
	files, err := Extract(zipPath, dest, Limits{})
	if err != nil {
		t.Fatalf("second run: %v", err)
	}
	if got, _ := os.ReadFile(target); string(got) != "short" || len(files) != 1 || files[0].Size != 5 {
		t.Errorf("after the second run: %q, files %v; want %q of 5 bytes", got, files, "short")
	}
	if got, _ := os.ReadFile(stored); string(got) != leftover {
		t.Errorf("the second run wrote into the earlier file (a stored copy by hard link now holds %q)", got)
	}
}

// TestExtractNoFiles: a zip of no files (empty, or folders only) is
// refused, naming it, before anything is written: Processing found "the
// object has no files", naming no container.
func TestExtractNoFiles(t *testing.T) {
	for name, entries := range map[string][]zipEntry{"empty": nil, "folders only": {{name: "d/"}, {name: "d/e/"}}} {
		zipPath := writeZip(t, entries...)
		dest := filepath.Join(t.TempDir(), "dest")
		files, err := Extract(zipPath, dest, Limits{})
		if want := "container " + zipPath + ": holds no files"; err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s zip: files %v, error %v; want one starting %q", name, files, err, want)
		}
		missing(t, dest)
	}
}

// TestExtractStaysInsideDespiteSymlinkInDest covers a dest that already
// holds a symbolic link out of it (left by someone else): Extract must not
// write through it.
func TestExtractStaysInsideDespiteSymlinkInDest(t *testing.T) {
	outside := t.TempDir()
	dest := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dest, "out")); err != nil {
		t.Fatal(err)
	}
	zipPath := writeZip(t, zipEntry{name: "out/x.txt", body: "escaped"})
	_, err := Extract(zipPath, dest, Limits{})
	if err == nil || !strings.Contains(err.Error(), `entry "out/x.txt"`) {
		t.Errorf("error %v, want one naming entry out/x.txt", err)
	}
	missing(t, filepath.Join(outside, "x.txt"))
}

func TestExtractMissingZip(t *testing.T) {
	zipPath := filepath.Join(t.TempDir(), "nope.zip")
	dest := filepath.Join(t.TempDir(), "dest")
	_, err := Extract(zipPath, dest, Limits{})
	if err == nil || !strings.HasPrefix(err.Error(), "container "+zipPath+": ") {
		t.Errorf("error %v, want one naming %s", err, zipPath)
	}
	missing(t, dest)
}
