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

// A zip whose headers give more than the working storage (a 4 MiB tmpfs
// of its own) holds is refused before it writes a byte, naming the
// container and the sizes, and a job beside it never finds the disk full:
// it was unpacked until the disk was full, and every job of the host found
// no room, until its job failed for taking more than its estimate.
func TestZipBiggerThanTheFreeSpaceIsRefusedUnwritten(t *testing.T) {
	t.Parallel()
	work := smallDisk(t)
	obs := waitsSeen{states: make(chan queue.State, 100), stored: func() {}}
	r := newRig(t, nil, withAttempts(2, 10*time.Millisecond),
		func(hc *handlers.Config, rc *reactor.Config) { hc.WorkDir, hc.Margin, rc.Observer = work, 1, obs })
	url := r.content.put("/expands.zip", expandingZip(t, 7))
	bomb := r.submit(url)
	beside := r.submitObject("/beside.checkm", object{"a.txt": []byte("alpha\n")})
	if b := r.waitBatch(bomb.ID, queue.Completed, queue.Failed); b.State() != queue.Failed {
		t.Fatalf("batch %s (%s), want Failed", b.State(), b.Status.Message)
	}
	for _, j := range r.jobsOf(bomb.ID) {
		want := "Downloading: container " + url + ": unpacks to 6300000 bytes in 7 files, as its entries' headers say " +
			"(6328672 bytes of disk, each file's last 4096-byte block whole), more than the working storage can ever give it ("
		if msg := j.Status.Message; !strings.HasPrefix(msg, want) || !strings.Contains(msg, "nothing was unpacked") {
			t.Errorf("the job's message %q, want it to start %q and say nothing was unpacked", msg, want)
		}
	}
	if b := r.waitBatch(beside.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("the batch beside %s (%s), want Completed", b.State(), b.Status.Message)
	}
	if len(obs.states) > 0 {
		t.Errorf("%s waited for room: the zip took it", <-obs.states)
	}
}

// A zip that unpacks to more than the working storage holds, on a file
// system that says it has room (a quota, thin provisioning), fails its job
// when the disk is full, and what it unpacked goes with it, so that the
// next job on the host has room. Downloading waited for room the job took
// itself, again and again, with every other job of the host behind it.
func TestZipBiggerThanTheWorkingStorageLeavesItsRoom(t *testing.T) {
	t.Parallel()
	work := smallDisk(t)
	r := newRig(t, nil, withAttempts(2, 10*time.Millisecond), func(hc *handlers.Config, _ *reactor.Config) {
		hc.WorkDir, hc.Margin = work, 1
		hc.Space = func(string) (free, total uint64, err error) { return 1 << 40, 2 << 40, nil }
	})
	b := r.submit(r.content.put("/expands.zip", expandingZip(t, 7)))
	r.overranThenRoom(b.ID, `entry "big/f`, "what its zip unpacks to is not in its estimate, the zip's size")
}

// A zip unpacked again over what an earlier run unpacked (a crash cut it
// short) counts that run's files as room: they are replaced. Counted as
// taken, they made a zip that fits refused, once the crash had written
// enough of it.
func TestZipUnpackedAgainCountsItsEarlierFilesAsRoom(t *testing.T) {
	t.Parallel()
	work := smallDisk(t)
	var crashed atomic.Bool
	r := newRig(t, nil, withAttempts(2, 10*time.Millisecond),
		func(hc *handlers.Config, _ *reactor.Config) { hc.WorkDir, hc.Margin = work, 1 },
		beforeStep(queue.Downloading, func(j *queue.Job) {
			if !crashed.CompareAndSwap(false, true) {
				return
			}
			// What a run that died after two of the three files left.
			dir := filepath.Join(work, j.ID, "producer", "big")
			if err := os.MkdirAll(dir, 0o750); err != nil {
				t.Error(err)
			}
			for i := range 2 {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.bin", i)), make([]byte, 900_000), 0o640); err != nil {
					t.Error(err)
				}
			}
		}))
	r.completesWithExpandingZip(r.submit(r.content.put("/again.zip", expandingZip(t, 3))).ID, 3)
}

// completesWithExpandingZip: batch bid ends Completed, its one job's
// version holding the n files of its expandingZip.
func (r *rig) completesWithExpandingZip(bid string, n int) {
	t := r.t
	t.Helper()
	b := r.waitBatch(bid, queue.Completed, queue.Failed)
	jobs := r.jobsOf(b.ID)
	if len(jobs) != 1 {
		t.Fatalf("batch %s (%s): %d jobs, want 1", b.State(), b.Status.Message, len(jobs))
	}
	for _, j := range jobs {
		if j.State() != queue.Completed {
			t.Fatalf("job %s (%s), want Completed", j.State(), j.Status.Message)
		}
		v, err := r.p.Primary().Latest(t.Context(), j.Identifiers.PrimaryID)
		if err != nil {
			t.Fatal(err)
		}
		stored := map[string]string{}
		for _, f := range v.Files {
			stored[f.Name] = f.SHA256
		}
		for i := range n {
			if name := fmt.Sprintf("producer/big/f%d.bin", i); stored[name] != sha256hex(make([]byte, 900_000)) {
				t.Errorf("%s stored with sha256 %q, want that of 900,000 zeros", name, stored[name])
			}
		}
	}
}

// expandingZip is a zip of a few KB that unpacks to n files of 900 KB
// (7 are more than a smallDisk holds), under the ratio limit's floor of 1 MiB.
func expandingZip(t *testing.T, n int) []byte {
	var zipped bytes.Buffer
	zw := zip.NewWriter(&zipped)
	for i := range n {
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
	return zipped.Bytes()
}
