package ocfl

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ingestq/ingestq/handlers/storage"
)

func TestPutUnchangedThenChanged(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t)
	files := sampleFiles(t)

	v1, err := s.Put(ctx, storage.Object{ARK: testARK, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	if v1.Number != 1 || !v1.Changed || v1.ARK != testARK || v1.Created.IsZero() {
		t.Fatalf("first put = %+v, want version 1 changed", v1)
	}
	sameFiles(t, v1.Files, files)
	wantURL := "file://" + filepath.ToSlash(dir) + "/" + objectRoot(testARK) + "/v1/inventory.json"
	if v1.URL != wantURL {
		t.Fatalf("URL = %s, want %s", v1.URL, wantURL)
	}

	// The same content from another working folder is no new version.
	again, err := s.Put(ctx, storage.Object{ARK: testARK, Files: sampleFiles(t)})
	if err != nil {
		t.Fatal(err)
	}
	if again.Number != 1 || again.Changed || !again.Created.Equal(v1.Created) {
		t.Fatalf("identical put = %+v, want version 1 unchanged", again)
	}

	// v2 changes one file and drops others: only the new content is written.
	changed := workFiles(t, map[string]string{"producer/a.txt": "hello, archive, again\n",
		"system/mrt-erc.txt": sample["system/mrt-erc.txt"], "producer/moved.txt": sample["producer/a.txt"]})
	v2, err := s.Put(ctx, storage.Object{ARK: testARK, Files: changed})
	if err != nil {
		t.Fatal(err)
	}
	if v2.Number != 2 || !v2.Changed {
		t.Fatalf("changed put = %+v, want version 2 changed", v2)
	}
	latest, err := s.Latest(ctx, testARK)
	if err != nil {
		t.Fatal(err)
	}
	if latest.Number != 2 || latest.Changed || !latest.Created.Equal(v2.Created) || latest.URL != v2.URL {
		t.Fatalf("latest = %+v, want version 2", latest)
	}
	sameFiles(t, latest.Files, changed)

	want := []string{"0=ocfl_object_1.1", "inventory.json", "inventory.json.sha256",
		"v1/content/producer/a.txt", "v1/content/producer/empty.dat", "v1/content/producer/sub/b.csv",
		"v1/content/producer/unicode é.txt", "v1/content/system/mrt-dc.xml", "v1/content/system/mrt-erc.txt",
		"v1/inventory.json", "v1/inventory.json.sha256",
		"v2/content/producer/a.txt", "v2/inventory.json", "v2/inventory.json.sha256"}
	if got := keysUnder(t, dir, testARK); !slices.Equal(got, want) {
		t.Fatalf("object root holds\n%q\nwant\n%q", got, want)
	}
	arks, bad, err := s.Objects(ctx, "")
	if err != nil || len(bad) > 0 || !slices.Equal(arks, []string{testARK}) {
		t.Fatalf("Objects() = %v, %v, %v", arks, bad, err)
	}
}

// Message and User go into the version's metadata; without them the
// store names itself.
func TestVersionMetadata(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t)
	if _, err := s.Put(ctx, storage.Object{ARK: testARK, Files: sampleFiles(t)}); err != nil {
		t.Fatal(err)
	}
	user := storage.User{Name: "Depositor", Address: "mailto:dep@example.org"}
	if _, err := s.Put(ctx, storage.Object{ARK: testARK, Files: workFiles(t, map[string]string{"a": "b"}),
		Message: "ingestq: batch bid0001 job jid0002", User: user}); err != nil {
		t.Fatal(err)
	}
	inv := readInventory(t, dir, testARK)
	v1, v2 := inv.Versions["v1"], inv.Versions["v2"]
	if v1.Message != defaultMessage || *v1.User != defaultUser {
		t.Fatalf("v1 message %q user %+v, want the defaults", v1.Message, v1.User)
	}
	if v2.Message != "ingestq: batch bid0001 job jid0002" || *v2.User != user {
		t.Fatalf("v2 message %q user %+v", v2.Message, v2.User)
	}
}

func TestLatestNotFound(t *testing.T) {
	s, _ := newStore(t)
	if _, err := s.Latest(context.Background(), testARK); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Latest of an unknown ark: %v, want ErrNotFound", err)
	}
	if _, err := s.Latest(context.Background(), ""); err == nil {
		t.Fatal("Latest of an empty ARK succeeded")
	}
}

func TestDigestMismatchMakesNoVersion(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t)
	v1, err := s.Put(ctx, storage.Object{ARK: testARK, Files: sampleFiles(t)})
	if err != nil {
		t.Fatal(err)
	}
	before := keysUnder(t, dir, testARK)
	files := workFiles(t, map[string]string{"producer/a.txt": "new content", "producer/b.txt": "more"})
	files[1].SHA256 = digest([]byte("not what is on disk"))
	_, err = s.Put(ctx, storage.Object{ARK: testARK, Files: files})
	if err == nil || !strings.Contains(err.Error(), `"producer/b.txt"`) || !strings.Contains(err.Error(), "sha256") {
		t.Fatalf("put with a wrong digest: %v, want an error naming producer/b.txt", err)
	}
	latest, err := s.Latest(ctx, testARK)
	if err != nil || latest.Number != v1.Number {
		t.Fatalf("latest after a failed put = %+v, %v; want version %d", latest, err, v1.Number)
	}
	if got := keysUnder(t, dir, testARK); !slices.Equal(got, before) {
		t.Fatalf("object root after a failed put holds %q, want %q", got, before)
	}
}

func TestSourceMissingOrWrongSize(t *testing.T) {
	s, _ := newStore(t)
	files := sampleFiles(t)
	missing := slices.Clone(files)
	missing[0].Path += ".gone"
	short := slices.Clone(files)
	short[1].Size++
	for _, fs := range [][]storage.File{missing, short} {
		if _, err := s.Put(context.Background(), storage.Object{ARK: testARK, Files: fs}); err == nil {
			t.Fatal("put with a bad source file succeeded")
		}
	}
	if _, err := s.Latest(context.Background(), testARK); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a failed put left a version: %v", err)
	}
}

func TestCanceledPutMakesNoVersion(t *testing.T) {
	s, dir := newStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Put(ctx, storage.Object{ARK: testARK, Files: sampleFiles(t)}); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled put: %v", err)
	}
	if got := keysUnder(t, dir, testARK); len(got) != 0 {
		t.Fatalf("a canceled put left %q", got)
	}
}

// Goroutines storing different ARKs, and two at once for each ARK, end with
// exactly one version per ARK.
func TestConcurrentPuts(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t)
	const n = 8
	objs := make([]storage.Object, n)
	for i := range objs {
		objs[i] = storage.Object{
			ARK:   fmt.Sprintf("ark:/99999/fk4obj%d", i),
			Files: workFiles(t, map[string]string{"producer/data.txt": strings.Repeat(strconv.Itoa(i), 5000)}),
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for _, obj := range objs {
		for range 2 {
			wg.Go(func() {
				if _, err := s.Put(ctx, obj); err != nil {
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
	arks, bad, err := s.Objects(ctx, "")
	if err != nil || len(bad) > 0 || len(arks) != n {
		t.Fatalf("Objects() = %v, %v, %v; want %d", arks, bad, err, n)
	}
	for _, obj := range objs {
		v, err := s.Latest(ctx, obj.ARK)
		if err != nil || v.Number != 1 {
			t.Fatalf("%s: latest %+v, %v; want version 1", obj.ARK, v, err)
		}
		sameFiles(t, v.Files, obj.Files)
		if got := keysUnder(t, dir, obj.ARK); slices.Contains(got, "v2/inventory.json") {
			t.Fatalf("%s: two versions: %q", obj.ARK, got)
		}
	}
}

// More files than Put copies at once: all stored whole; one bad file among
// them fails the first Put and leaves no object behind.
func TestPutManyFiles(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t)
	contents := map[string]string{}
	for i := range 5 * copyParallel {
		contents[fmt.Sprintf("producer/d%d/f%03d.txt", i%3, i)] = strings.Repeat(strconv.Itoa(i), i+1)
	}
	files := workFiles(t, contents)

	bad := slices.Clone(files)
	bad[len(bad)/2].SHA256 = digest([]byte("not what is on disk"))
	_, err := s.Put(ctx, storage.Object{ARK: testARK, Files: bad})
	if err == nil || !strings.Contains(err.Error(), strconv.Quote(bad[len(bad)/2].Name)) {
		t.Fatalf("put with a wrong digest: %v, want an error naming %s", err, bad[len(bad)/2].Name)
	}
	if got := keysUnder(t, dir, testARK); len(got) != 0 {
		t.Fatalf("object root holds %q after a failed first put", got)
	}
	v, err := s.Put(ctx, storage.Object{ARK: testARK, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	sameFiles(t, v.Files, files)
	latest, err := s.Latest(ctx, testARK)
	if err != nil {
		t.Fatal(err)
	}
	sameFiles(t, latest.Files, files)
}
