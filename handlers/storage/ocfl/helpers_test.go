package ocfl

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/handlers/storage/ocfl/ocfltest"
	"github.com/ingestq/ingestq/handlers/storage/place"
)

const testARK = "ark:/99999/fk4b3c7m0x"

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// newStore opens a store in a fresh folder; the test ends by checking
// that folder with the independent validator.
func newStore(t *testing.T) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	s := openStore(t, dir)
	t.Cleanup(func() {
		if !t.Failed() {
			ocfltest.Validate(t, dir)
		}
	})
	return s, dir
}

func openStore(t testing.TB, dir string) *Store {
	t.Helper()
	p, err := place.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// workFiles writes contents into a fresh working folder, the way a job's
// download leaves them, and returns them as Files sorted by name.
func workFiles(t *testing.T, contents map[string]string) []storage.File {
	t.Helper()
	return workFilesIn(t, t.TempDir(), contents)
}

// workFilesIn is workFiles written into dir.
func workFilesIn(t *testing.T, dir string, contents map[string]string) []storage.File {
	t.Helper()
	var files []storage.File
	for name, content := range contents {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, storage.File{Name: name, Path: p, Size: int64(len(content)), SHA256: digest([]byte(content))})
	}
	slices.SortFunc(files, func(a, b storage.File) int { return strings.Compare(a.Name, b.Name) })
	return files
}

var sample = map[string]string{
	"producer/a.txt":         "hello, archive\n",
	"producer/sub/b.csv":     "x,y\n1,2\n",
	"producer/copy-of-a.txt": "hello, archive\n", // same content as a.txt: stored once
	"system/mrt-erc.txt":     "erc:\nwho: Someone\nwhat: Something\n",
	"system/mrt-dc.xml":      "<dc/>",
	"producer/empty.dat":     "",
	"producer/unicode é.txt": "ünïcödé",
}

func sampleFiles(t *testing.T) []storage.File { return workFiles(t, sample) }

// sameFiles fails t unless two sorted lists agree on name, size and digest.
func sameFiles(t *testing.T, got, want []storage.File) {
	t.Helper()
	if !storage.SameContent(got, want) {
		t.Fatalf("files differ:\n got %+v\nwant %+v", got, want)
	}
}

// keysUnder lists the keys under an object's root, relative to it.
func keysUnder(t *testing.T, dir, ark string) []string {
	t.Helper()
	p, err := place.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	root := objectRoot(ark) + "/"
	keys, err := p.List(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		keys[i] = strings.TrimPrefix(keys[i], root)
	}
	return keys
}

// readInventory reads an object's root inventory.
func readInventory(t *testing.T, dir, ark string) *inventory {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(objectRoot(ark)), inventoryName))
	if err != nil {
		t.Fatal(err)
	}
	inv, err := decode(b, inventoryName, ark)
	if err != nil {
		t.Fatal(err)
	}
	return inv
}
