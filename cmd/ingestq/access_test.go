//go:build linux

package main_test

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/handlers/storage/ocfl"
	"github.com/ingestq/ingestq/handlers/storage/place"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
)

const bigSize = 2 << 30

// A 2 GiB object's package, asked for with the CLI (the daemon holds the
// embedded inventory, so the CLI asks its API for the estimate: the large
// queue). The daemon is SIGKILLed mid-assembly: only its hidden partial
// file is in the packages folder, no package. A restarted daemon takes the
// request up when the dead one's session ends and completes it; its peak
// RSS (VmHWM) stays under 150 MB while it streams the 2 GiB through the
// zip, and the package holds the stored file, byte for byte.
//
// The object is put into storage directly (a generated stream, hard-linked
// into the OCFL root) and recorded in the inventory, rather than ingested:
// downloading 2 GiB would double the test's time.
func TestAccessBigObjectKilledAndBounded(t *testing.T) {
	start := time.Now()
	r := newIngestRig(t, "")
	ark, sum := putBigObject(t, r.data)
	t.Logf("a 2 GiB object stored and recorded in %v", time.Since(start).Round(time.Millisecond))
	rec := record(t, r.nats)

	d1 := r.daemon("d1")
	api := regexp.MustCompile(`http=(http://\S+)`).FindStringSubmatch(d1.logText())
	if api == nil {
		t.Fatalf("no http= in d1's log:\n%s", tail(d1.logText(), 20))
	}
	out, err := exec.Command(ingestqBin, "access", "request", ark, "-o", "json", "--zk", r.zk, "--zk-root", r.root,
		"--data-dir", r.data, "--api", api[1]+"/api/v1", "--nats", r.nats).CombinedOutput()
	if err != nil {
		t.Fatalf("ingestq access request: %v\n%s", err, out)
	}
	var v ops.AccessView
	if err := json.Unmarshal(out[bytes.IndexByte(out, '{'):], &v); err != nil {
		t.Fatalf("access request's output: %v\n%s", err, out)
	}
	if v.Queue != queue.AccessLarge || v.Token.ContentBytes != bigSize {
		t.Fatalf("request %+v: want the large queue, an estimate of %d bytes", v, bigSize)
	}

	dir := filepath.Join(r.data, "access")
	poll(t, 2*time.Minute, "the partial package to pass 128 MiB", func() (bool, string, error) {
		names, size := packagesIn(dir)
		return size >= 128<<20, strings.Join(names, ", "), nil
	})
	d1.kill()
	names, size := packagesIn(dir)
	if len(names) != 1 || !strings.HasPrefix(names[0], ".partial-") {
		t.Fatalf("after the kill the folder holds %v: want only a partial file", names)
	}
	t.Logf("d1 killed with %d MiB written to %s", size>>20, names[0])
	if a, err := r.q.FindAccess(t.Context(), v.Ref); err != nil || a.State() != queue.Processing {
		t.Fatalf("request after the kill: %v %v, want Processing", a, err)
	}

	restarted := time.Now()
	d2 := r.daemon("d2")
	rec.waitFor(2*time.Minute, "the request's Completed event", func(evs []events.Event) bool {
		return accessReached(evs, v.Ref, queue.Completed)
	})
	took := time.Since(restarted)
	hwm, err := procMiB(d2.cmd.Process.Pid, "VmHWM")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("d2 (built with -race) completed the request %v after its start; peak RSS %.1f MiB", took.Round(time.Millisecond), hwm)
	if hwm >= 150e6/(1<<20) {
		t.Errorf("d2's peak RSS %.1f MiB, want under 150 MB", hwm)
	}
	a, err := r.q.FindAccess(t.Context(), v.Ref)
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := a.AccessToken()
	if a.State() != queue.Completed || tok.Package == nil || tok.TokenStatus != queue.TokenReady {
		t.Fatalf("request %s %q, token %+v", a.State(), a.Status.Message, tok)
	}
	if names, _ := packagesIn(dir); len(names) != 1 || names[0] != tok.Package.Name {
		t.Errorf("the folder holds %v, want only the package %s", names, tok.Package.Name)
	}
	checkBigPackage(t, filepath.Join(dir, tok.Package.Name), tok.Package.SHA256, sum)
	d2.stop(30 * time.Second)
	t.Logf("whole test: %v", time.Since(start).Round(time.Millisecond))
}

// putBigObject stores a generated 2 GiB file as an object's version 1 in
// the daemon's OCFL root and records it in its embedded inventory; it
// returns the ARK and the file's sha256.
func putBigObject(t *testing.T, data string) (string, string) {
	const ark = "ark:/99999/fk4big2gib"
	path := filepath.Join(t.TempDir(), "big.bin") // on data's file system: the store links it
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	// One random MiB, each copy stamped with its number: no two blocks
	// alike, and little work per byte (this test runs with -race).
	block := make([]byte, 1<<20)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(block)
	h := sha256.New()
	w := io.MultiWriter(f, h)
	for i := range bigSize / len(block) {
		binary.BigEndian.PutUint64(block, uint64(i))
		if _, err := w.Write(block); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	pl, err := place.NewLocal(handlers.DefaultStorage(data))
	if err != nil {
		t.Fatal(err)
	}
	st, err := ocfl.New(t.Context(), pl)
	if err != nil {
		t.Fatal(err)
	}
	name := "producer/big.bin"
	v, err := st.Put(t.Context(), storage.Object{ARK: ark, Files: []storage.File{{Name: name, Path: path, Size: bigSize, SHA256: sum, Linkable: true}}})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.OpenLocal(filepath.Join(data, "inventory.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer inv.Close()
	err = inv.Record(t.Context(), inventory.Record{ARK: ark, Profile: "demo", Version: v.Number, Created: v.Created, Batch: "none", Job: "none",
		Files: []inventory.FileRow{{Name: name, Size: bigSize, SHA256: sum}}})
	if err != nil {
		t.Fatal(err)
	}
	return ark, sum
}

// packagesIn lists the packages folder, and the size of its partial file.
func packagesIn(dir string) ([]string, int64) {
	des, _ := os.ReadDir(dir)
	var names []string
	var partial int64
	for _, de := range des {
		names = append(names, de.Name())
		if info, err := de.Info(); err == nil && strings.HasPrefix(de.Name(), ".partial-") {
			partial = info.Size()
		}
	}
	return names, partial
}

func accessReached(evs []events.Event, ref string, to queue.State) bool {
	for _, e := range evs {
		if e.Kind == events.KindAccess && e.AccessID == ref && e.To == string(to) {
			return true
		}
	}
	return false
}

// checkBigPackage checks the package's own digest, and that it holds the
// one stored file under the ARK's folder, with its digest: the entry is
// stored as it is (zip's Store), so one read of the file hashes both.
func checkBigPackage(t *testing.T, path, pkgSum, fileSum string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	if len(zr.File) != 1 || zr.File[0].Name != "ark_99999_fk4big2gib/v1/producer/big.bin" || zr.File[0].Method != zip.Store {
		t.Fatalf("package entries %v", zr.File)
	}
	off, err := zr.File[0].DataOffset()
	if err != nil {
		t.Fatal(err)
	}
	whole, entry := sha256.New(), sha256.New()
	end := off + int64(zr.File[0].UncompressedSize64)
	for _, part := range []struct {
		from, to int64
		w        io.Writer
	}{{0, off, whole}, {off, end, io.MultiWriter(whole, entry)}, {end, st.Size(), whole}} {
		if _, err := io.Copy(part.w, io.NewSectionReader(f, part.from, part.to-part.from)); err != nil {
			t.Fatal(err)
		}
	}
	if got := hex.EncodeToString(whole.Sum(nil)); got != pkgSum {
		t.Errorf("package %s: sha256 %s, the token says %s", path, got, pkgSum)
	}
	if got := hex.EncodeToString(entry.Sum(nil)); got != fileSum {
		t.Errorf("package entry: sha256 %s, the stored file's is %s", got, fileSum)
	}
}
