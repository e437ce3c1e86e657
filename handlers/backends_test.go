package handlers_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/handlers/storage/ocfl"
	"github.com/ingestq/ingestq/handlers/storage/ocfl/ocfltest"
	"github.com/ingestq/ingestq/handlers/storage/place"
	"github.com/ingestq/ingestq/internal/pgtest"
	"github.com/ingestq/ingestq/internal/s3test"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// The shared back ends end to end: objects stored as OCFL on a real S3
// server (the primary) and in a local folder (a replica), recorded in a
// real PostgreSQL. Every object is in both copies, recorded with both and
// with its PREMIS events, and valid OCFL read back from S3. An update by
// local id writes only the changed content, on both copies; the same
// content again writes nothing.
func TestEndToEndOnS3AndPostgres(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t) // not parallel: the AWS_* variables are the process's
	primary, replica := srv.URL(srv.Addr, "ocfl"), t.TempDir()
	r := newRig(t, nil, withStorage(primary, replica), withInventory(pgtest.NewDatabase(t, pgtest.Start(t))))

	objs := []object{{"one.txt": []byte("1")}, {"two.txt": []byte("22"), "deep/three.txt": []byte("333")}}
	b, lines := r.submitBatch("e2e", objs)
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("batch %s: %s", b.State(), b.Status.Message)
	}
	arks := map[string]string{} // local id → ARK
	for key, j := range r.jobsOf(b.ID) {
		i := slices.IndexFunc(lines, func(l row) bool { return strings.HasSuffix(key, l.url) })
		arks[lines[i].local] = r.checkStored(j, objs[i])
		r.checkCopies(j, arks[lines[i].local], 1, primary, replica)
	}

	// An update of loc-1 changing one file: v2 holds that file's content
	// (and the system files that changed), nothing v1 holds, in both copies.
	ark := arks["loc-1"]
	update := object{"two.txt": []byte("22"), "deep/three.txt": []byte("three, revised")}
	j := r.deposit("/update.checkm", update, "local_id", "loc-1")
	if got := r.checkStored(j, update); got != ark {
		t.Fatalf("update by local id stored %s, want %s", got, ark)
	}
	r.checkCopies(j, ark, 2, primary, replica)
	for _, target := range []string{primary, replica} {
		v1, v2 := versionContentAt(t, target, ark, 1), versionContentAt(t, target, ark, 2)
		if _, ok := v2["producer/deep/three.txt"]; !ok || v2["producer/two.txt"] != "" {
			t.Errorf("%s: v2 wrote %v, want producer/deep/three.txt and not the unchanged producer/two.txt", target, v2)
		}
		for name, sum := range v2 {
			if slices.Contains(slices.Collect(maps.Values(v1)), sum) {
				t.Errorf("%s: v2 wrote %s again although v1 holds its content", target, name)
			}
		}
	}

	// The same content again: the job completes as an update and nothing
	// is written to either copy.
	before := map[string][]string{primary: allKeys(t, primary), replica: allKeys(t, replica)}
	j = r.deposit("/again.checkm", update, "local_id", "loc-1")
	r.checkStored(j, update)
	for target, keys := range before {
		if after := allKeys(t, target); !slices.Equal(after, keys) {
			t.Errorf("%s: unchanged content wrote %d keys (%d before, %d after)", target, len(after)-len(keys), len(keys), len(after))
		}
	}
	if v, err := r.p.Primary().Latest(t.Context(), ark); err != nil || v.Number != 2 {
		t.Errorf("after unchanged content: version %d (%v), want 2", v.Number, err)
	}
}

// submitBatch serves objs as object manifests listed in a batch manifest,
// with local ids loc-0, loc-1, …, and submits it.
func (r *rig) submitBatch(name string, objs []object) (*queue.Batch, []row) {
	var lines []row
	for i, o := range objs {
		var rows []row
		for file, data := range o {
			rows = append(rows, fileRow(r.content.put(fmt.Sprintf("/%s/o%d/%s", name, i, file), data), file, data))
		}
		url := r.content.put(fmt.Sprintf("/%s/o%d.checkm", name, i), manifest("mrt-ingest-manifest", rows...))
		lines = append(lines, row{url: url, size: -1, local: fmt.Sprintf("loc-%d", i), who: "Author", what: fmt.Sprintf("Title %d", i), when: "2026"})
	}
	return r.submit(r.content.put("/"+name+".checkm", manifest("mrt-batch-manifest", lines...))), lines
}

// deposit submits obj as an object manifest served at path, waits for its
// batch, and returns its job.
func (r *rig) deposit(path string, obj object, extra ...string) *queue.Job {
	r.t.Helper()
	b := r.submitObject(path, obj, extra...)
	r.waitBatch(b.ID, queue.Completed, queue.Failed)
	return r.jobsOf(b.ID)["manifest"]
}

// submitObject serves obj's files and an object manifest of them at path,
// and submits it.
func (r *rig) submitObject(path string, obj object, extra ...string) *queue.Batch {
	var rows []row
	for file, data := range obj {
		rows = append(rows, fileRow(r.content.put(strings.TrimSuffix(path, ".checkm")+"/"+file, data), file, data))
	}
	return r.submit(r.content.put(path, manifest("mrt-ingest-manifest", rows...)), extra...)
}

// checkCopies asserts that ark's version n is in every target with the
// same files, and that the job and the inventory name every copy.
func (r *rig) checkCopies(j *queue.Job, ark string, n int, targets ...string) {
	r.t.Helper()
	var want storage.Version
	for i, target := range targets {
		v, err := openTarget(r.t, target).Latest(r.t.Context(), ark)
		if err != nil || v.Number != n {
			r.t.Errorf("%s in %s: version %d (%v), want %d", ark, target, v.Number, err, n)
			continue
		}
		if i == 0 {
			want = v
		} else if !storage.SameContent(v.Files, want.Files) {
			r.t.Errorf("%s: the copy in %s holds %v, the primary %v", ark, target, v.Files, want.Files)
		}
	}
	if j.Store == nil || len(j.Store.Copies) != len(targets) {
		r.t.Errorf("job %s: store manifest %+v, want %d copies", j.ID, j.Store, len(targets))
	}
	detail, err := r.p.Inventory().Object(r.t.Context(), ark)
	i := slices.IndexFunc(detail.Versions, func(rec inventory.Record) bool { return rec.Version == n })
	if err != nil || i < 0 {
		r.t.Fatalf("%s: inventory %+v (%v), want version %d", ark, detail, err, n)
	}
	var got []string
	for _, c := range detail.Versions[i].Replicas {
		got = append(got, c.Target)
	}
	if slices.Sort(got); !slices.Equal(got, slices.Sorted(slices.Values(targets))) {
		r.t.Errorf("%s version %d: the inventory records copies in %v, want %v", ark, n, got, targets)
	}
}

// openTarget opens an OCFL storage root: a folder or an s3:// URL.
func openTarget(t testing.TB, target string) *ocfl.Store {
	t.Helper()
	st, err := ocfl.New(t.Context(), openPlace(t, target))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func openPlace(t testing.TB, target string) place.Place {
	t.Helper()
	pl, err := place.Open(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// validateTarget runs the independent OCFL validator on a storage root: a
// folder in place, an S3 one read back into a temp folder first. A storage
// service (http) is not ours to read.
func validateTarget(t testing.TB, target string) {
	t.Helper()
	switch {
	case strings.HasPrefix(target, "s3://"):
		ocfltest.Validate(t, download(t, target))
	case !strings.Contains(target, "://"):
		ocfltest.Validate(t, target)
	}
}

// download copies every key of the place at target into a temp folder.
func download(t testing.TB, target string) string {
	t.Helper()
	pl, dir := openPlace(t, target), t.TempDir()
	keys, err := pl.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if err := copyKey(pl, k, filepath.Join(dir, filepath.FromSlash(k))); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func copyKey(pl place.Place, key, to string) error {
	src, err := pl.Open(context.Background(), key)
	if err != nil {
		return err
	}
	defer src.Close()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	dst, err := os.Create(to)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	return errors.Join(err, dst.Close())
}

// allKeys lists every key of the place at target.
func allKeys(t testing.TB, target string) []string { return keysUnder(t, target, "") }

// objectKeys lists the keys of ark's object root, relative to it.
func objectKeys(t testing.TB, target, ark string) []string {
	t.Helper()
	root := ocfltest.ObjectRoot(ark) + "/"
	keys := keysUnder(t, target, root)
	for i := range keys {
		keys[i] = strings.TrimPrefix(keys[i], root)
	}
	return keys
}

func keysUnder(t testing.TB, target, prefix string) []string {
	t.Helper()
	keys, err := openPlace(t, target).List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// versionContentAt is the content version n of ark wrote in the storage
// root at target: the object's file name → its SHA-256, read back.
func versionContentAt(t testing.TB, target, ark string, n int) map[string]string {
	t.Helper()
	pl, folder := openPlace(t, target), fmt.Sprintf("%s/v%d/content/", ocfltest.ObjectRoot(ark), n)
	keys, err := pl.List(context.Background(), folder)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, k := range keys {
		rc, err := pl.Open(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		_, err = io.Copy(h, rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(k, folder)] = hex.EncodeToString(h.Sum(nil))
	}
	return out
}

// A data folder written before OCFL is imported into the daemon's primary
// target when that is not the default folder: the daemon reads heads
// there, and the default root is never made.
func TestPreOCFLStoreImportedIntoThePrimary(t *testing.T) {
	t.Parallel()
	const ark = "ark:/99999/fk4old0002"
	data := []byte("written before OCFL\n")
	primary := t.TempDir()
	r := newRig(t, nil, withStorage(primary), withPreOCFLObject(t, ark, data))
	v, err := openTarget(t, primary).Latest(t.Context(), ark)
	if err != nil || v.Number != 1 || len(v.Files) != 1 || v.Files[0].SHA256 != sha256hex(data) {
		t.Fatalf("%s in the primary: %+v (%v), want version 1 with producer/a.txt", ark, v, err)
	}
	if _, err := os.Stat(handlers.DefaultStorage(r.data)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the default OCFL root was made (%v); want the object in the primary only", err)
	}
}

// withPreOCFLObject writes version 1 of ark, holding producer/a.txt, into
// the data folder's store as ingestq kept it before OCFL.
func withPreOCFLObject(t *testing.T, ark string, data []byte) rigOption {
	src := filepath.Join(t.TempDir(), "a.txt")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return func(hc *handlers.Config, _ *reactor.Config) {
		old, err := storage.NewLocal(filepath.Join(hc.DataDir, "storage"))
		if err == nil {
			_, err = old.Put(context.Background(), storage.Object{ARK: ark, Files: []storage.File{
				{Name: "producer/a.txt", Path: src, Size: int64(len(data)), SHA256: sha256hex(data)}}})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
