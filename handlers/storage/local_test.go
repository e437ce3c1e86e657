package storage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func newLocal(t *testing.T) (*Local, string) {
	t.Helper()
	dir := t.TempDir()
	l, err := NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	return l, dir
}

// versionFolders lists what is in an object folder.
func versionFolders(t *testing.T, dir, ark string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, dirName(ark)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestLocalPutUnchangedThenChanged(t *testing.T) {
	ctx := context.Background()
	l, dir := newLocal(t)
	files := sampleFiles(t)

	v1, err := l.Put(ctx, Object{ARK: testARK, LocalIDs: []string{"local-1"}, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	if v1.Number != 1 || !v1.Changed || v1.ARK != testARK || v1.Created.IsZero() {
		t.Fatalf("first put = %+v, want version 1 changed", v1)
	}
	sameFiles(t, v1.Files, files)
	for _, f := range v1.Files {
		b, err := os.ReadFile(f.Path)
		if err != nil || digest(b) != f.SHA256 {
			t.Fatalf("stored %s at %s: err %v, digest mismatch", f.Name, f.Path, err)
		}
		if !strings.HasPrefix(f.Path, filepath.Join(dir, "ark_99999_fk4b3c7m0x", "v0001")) {
			t.Fatalf("stored %s at %s, outside the version folder", f.Name, f.Path)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ark_99999_fk4b3c7m0x", "v0001", "version.json")); err != nil {
		t.Fatal(err)
	}

	// The same content from another working folder is no new version.
	again, err := l.Put(ctx, Object{ARK: testARK, Files: sampleFiles(t)})
	if err != nil {
		t.Fatal(err)
	}
	if again.Number != 1 || again.Changed || !again.Created.Equal(v1.Created) {
		t.Fatalf("identical put = %+v, want version 1 unchanged", again)
	}

	changed := workFiles(t, map[string]string{"producer/a.txt": "hello, archive, again\n", "system/mrt-erc.txt": "erc:\n"})
	v2, err := l.Put(ctx, Object{ARK: testARK, Files: changed})
	if err != nil {
		t.Fatal(err)
	}
	if v2.Number != 2 || !v2.Changed {
		t.Fatalf("changed put = %+v, want version 2 changed", v2)
	}
	latest, err := l.Latest(ctx, testARK)
	if err != nil {
		t.Fatal(err)
	}
	if latest.Number != 2 || latest.Changed || !latest.Created.Equal(v2.Created) {
		t.Fatalf("latest = %+v, want version 2", latest)
	}
	sameFiles(t, latest.Files, changed)
	if got := versionFolders(t, dir, testARK); !slices.Equal(got, []string{"v0001", "v0002"}) {
		t.Fatalf("object folder holds %v", got)
	}
	arks, err := l.Objects()
	if err != nil || !slices.Equal(arks, []string{testARK}) {
		t.Fatalf("Objects() = %v, %v", arks, err)
	}
}

func TestLocalLatestNotFound(t *testing.T) {
	l, _ := newLocal(t)
	_, err := l.Latest(context.Background(), testARK)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("Latest of an unknown ark: %v, want ErrNotFound", err)
	}
}

// A Put killed before its rename leaves a temporary folder; it neither
// counts as a version nor survives the next Put.
func TestLocalLeftoverTempFolder(t *testing.T) {
	ctx := context.Background()
	l, dir := newLocal(t)
	objDir := filepath.Join(dir, dirName(testARK))
	leftover := filepath.Join(objDir, ".tmp-killed", "producer")
	if err := os.MkdirAll(leftover, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(leftover, "a.txt"), []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Latest(ctx, testARK); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Latest with only a leftover: %v, want ErrNotFound", err)
	}
	if arks, err := l.Objects(); err != nil || len(arks) != 0 {
		t.Fatalf("Objects() with only a leftover = %v, %v", arks, err)
	}

	v, err := l.Put(ctx, Object{ARK: testARK, Files: sampleFiles(t)})
	if err != nil {
		t.Fatal(err)
	}
	if v.Number != 1 {
		t.Fatalf("put after a leftover made version %d, want 1", v.Number)
	}
	if got := versionFolders(t, dir, testARK); !slices.Equal(got, []string{"v0001"}) {
		t.Fatalf("object folder holds %v, want only v0001", got)
	}
}

// A Put that renamed its version but died before the caller heard of it is
// run again: the second Put finds the version and makes no other.
func TestLocalPutAgainAfterUnacknowledgedRename(t *testing.T) {
	ctx := context.Background()
	l, dir := newLocal(t)
	obj := Object{ARK: testARK, Files: sampleFiles(t)}
	first, err := l.Put(ctx, obj)
	if err != nil {
		t.Fatal(err)
	}
	second, err := l.Put(ctx, obj)
	if err != nil {
		t.Fatal(err)
	}
	if second.Number != first.Number || second.Changed {
		t.Fatalf("second put = version %d changed %v, want version %d unchanged", second.Number, second.Changed, first.Number)
	}
	if got := versionFolders(t, dir, testARK); !slices.Equal(got, []string{"v0001"}) {
		t.Fatalf("object folder holds %v, want only v0001", got)
	}
}

func TestLocalDigestMismatchMakesNoVersion(t *testing.T) {
	ctx := context.Background()
	l, dir := newLocal(t)
	v1, err := l.Put(ctx, Object{ARK: testARK, Files: sampleFiles(t)})
	if err != nil {
		t.Fatal(err)
	}
	files := workFiles(t, map[string]string{"producer/a.txt": "new content", "producer/b.txt": "more"})
	files[1].SHA256 = digest([]byte("not what is on disk"))
	_, err = l.Put(ctx, Object{ARK: testARK, Files: files})
	if err == nil || !strings.Contains(err.Error(), `"producer/b.txt"`) || !strings.Contains(err.Error(), "sha256") {
		t.Fatalf("put with a wrong digest: %v, want an error naming producer/b.txt", err)
	}
	latest, err := l.Latest(ctx, testARK)
	if err != nil || latest.Number != v1.Number {
		t.Fatalf("latest after a failed put = %+v, %v; want version %d", latest, err, v1.Number)
	}
	if got := versionFolders(t, dir, testARK); !slices.Equal(got, []string{"v0001"}) {
		t.Fatalf("object folder holds %v after a failed put", got)
	}
}

func TestLocalSourceMissingOrWrongSize(t *testing.T) {
	l, _ := newLocal(t)
	files := sampleFiles(t)
	missing := slices.Clone(files)
	missing[0].Path += ".gone"
	short := slices.Clone(files)
	short[1].Size++
	for _, fs := range [][]File{missing, short} {
		_, err := l.Put(context.Background(), Object{ARK: testARK, Files: fs})
		if err == nil {
			t.Fatal("put with a bad source file succeeded")
		}
	}
	if _, err := l.Latest(context.Background(), testARK); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a failed put left a version: %v", err)
	}
}

func TestLocalCanceledPutMakesNoVersion(t *testing.T) {
	l, _ := newLocal(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Put(ctx, Object{ARK: testARK, Files: sampleFiles(t)}); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled put: %v", err)
	}
	if _, err := l.Latest(context.Background(), testARK); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a canceled put left a version: %v", err)
	}
}

// Two ARKs that map to one folder name must not mix their versions.
func TestLocalFolderNameCollision(t *testing.T) {
	l, _ := newLocal(t)
	if _, err := l.Put(context.Background(), Object{ARK: "ark:/99999/a_b", Files: sampleFiles(t)}); err != nil {
		t.Fatal(err)
	}
	_, err := l.Put(context.Background(), Object{ARK: "ark:/99999/a/b", Files: sampleFiles(t)})
	if err == nil || !strings.Contains(err.Error(), "ark:/99999/a_b") {
		t.Fatalf("colliding ARK: %v, want an error naming the other ARK", err)
	}
}

// Goroutines storing different ARKs, and two at once for each ARK, end with
// exactly one version per ARK.
func TestLocalConcurrentPuts(t *testing.T) {
	ctx := context.Background()
	l, dir := newLocal(t)
	const n = 8
	objs := make([]Object, n)
	for i := range objs {
		objs[i] = Object{
			ARK:   fmt.Sprintf("ark:/99999/fk4obj%d", i),
			Files: workFiles(t, map[string]string{"producer/data.txt": strings.Repeat(strconv.Itoa(i), 5000)}),
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for _, obj := range objs {
		for range 2 {
			wg.Go(func() {
				if _, err := l.Put(ctx, obj); err != nil {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	arks, err := l.Objects()
	if err != nil || len(arks) != n {
		t.Fatalf("Objects() = %v, %v; want %d", arks, err, n)
	}
	for _, obj := range objs {
		v, err := l.Latest(ctx, obj.ARK)
		if err != nil || v.Number != 1 {
			t.Fatalf("%s: latest %+v, %v; want version 1", obj.ARK, v, err)
		}
		sameFiles(t, v.Files, obj.Files)
		if got := versionFolders(t, dir, obj.ARK); !slices.Equal(got, []string{"v0001"}) {
			t.Fatalf("%s: folder holds %v", obj.ARK, got)
		}
	}
}

// More files than Put copies at once, over several folders: all stored
// whole; one bad file among them fails the Put and leaves nothing behind.
func TestLocalPutManyFiles(t *testing.T) {
	ctx := context.Background()
	l, dir := newLocal(t)
	contents := map[string]string{}
	for i := range 5 * copyParallel {
		contents[fmt.Sprintf("producer/d%d/f%03d.txt", i%3, i)] = strings.Repeat(strconv.Itoa(i), i)
	}
	files := workFiles(t, contents)

	bad := slices.Clone(files)
	bad[len(bad)/2].SHA256 = digest([]byte("not what is on disk"))
	_, err := l.Put(ctx, Object{ARK: testARK, Files: bad})
	if err == nil || !strings.Contains(err.Error(), strconv.Quote(bad[len(bad)/2].Name)) {
		t.Fatalf("put with a wrong digest: %v, want an error naming %s", err, bad[len(bad)/2].Name)
	}
	if got := versionFolders(t, dir, testARK); len(got) != 0 {
		t.Fatalf("object folder holds %v after a failed put", got)
	}

	v, err := l.Put(ctx, Object{ARK: testARK, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	sameFiles(t, v.Files, files)
	for _, f := range v.Files {
		b, err := os.ReadFile(f.Path)
		if err != nil || string(b) != contents[f.Name] {
			t.Fatalf("%s: %q, %v; want %q", f.Name, b, err, contents[f.Name])
		}
	}
}
