package ocfl

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/handlers/storage/ocfl/ocfltest"
)

// The validator finds what is wrong: tampered content, a tampered sidecar
// (checked by @ocfl/ocfl-fs itself), a stray file and an empty folder.
func TestValidatorCatchesDamage(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	if _, err := s.Put(context.Background(), storage.Object{ARK: testARK, Files: sampleFiles(t)}); err != nil {
		t.Fatal(err)
	}
	ocfltest.Validate(t, dir)
	obj := filepath.Join(dir, filepath.FromSlash(objectRoot(testARK)))
	for _, c := range []struct {
		name, file, content, want string
	}{
		{"tampered content", "v1/content/producer/a.txt", "hello, archivf\n", "E093"},
		{"tampered sidecar", "inventory.json.sha256", strings.Repeat("0", 64) + " inventory.json\n", "digest mismatch"},
		{"tampered version sidecar", "v1/inventory.json.sha256", strings.Repeat("1", 64) + " inventory.json\n", "digest mismatch"},
		{"stray file", "v1/content/stray.txt", "x", "E023"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(obj, filepath.FromSlash(c.file))
			orig, err := os.ReadFile(p)
			if err == nil {
				defer os.WriteFile(p, orig, 0o644)
			} else {
				defer os.Remove(p)
			}
			if err := os.WriteFile(p, []byte(c.content), 0o644); err != nil {
				t.Fatal(err)
			}
			out, ok := ocfltest.Run(t, dir)
			if ok || !strings.Contains(out, c.want) {
				t.Fatalf("validator on %s: valid %v, want a report with %s:\n%s", c.name, ok, c.want, out)
			}
		})
	}
	empty := filepath.Join(dir, "abc")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, ok := ocfltest.Run(t, dir); ok || !strings.Contains(out, "E073") {
		t.Fatalf("validator with an empty folder: valid %v:\n%s", ok, out)
	}
	os.Remove(empty)
	ocfltest.Validate(t, dir) // restored
}
