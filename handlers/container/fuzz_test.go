package container

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzExtract unpacks arbitrary bytes as a zip, the way a depositor's
// container arrives: it must never panic nor write outside its folder, and
// every file it lists is a clean relative name whose bytes it wrote, with
// the size and digest it reports.
func FuzzExtract(f *testing.F) {
	for _, entries := range [][]zipEntry{
		{{name: "a.txt", body: "hello"}, {name: "d/", body: ""}, {name: "d/b.txt", body: "world"}},
		{{name: "../escape.txt", body: "x"}},
		{{name: "/abs.txt", body: "x"}},
		{{name: "a", body: "1"}, {name: "a/b", body: "2"}},
		{{name: "same", body: "1"}, {name: "same", body: "2"}},
		{{name: "link", body: "a.txt", mode: os.ModeSymlink | 0o777}},
		{{name: "big", body: string(make([]byte, 64<<10)), store: true}},
		{{name: "dir\\win.txt", body: "x"}, {name: "é/ü.txt", body: "x"}},
	} {
		f.Add(zipBytes(f, entries...))
	}
	f.Add([]byte("PK\x03\x04 not a zip"))
	lim := Limits{MaxFiles: 64, MaxBytes: 1 << 20, MaxRatio: 100}
	f.Fuzz(func(t *testing.T, data []byte) {
		tmp := t.TempDir()
		zipPath, dest := filepath.Join(tmp, "in.zip"), filepath.Join(tmp, "out")
		if err := os.WriteFile(zipPath, data, 0o644); err != nil {
			t.Fatal(err)
		}
		files, err := Extract(zipPath, dest, lim)
		if kids, _ := os.ReadDir(tmp); len(kids) > 2 {
			t.Fatalf("wrote beside its folder: %v", kids)
		}
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error with no words")
			}
			return
		}
		for _, fl := range files {
			if fl.Name == "" || path.IsAbs(fl.Name) || path.Clean(fl.Name) != fl.Name || slices.Contains(strings.Split(fl.Name, "/"), "..") {
				t.Fatalf("listed name %q is not clean and relative", fl.Name)
			}
			b, err := os.ReadFile(filepath.Join(dest, filepath.FromSlash(fl.Name)))
			if err != nil {
				t.Fatalf("listed %q, not there: %v", fl.Name, err)
			}
			sum := sha256.Sum256(b)
			if int64(len(b)) != fl.Size || hex.EncodeToString(sum[:]) != fl.SHA256 {
				t.Fatalf("%q: %d bytes, sha256 %x; listed %d, %s", fl.Name, len(b), sum, fl.Size, fl.SHA256)
			}
		}
	})
}
