package handlers

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func sum(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:])
}

// hashTree takes a recorded digest without reading the file while the file
// is the one hashed; hashes one the record does not have, or that changed
// since (and tells which of the depositor's files now differ from their
// record, or are gone); and the record it leaves reads back the same.
func TestHashTreeUsesTheRecord(t *testing.T) {
	work := t.TempDir()
	write := func(name, data string) {
		p := filepath.Join(work, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rec := &digests{files: map[string]fileDigest{}}
	record := func(name, digest string) {
		if err := rec.add(work, name, digest); err != nil {
			t.Fatal(err)
		}
	}
	later := func(name string) { // a write or a touch moves the modification time
		at := time.Now().Add(time.Hour)
		if err := os.Chtimes(filepath.Join(work, filepath.FromSlash(name)), at, at); err != nil {
			t.Fatal(err)
		}
	}
	// A digest no file has: taken only if hashTree does not read the file.
	trusted := strings.Repeat("ab", 32)
	write("producer/recorded.txt", "recorded")
	record("producer/recorded.txt", trusted)
	write("producer/unrecorded.txt", "unrecorded")
	write("producer/changed.txt", "before")
	record("producer/changed.txt", sum("before"))
	write("producer/changed.txt", "after!")
	later("producer/changed.txt")
	write("producer/touched.txt", "touched")
	record("producer/touched.txt", sum("touched"))
	later("producer/touched.txt")
	write("producer/gone.txt", "gone")
	record("producer/gone.txt", sum("gone"))
	if err := os.Remove(filepath.Join(work, "producer", "gone.txt")); err != nil {
		t.Fatal(err)
	}
	write("system/mrt-erc.txt", "erc")
	record("system/mrt-erc.txt", sum("erc"))

	entries, changed, err := hashTree(work, rec, producerDir, systemDir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range entries {
		got[e.Name] = e.SHA256
	}
	want := map[string]string{
		"producer/recorded.txt":   trusted,
		"producer/unrecorded.txt": sum("unrecorded"),
		"producer/changed.txt":    sum("after!"),
		"producer/touched.txt":    sum("touched"),
		"system/mrt-erc.txt":      sum("erc"),
	}
	for name, digest := range want {
		if got[name] != digest {
			t.Errorf("%s: sha256 %s, want %s", name, got[name], digest)
		}
	}
	if len(got) != len(want) {
		t.Errorf("entries %v", got)
	}
	if !slices.Equal(changed, []string{"producer/changed.txt", "producer/gone.txt"}) {
		t.Errorf("changed %v, want the file written over and the one gone", changed)
	}

	// The files hashed now are recorded as they are, and the record reads back.
	if err := rec.write(work); err != nil {
		t.Fatal(err)
	}
	back, err := readDigests(work)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"producer/unrecorded.txt", "producer/touched.txt", "producer/recorded.txt"} {
		fi, err := os.Stat(filepath.Join(work, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		if digest, ok := back.unchanged(name, fi); !ok || digest != want[name] {
			t.Errorf("%s: the record read back has %q (%v), want %s", name, digest, ok, want[name])
		}
	}
}

func TestNoRecordIsAnEmptyOne(t *testing.T) {
	rec, err := readDigests(t.TempDir())
	if err != nil || len(rec.files) != 0 {
		t.Fatalf("no record: %v, %v", rec, err)
	}
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, digestRecord), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readDigests(work); err == nil || !strings.Contains(err.Error(), digestRecord) {
		t.Fatalf("a torn record: %v, want an error naming it", err)
	}
}
