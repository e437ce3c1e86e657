package place

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/ingestq/ingestq/internal/linktest"
)

// writeSource writes a file the way a job's download leaves one, in a
// folder of its own under base.
func writeSource(t *testing.T, base, content string) string {
	t.Helper()
	dir, err := os.MkdirTemp(base, "work-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := filepath.Join(dir, "f.bin")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLinkTakesTheFileItself(t *testing.T) {
	ctx := context.Background()
	l, dir := newLocal(t)
	src := writeSource(t, t.TempDir(), "the working copy")
	if err := l.Link(ctx, "a/b/c.bin", src); err != nil {
		t.Fatal(err)
	}
	if err := l.SyncLinks(ctx, []string{"a/b/c.bin"}); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "a", "b", "c.bin")
	if !linktest.SameFile(t, src, key) {
		t.Fatal("the key is a copy, not the working file")
	}
	// The working folder goes (Notify removes it): the key keeps the bytes.
	if err := os.RemoveAll(filepath.Dir(src)); err != nil {
		t.Fatal(err)
	}
	if got := read(t, l, "a/b/c.bin"); got != "the working copy" {
		t.Fatalf("after the working folder went, the key holds %q", got)
	}
}

// A key that holds something is replaced, and linking the same file again
// (a Put run again) leaves no temporary name behind.
func TestLinkReplaces(t *testing.T) {
	ctx := context.Background()
	l, _ := newLocal(t)
	putText(t, l, "k", "old bytes")
	src := writeSource(t, t.TempDir(), "new bytes")
	for range 2 {
		if err := l.Link(ctx, "k", src); err != nil {
			t.Fatal(err)
		}
	}
	if got := read(t, l, "k"); got != "new bytes" {
		t.Fatalf("key holds %q", got)
	}
	names, err := os.ReadDir(l.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || names[0].Name() != "k" {
		t.Fatalf("the place's folder holds %v, want only k", names)
	}
}

func TestLinkAcrossFileSystems(t *testing.T) {
	ctx := context.Background()
	l, dir := newLocal(t)
	src := writeSource(t, linktest.OtherFileSystem(t, dir), "elsewhere")
	err := l.Link(ctx, "x/y.bin", src)
	if !errors.Is(err, ErrNoLink) {
		t.Fatalf("Link across file systems: %v, want ErrNoLink", err)
	}
	if keys := list(t, l, ""); len(keys) != 0 {
		t.Fatalf("a refused link left %v", keys)
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err != nil {
		t.Fatalf("a refused link's folder, kept for the copy that stands for it: %v", err)
	}
}

// Files linked at once into one folder from another file system (a
// working storage on a disk of its own) are each refused, and their copies
// then land. A refused link pruned the folder, which vanished under the
// link or copy of another file (not exist): a job's Storing failed at random.
func TestLinksAcrossFileSystemsAtOnce(t *testing.T) {
	ctx := context.Background()
	l, dir := newLocal(t)
	const content = "elsewhere"
	src := writeSource(t, linktest.OtherFileSystem(t, dir), content)
	for round := range 20 {
		var g errgroup.Group
		for i := range 8 {
			key := fmt.Sprintf("r%d/v1/content/f%d", round, i)
			g.Go(func() error {
				if err := l.Link(ctx, key, src); !errors.Is(err, ErrNoLink) {
					return fmt.Errorf("link of %s: %v, want ErrNoLink", key, err)
				}
				return l.Put(ctx, key, strings.NewReader(content), int64(len(content)), digest(content))
			})
		}
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if keys := list(t, l, ""); len(keys) != 20*8 {
		t.Fatalf("%d keys, want %d", len(keys), 20*8)
	}
}

func TestLinkMissingSource(t *testing.T) {
	l, _ := newLocal(t)
	err := l.Link(context.Background(), "k", filepath.Join(t.TempDir(), "gone"))
	if err == nil || errors.Is(err, ErrNoLink) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Link of a missing file: %v, want not-exist (not ErrNoLink: a copy would fail too)", err)
	}
	if keys := list(t, l, ""); !slices.Equal(keys, nil) {
		t.Fatalf("keys %v", keys)
	}
}
