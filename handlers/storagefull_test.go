package handlers_test

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// smallDisk mounts a 4 MiB tmpfs of the test's own and returns its folder;
// it needs root (as CI runs the tests), else the test skips.
func smallDisk(t *testing.T) string {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=4m"); err != nil {
		t.Skipf("a tmpfs of the test's own needs root: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// fillAt fills file's disk as the first job starts state's step; it stays
// full until the test removes file.
func fillAt(t *testing.T, state queue.State, file string) rigOption {
	var filled atomic.Bool
	return beforeStep(state, func(*queue.Job) {
		if filled.CompareAndSwap(false, true) {
			fillUp(t, file)
		}
	})
}

// fillUp writes file until its disk has no room left (from a step's hook:
// t.Error, not t.Fatal).
func fillUp(t *testing.T, file string) {
	f, err := os.Create(file)
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	for err == nil {
		_, err = f.Write(make([]byte, 64<<10))
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("filling %s: %v, want ENOSPC", file, err)
	}
}

// A local storage target with no room left (a tmpfs of its own, filled as
// the job starts Storing) is a back end out, as an unreachable one:
// Storing waits for room, its attempts unspent, the job's message naming
// the target; once there is room, the job completes. The job failed after
// its attempts ("Storing failed after 2 attempts: … no space left on
// device"), while the working storage's full disk only paused it.
func TestFullStorageTargetWaitsForRoom(t *testing.T) {
	t.Parallel()
	target := smallDisk(t)
	filler := filepath.Join(target, "filler")
	obs := waitsSeen{states: make(chan queue.State, 100), stored: func() {}}
	r := newRig(t, nil, withStorage(target), withAttempts(2, 10*time.Millisecond),
		func(_ *handlers.Config, rc *reactor.Config) { rc.Observer = obs }, fillAt(t, queue.Storing, filler))
	files := object{"a.txt": []byte("alpha\n")}
	b := r.submitObject("/obj.checkm", files)
	obs.waited(t, queue.Storing, 3, "room in the storage target")
	j := r.jobsOf(b.ID)["manifest"]
	if j.State() != queue.Storing || !strings.HasPrefix(j.Status.Message, reactor.WaitingPrefix+": storage target "+target+" is unavailable") ||
		!strings.Contains(j.Status.Message, "no space left on device") {
		t.Fatalf("job %s, message %q: want Storing, waiting for room in the storage target", j.State(), j.Status.Message)
	}
	if err := os.Remove(filler); err != nil { // room again
		t.Fatal(err)
	}
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("batch %s (%s), want Completed", b.State(), b.Status.Message)
	}
	r.checkStored(r.jobsOf(b.ID)["manifest"], files)
}

// A file of no size in its manifest, whose server gives none either and
// sends it without end, fills the working storage (a tmpfs of its own):
// the job fails, naming the file and the bytes it wrote past its room, and
// its partial download goes, so that the next job on the host completes.
// Downloading waited for room the job had taken itself, again and again,
// with every other job of the host behind it.
func TestEndlessUnsizedDownloadFailsItsJobOnly(t *testing.T) {
	t.Parallel()
	work := smallDisk(t)
	endless := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodHead {
			return // no size: a HEAD's writes would be dropped, never failing
		}
		chunk := make([]byte, 64<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				return // the client went
			}
		}
	}))
	t.Cleanup(endless.Close)
	obs := waitsSeen{states: make(chan queue.State, 100), stored: func() {}}
	r := newRig(t, nil, withAttempts(2, 10*time.Millisecond),
		func(hc *handlers.Config, rc *reactor.Config) { hc.WorkDir, hc.Margin, rc.Observer = work, 1, obs })
	b := r.submit(r.content.put("/endless.checkm", manifest("mrt-ingest-manifest",
		row{url: endless.URL + "/endless.bin", name: "endless.bin", size: -1})))
	r.overranThenRoom(b.ID, "producer/endless.bin: download "+endless.URL,
		"more than the room Provisioning found for it (its estimate, 0 bytes, and --space-margin, 1 bytes)",
		"a file of no size in the manifest sent more than its estimate holds (its server gave no size, or a wrong one), or never ends")
	if len(obs.states) > 0 {
		t.Errorf("%s waited for room the job took itself", <-obs.states)
	}
}

// overranThenRoom wants batch bid Failed, its one job's message saying
// the disk was full, what the job wrote removed, and says; then the
// working storage to have room, and a next object to complete.
func (r *rig) overranThenRoom(bid string, says ...string) {
	r.t.Helper()
	if b := r.waitBatch(bid, queue.Completed, queue.Failed); b.State() != queue.Failed {
		r.t.Fatalf("batch %s (%s), want Failed", b.State(), b.Status.Message)
	}
	var msg string
	for _, j := range r.jobsOf(bid) { // its one job
		msg = j.Status.Message
	}
	for _, want := range append(says, "no space left on device", "what it wrote there is removed") {
		if !strings.Contains(msg, want) {
			r.t.Errorf("the job's message %q does not say %q", msg, want)
		}
	}
	if err := r.p.CheckWork(r.t.Context()); err != nil {
		r.t.Fatalf("the working storage after the job failed: %v", err)
	}
	if b := r.waitBatch(r.submitObject("/next.checkm", object{"a.txt": []byte("alpha\n")}).ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		r.t.Fatalf("the next batch %s (%s), want Completed", b.State(), b.Status.Message)
	}
}

// A zip that unpacks to more than the working storage holds (a 4 MiB
// tmpfs of its own) fails its job, and what it unpacked goes with it, so
// that the next job on the host has room. Downloading waited for room the
// job took itself, again and again, with every other job of the host
// behind it.
func TestZipBiggerThanTheWorkingStorageLeavesItsRoom(t *testing.T) {
	t.Parallel()
	work := smallDisk(t)
	r := newRig(t, nil, withAttempts(2, 10*time.Millisecond),
		func(hc *handlers.Config, _ *reactor.Config) { hc.WorkDir, hc.Margin = work, 1 })
	var zipped bytes.Buffer
	zw := zip.NewWriter(&zipped)
	for i := range 7 { // 900 KB each: under the ratio limit's floor of 1 MiB
		w, err := zw.Create(fmt.Sprintf("big/f%d.bin", i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(make([]byte, 900_000)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	b := r.submit(r.content.put("/expands.zip", zipped.Bytes()))
	r.overranThenRoom(b.ID, `entry "big/f`, "what its zip unpacks to is not in its estimate, the zip's size")
}
