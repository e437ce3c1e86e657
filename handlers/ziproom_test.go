package handlers_test

import (
	"archive/zip"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// zipRoomRig is a rig whose working storage is work, a smallDisk (margin
// 1), its steps seen waiting through the waitsSeen it returns, and opts
// its hooks.
func zipRoomRig(t *testing.T, work string, opts ...rigOption) (*rig, waitsSeen) {
	obs := waitsSeen{states: make(chan queue.State, 1000), stored: func() {}}
	return newRig(t, nil, append([]rigOption{withAttempts(2, 10*time.Millisecond),
		func(hc *handlers.Config, rc *reactor.Config) { hc.WorkDir, hc.Margin, rc.Observer = work, 1, obs }}, opts...)...), obs
}

// waitsForRoomThenCompletes: batch bid's one job waits in Downloading,
// its message Provisioning's words and the size of its expandingZip of 3
// files, until free() makes room; then it completes with them.
func (r *rig) waitsForRoomThenCompletes(bid string, obs waitsSeen, free func()) {
	r.t.Helper()
	t := r.t.(*testing.T)
	obs.waited(t, queue.Downloading, 1, "room to unpack the zip")
	for _, j := range r.jobsOf(bid) {
		if msg := j.Status.Message; !strings.HasPrefix(msg, "waiting for room: ") || !strings.Contains(msg, "unpacks to 2700000 bytes in 3 files, as its entries' headers say") {
			t.Errorf("the waiting job's message %q, want Provisioning's words and the zip's size", msg)
		}
	}
	free()
	r.completesWithExpandingZip(bid, 3)
}

// A zip that fits the working storage but not the room another job holds
// there now waits in Downloading, as Provisioning holds a job, and is
// unpacked once the room is back. It failed ("unpacks to 2700000 bytes, …
// more than the working storage has free"), though it would have fitted
// a minute later: one rule for room at Provisioning, another here.
func TestZipWaitsForRoomAnotherJobHolds(t *testing.T) {
	t.Parallel()
	work := smallDisk(t)
	held := filepath.Join(work, "another-jobs-files")
	if err := os.WriteFile(held, make([]byte, 2_000_000), 0o640); err != nil {
		t.Fatal(err)
	}
	r, obs := zipRoomRig(t, work)
	b := r.submit(r.content.put("/fits-later.zip", expandingZip(t, 3)))
	r.waitsForRoomThenCompletes(b.ID, obs, func() {
		if err := os.Remove(held); err != nil {
			t.Fatal(err)
		}
	})
}

// Two zips unpacked at once on one host, each fitting the free space alone
// but not both: the second counts the first's headers as taken and waits
// for it, and both complete. Each saw the same free space, both passed the
// check, and they filled the disk together: one failed as overran.
func TestZipsUnpackedAtOnceTakeTurns(t *testing.T) {
	t.Parallel()
	work := smallDisk(t)
	// Both jobs start Downloading before either unpacks.
	var arrived sync.WaitGroup
	arrived.Add(2)
	var first sync.Map
	r, obs := zipRoomRig(t, work, beforeStep(queue.Downloading, func(j *queue.Job) {
		if _, again := first.LoadOrStore(j.ID, true); !again {
			arrived.Done()
			arrived.Wait()
		}
	}))
	bids := []string{r.submit(r.content.put("/one.zip", expandingZip(t, 3))).ID,
		r.submit(r.content.put("/two.zip", expandingZip(t, 3))).ID}
	for _, bid := range bids {
		b := r.waitBatch(bid, queue.Completed, queue.Failed)
		for _, j := range r.jobsOf(bid) {
			if j.State() != queue.Completed {
				t.Errorf("job %s (%s), want Completed", j.State(), j.Status.Message)
			}
		}
		if b.State() != queue.Completed {
			t.Errorf("batch %s (%s), want Completed", b.State(), b.Status.Message)
		}
	}
	if len(obs.states) == 0 {
		t.Error("no step waited: both zips were unpacked at once")
	}
}

// What an earlier run unpacked and Storing then took by a hard link into
// the primary storage frees nothing when it is replaced: its blocks stay
// in the storage. Counted as room, the zip passed the check and filled the
// disk, failing as overran; now it waits until the room is there.
func TestZipUnpackedAgainOverHardLinksCountsThemAsTaken(t *testing.T) {
	t.Parallel()
	work := smallDisk(t)
	stored := filepath.Join(work, "primary-storage")
	if err := os.Mkdir(stored, 0o750); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	r, obs := zipRoomRig(t, work, beforeStep(queue.Downloading, func(j *queue.Job) {
		once.Do(func() {
			// Two of the three files, as an earlier run left them, linked
			// into the storage as Storing links them.
			dir := filepath.Join(work, j.ID, "producer", "big")
			if err := os.MkdirAll(dir, 0o750); err != nil {
				t.Error(err)
			}
			for i := range 2 {
				name := fmt.Sprintf("f%d.bin", i)
				if err := os.WriteFile(filepath.Join(stored, name), make([]byte, 900_000), 0o640); err != nil {
					t.Error(err)
				}
				if err := os.Link(filepath.Join(stored, name), filepath.Join(dir, name)); err != nil {
					t.Error(err)
				}
			}
		})
	}))
	b := r.submit(r.content.put("/linked.zip", expandingZip(t, 3)))
	r.waitsForRoomThenCompletes(b.ID, obs, func() {
		if err := os.RemoveAll(stored); err != nil {
			t.Fatal(err)
		}
	})
}

// A zip of many small files is counted with each file's last block whole,
// as the disk takes them: 1,500 files of one byte fill 6 MB of 4 KiB
// blocks, more than a smallDisk holds, and the zip is refused unwritten.
// Counted at their 1,500 bytes, it passed and filled the disk, failing as
// overran; 70,000 files of 100 bytes would take 280 MB, not 7 MB.
func TestZipOfManySmallFilesCountsTheirBlocks(t *testing.T) {
	t.Parallel()
	work := smallDisk(t)
	r, obs := zipRoomRig(t, work)
	small := map[string][]byte{}
	for i := range 1500 {
		small[fmt.Sprintf("small/%04d.txt", i)] = []byte("x")
	}
	url := r.content.put("/many-small.zip", zipEntries(t, small, zip.Store))
	b := r.waitBatch(r.submit(url).ID, queue.Completed, queue.Failed)
	want := "Downloading: container " + url + ": unpacks to 1500 bytes in 1500 files, as its entries' headers say " +
		"(6145500 bytes of disk, each file's last 4096-byte block whole), more than the working storage can ever give it ("
	for _, j := range r.jobsOf(b.ID) {
		if msg := j.Status.Message; j.State() != queue.Failed || !strings.HasPrefix(msg, want) || !strings.HasSuffix(msg, "nothing was unpacked") {
			t.Errorf("job %s (%s), want Failed, its message starting %q and saying nothing was unpacked", j.State(), msg, want)
		}
	}
	if len(obs.states) > 0 {
		t.Errorf("%s waited for room", <-obs.states)
	}
}
