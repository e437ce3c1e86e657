package ocfl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/handlers/storage/ocfl/ocfltest"
	"github.com/ingestq/ingestq/handlers/storage/place"
)

var errCrashed = errors.New("crashed")

// crashingPlace passes writes to a real place until it has made `left`
// Puts; then every Put and Delete fails, as if the process had died there.
type crashingPlace struct {
	place.Place
	mu   sync.Mutex
	left int
}

func (c *crashingPlace) take() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.left == 0 {
		return false
	}
	c.left--
	return true
}

func (c *crashingPlace) Put(ctx context.Context, key string, r io.Reader, size int64, sum string) error {
	if !c.take() {
		return errCrashed
	}
	return c.Place.Put(ctx, key, r, size, sum)
}

func (c *crashingPlace) Delete(ctx context.Context, key string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.left == 0 {
		return errCrashed
	}
	return c.Place.Delete(ctx, key)
}

// A Put that dies after any number of writes leaves the object at its
// old head or its new one, never between, for a reader; the next Put
// completes or removes what is left, and the root is valid after it.
func TestCrashAfterEveryWrite(t *testing.T) {
	changed := map[string]string{"producer/a.txt": "changed\n", "producer/new.bin": "new", "system/mrt-erc.txt": "erc: 2\n",
		"producer/sub/b.csv": sample["producer/sub/b.csv"]}
	for _, c := range []struct {
		name   string
		before map[string]string // nil: the crash is in the first version
		put    map[string]string
		writes int // content files to write
	}{
		{"first version", nil, sample, 6},
		{"second version", sample, changed, 3},
	} {
		// writes+1 for a first version's declaration, then vN inventory,
		// vN sidecar, root inventory, root sidecar.
		decl := 0
		if c.before == nil {
			decl = 1
		}
		total := decl + c.writes + 4
		for k := 0; k <= total; k++ {
			t.Run(fmt.Sprintf("%s/after %d of %d writes", c.name, k, total), func(t *testing.T) {
				crashAfter(t, c.before, c.put, k, decl+c.writes)
			})
		}
	}
}

// crashAfter stores before (if any), then put through a place that dies
// after k writes, of which the first `content` are the declaration and
// content.
func crashAfter(t *testing.T, before, put map[string]string, k, content int) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir)
	oldHead := 0
	if before != nil {
		if _, err := s.Put(ctx, storage.Object{ARK: testARK, Files: workFiles(t, before)}); err != nil {
			t.Fatal(err)
		}
		oldHead = 1
	}
	files := workFiles(t, put)
	crashing := &Store{p: &crashingPlace{Place: s.p, left: k}}
	_, err := crashing.Put(ctx, storage.Object{ARK: testARK, Files: files})
	committed := k >= content+3 // the root inventory was written
	if (err == nil) != (k >= content+4) {
		t.Fatalf("put through a place dying after %d writes: %v", k, err)
	}

	// A reader sees the old head or the new one, whole.
	reader := openStore(t, dir)
	v, err := reader.Latest(ctx, testARK)
	switch {
	case committed && (err != nil || v.Number != oldHead+1):
		t.Fatalf("after the commit, latest = %+v, %v; want version %d", v, err, oldHead+1)
	case !committed && oldHead == 0 && !errors.Is(err, storage.ErrNotFound):
		t.Fatalf("before the first commit, latest = %+v, %v; want ErrNotFound", v, err)
	case !committed && oldHead == 1 && (err != nil || v.Number != 1):
		t.Fatalf("before the commit, latest = %+v, %v; want version 1", v, err)
	}

	// The next Put, of other files, completes the version when its
	// inventory was written and removes what was written otherwise; then
	// writes its own version. Leftovers would fail the validator.
	want := oldHead + 1
	if k >= content+2 {
		want++ // after the completed one
	}
	other := workFiles(t, map[string]string{"producer/other.txt": "other"})
	v, err = reader.Put(ctx, storage.Object{ARK: testARK, Files: other})
	if err != nil {
		t.Fatal(err)
	}
	if v.Number != want || !v.Changed {
		t.Fatalf("put after the crash = version %d changed %v; want version %d", v.Number, v.Changed, want)
	}
	sameFiles(t, v.Files, other)
	if want == oldHead+2 {
		prev := readInventory(t, dir, testARK).Versions[versionName(oldHead+1)]
		sameFiles(t, withSizes(prev.files(), files), files)
	}
	ocfltest.Validate(t, dir)
}

// withSizes gives files the sizes of the same names in sized.
func withSizes(files, sized []storage.File) []storage.File {
	for i := range files {
		for _, f := range sized {
			if f.Name == files[i].Name {
				files[i].Size = f.Size
			}
		}
	}
	return files
}

// A job stored again after its first try died mid-commit (the version's
// inventory written, the root's not) writes its describing files anew: the
// next Put completes the first try's version and, the content being the
// same, makes no other. Without Describing it would make a second version
// that the job's record would name alone.
func TestStoredAgainAfterACrashMidCommit(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir)
	first := map[string]string{"producer/a.txt": "content\n", "system/premis.xml": "<deposit at='10:00'/>"}
	again := map[string]string{"producer/a.txt": "content\n", "system/premis.xml": "<deposit at='10:05'/>"}
	describing := []string{"system/premis.xml"}

	// Declaration, two content files, the version's inventory and sidecar.
	crashing := &Store{p: &crashingPlace{Place: s.p, left: 1 + 2 + 2}}
	if _, err := crashing.Put(ctx, storage.Object{ARK: testARK, Files: workFiles(t, first), Describing: describing}); !errors.Is(err, errCrashed) {
		t.Fatalf("put through a dying place: %v, want it to crash", err)
	}
	v, err := s.Put(ctx, storage.Object{ARK: testARK, Files: workFiles(t, again), Describing: describing})
	if err != nil {
		t.Fatal(err)
	}
	if v.Number != 1 || v.Changed {
		t.Fatalf("put again = version %d changed %v; want version 1 unchanged (the first try's, completed)", v.Number, v.Changed)
	}
	sameFiles(t, v.Files, workFiles(t, first)) // the first try's deposit record, with sizes
	if latest, err := s.Latest(ctx, testARK); err != nil || latest.Number != 1 {
		t.Fatalf("latest = %d, %v; want version 1", latest.Number, err)
	}
	ocfltest.Validate(t, dir)

	// Without Describing, the new deposit record is new content.
	v, err = s.Put(ctx, storage.Object{ARK: testARK, Files: workFiles(t, again)})
	if err != nil || v.Number != 2 || !v.Changed {
		t.Fatalf("put without describing = version %d changed %v, %v; want a new version 2", v.Number, v.Changed, err)
	}
}
