package handlers_test

import (
	"errors"
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
