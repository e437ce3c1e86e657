package place

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

func digest(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:])
}

func newLocal(t *testing.T) (*Local, string) {
	t.Helper()
	dir := t.TempDir()
	l, err := NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	return l, dir
}

func putText(t *testing.T, l *Local, key, content string) {
	t.Helper()
	if err := l.Put(context.Background(), key, strings.NewReader(content), int64(len(content)), digest(content)); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, l *Local, key string) string {
	t.Helper()
	r, err := l.Open(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func list(t *testing.T, l *Local, prefix string) []string {
	t.Helper()
	keys, err := l.List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// firstKeys ranges over p's Keys under prefix and stops after n: the
// place must stop listing (a yield after the loop ended panics).
func firstKeys(t *testing.T, p Place, prefix string, n int) []string {
	t.Helper()
	var got []string
	for k, err := range p.Keys(context.Background(), prefix) {
		if err != nil {
			t.Fatalf("Keys(%q): %v", prefix, err)
		}
		if got = append(got, k); len(got) == n {
			break
		}
	}
	return got
}

func TestLocalPutOpenStatListDelete(t *testing.T) {
	ctx := context.Background()
	l, dir := newLocal(t)
	putText(t, l, "a/b/c.txt", "hello")
	putText(t, l, "a.txt", "top")
	putText(t, l, "a/empty", "")
	putText(t, l, "a/b/c.txt", "hello again") // replaces

	if got := read(t, l, "a/b/c.txt"); got != "hello again" {
		t.Fatalf("a/b/c.txt holds %q", got)
	}
	if n, err := l.Stat(ctx, "a/empty"); err != nil || n != 0 {
		t.Fatalf("Stat(a/empty) = %d, %v", n, err)
	}
	if n, err := l.Stat(ctx, "a/b/c.txt"); err != nil || n != int64(len("hello again")) {
		t.Fatalf("Stat(a/b/c.txt) = %d, %v", n, err)
	}
	if got, want := list(t, l, ""), []string{"a.txt", "a/b/c.txt", "a/empty"}; !slices.Equal(got, want) {
		t.Fatalf("List(\"\") = %v, want %v", got, want)
	}
	if got, want := list(t, l, "a/"), []string{"a/b/c.txt", "a/empty"}; !slices.Equal(got, want) {
		t.Fatalf("List(a/) = %v, want %v", got, want)
	}
	if got := list(t, l, "nothing/here/"); len(got) != 0 {
		t.Fatalf("List of a missing folder = %v", got)
	}
	if got := firstKeys(t, l, "", 2); len(got) != 2 || !slices.Contains(list(t, l, ""), got[1]) {
		t.Fatalf("the first 2 Keys = %v", got)
	}
	for _, err := range l.Keys(ctx, "../") {
		if err == nil || !strings.Contains(err.Error(), `prefix "../"`) {
			t.Fatalf("Keys(../): %v; want the prefix refused", err)
		}
	}

	// Deleting the last file of a folder removes the folders it leaves empty.
	for _, k := range []string{"a/b/c.txt", "a/b/c.txt", "never/was"} {
		if err := l.Delete(ctx, k); err != nil {
			t.Fatalf("Delete(%s): %v", k, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "a", "b")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a/b left behind: %v", err)
	}
	if err := l.Delete(ctx, "a/empty"); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 || entries[0].Name() != "a.txt" {
		t.Fatalf("root holds %v (%v), want only a.txt", entries, err)
	}
	if _, err := l.Stat(ctx, "a/b/c.txt"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("Stat of a deleted key: %v, want ErrNotExist", err)
	}
}

func TestLocalMissingAndFolderKeys(t *testing.T) {
	ctx := context.Background()
	l, _ := newLocal(t)
	putText(t, l, "f/x", "x")
	for _, k := range []string{"missing", "f"} {
		if _, err := l.Open(ctx, k); !errors.Is(err, ErrNotExist) {
			t.Errorf("Open(%s): %v, want ErrNotExist", k, err)
		}
		if _, err := l.Stat(ctx, k); !errors.Is(err, ErrNotExist) {
			t.Errorf("Stat(%s): %v, want ErrNotExist", k, err)
		}
	}
}

// A wrong digest or size leaves nothing new at the key, and no temporary
// file behind.
func TestLocalPutMismatchLeavesNothing(t *testing.T) {
	ctx := context.Background()
	l, dir := newLocal(t)
	putText(t, l, "k/old", "old")
	cases := []struct {
		name, key, content, sum string
		size                    int64
	}{
		{"wrong digest", "k/new", "new", digest("other"), 3},
		{"wrong size", "k/new", "new", digest("new"), 4},
		{"replacing", "k/old", "new", digest("other"), 3},
	}
	for _, c := range cases {
		err := l.Put(ctx, c.key, strings.NewReader(c.content), c.size, c.sum)
		if !errors.Is(err, ErrDigest) || !strings.Contains(err.Error(), c.key) {
			t.Errorf("%s: %v, want ErrDigest naming %s", c.name, err, c.key)
		}
	}
	if got := read(t, l, "k/old"); got != "old" {
		t.Fatalf("k/old holds %q after a failed replace", got)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "k"))
	if len(entries) != 1 {
		t.Fatalf("k holds %v, want only old", entries)
	}
	// A failed Put into new folders leaves no empty folder.
	if err := l.Put(ctx, "new/deep/key", strings.NewReader("x"), 1, digest("y")); !errors.Is(err, ErrDigest) {
		t.Fatalf("Put with a wrong digest: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed Put left its folders: %v", err)
	}
}

func TestLocalCanceledPut(t *testing.T) {
	l, _ := newLocal(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Put(ctx, "a", strings.NewReader("x"), 1, digest("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled Put: %v", err)
	}
	if got := list(t, l, ""); len(got) != 0 {
		t.Fatalf("a canceled Put left %v", got)
	}
}

func TestLocalRefusesBadKeys(t *testing.T) {
	ctx := context.Background()
	l, _ := newLocal(t)
	for _, k := range []string{"", "/abs", "../up", "a/../b", "a//b", "a/", "./a", `a\b`, "a\x00", tmpPrefix + "1", "a/" + tmpPrefix + "1/b"} {
		if err := l.Put(ctx, k, strings.NewReader(""), 0, digest("")); err == nil {
			t.Errorf("Put(%q) succeeded", k)
		}
		if _, err := l.Open(ctx, k); err == nil || errors.Is(err, ErrNotExist) {
			t.Errorf("Open(%q): %v, want a refusal", k, err)
		}
		if err := l.Delete(ctx, k); err == nil {
			t.Errorf("Delete(%q) succeeded", k)
		}
	}
	for _, p := range []string{"a", "/a/", "../", "a//"} {
		if _, err := l.List(ctx, p); err == nil {
			t.Errorf("List(%q) succeeded", p)
		}
	}
}

// Files being written are not listed.
func TestLocalListSkipsFilesBeingWritten(t *testing.T) {
	l, dir := newLocal(t)
	putText(t, l, "d/a", "a")
	if err := os.WriteFile(filepath.Join(dir, "d", tmpPrefix+"123"), []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := list(t, l, ""); !slices.Equal(got, []string{"d/a"}) {
		t.Fatalf("List = %v, want [d/a]", got)
	}
}

// A folder another writer removes while a listing walks (its Delete
// pruned it) is passed by: the keys that are there are listed, with no
// error. A writer's listing of an object failed with "readdirent …: no such
// file or directory" while a paused writer cleaned up its partial version.
func TestLocalKeysPassAFolderRemovedMidWalk(t *testing.T) {
	l, dir := newLocal(t)
	putText(t, l, "o/a/1", "a")
	putText(t, l, "o/b/2", "b")
	putText(t, l, "o/c/3", "c")
	var got []string
	for k, err := range l.Keys(context.Background(), "o/") {
		if err != nil {
			t.Fatalf("Keys(o/) after %v: %v; want the removed folder passed by", got, err)
		}
		got = append(got, k)
		if k == "o/a/1" { // the walk has listed o/ but not yet read o/b
			if err := os.RemoveAll(filepath.Join(dir, "o", "b")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !slices.Equal(got, []string{"o/a/1", "o/c/3"}) {
		t.Fatalf("Keys(o/) = %v, want [o/a/1 o/c/3]", got)
	}
}

// Puts and Deletes of keys sharing folders, at once: every Put whose key
// was not deleted is there whole.
func TestLocalConcurrentPutsAndDeletes(t *testing.T) {
	ctx := context.Background()
	l, _ := newLocal(t)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 16 {
		wg.Go(func() {
			key, content := fmt.Sprintf("s/%d/f", i%2), fmt.Sprint(i)
			if err := l.Put(ctx, fmt.Sprintf("%s%d", key, i), strings.NewReader(content), int64(len(content)), digest(content)); err != nil {
				errs <- err
			}
			if i%4 == 0 {
				if err := l.Delete(ctx, fmt.Sprintf("%s%d", key, i)); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range 16 {
		key := fmt.Sprintf("s/%d/f%d", i%2, i)
		if i%4 == 0 {
			continue
		}
		if got := read(t, l, key); got != fmt.Sprint(i) {
			t.Fatalf("%s holds %q", key, got)
		}
	}
}
