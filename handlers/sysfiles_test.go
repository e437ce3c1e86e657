package handlers

import (
	"fmt"
	"path/filepath"
	"testing"
)

// A storage manifest of an object at the depositor's limit (100,000 files:
// a zip's or a manifest's) with its four system files reads back whole. It
// was read with the depositor's limit of entries: such a job failed in
// Storing, "limit passed: more than 100000 entries", after its download,
// its ARK and its processing.
func TestStorageManifestOfAnObjectAtTheLimitReadsBack(t *testing.T) {
	work := t.TempDir()
	entries := make([]manifestEntry, 100_004)
	for i := range entries {
		name := fmt.Sprintf("producer/d/f%06d.txt", i)
		entries[i] = manifestEntry{Name: name, Path: filepath.Join(work, name), Size: 1, SHA256: sum("x")}
	}
	path := filepath.Join(work, storageManifest)
	if err := writeStorageManifest(path, entries); err != nil {
		t.Fatal(err)
	}
	got, err := readStorageManifest(path)
	if err != nil || len(got) != len(entries) || got[len(got)-1] != entries[len(entries)-1] {
		t.Fatalf("read back %d entries (%v), want %d, the last %+v", len(got), err, len(entries), entries[len(entries)-1])
	}
}
