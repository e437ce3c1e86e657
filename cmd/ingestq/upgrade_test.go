//go:build linux

package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingestq/ingestq/internal/natstest"
)

// previousRelease is the commit of the last release, whose daemons run
// beside this build's in TestRollingUpgradeFromThePreviousRelease. Move it
// to the new release's commit at each release.
const previousRelease = "ceb5bfcbeacf1efc3ed2e4d70c9759e8c3016743"

// upgradeJobs is each batch's size there: small, to keep the test short.
const upgradeJobs = 8

// A rolling upgrade without a hold (README, "A rolling upgrade"): a cluster
// of two daemons of the previous release and one of this build, whose old
// ones are replaced one by one by this build's (SIGTERM, then the new
// binary on the same host name, data folder and NATS addresses), with a
// batch submitted just before each restart and one after. Every batch
// completes with one report, every timeline is whole in the stream, no
// daemon exits with an error, check is clean, and the stream, which the
// old daemons rewrite without naming its queue (decision 385), names it
// again at the end, adopted a bounded number of times.
func TestRollingUpgradeFromThePreviousRelease(t *testing.T) {
	t.Parallel()
	old := buildPreviousRelease(t)
	start := time.Now()
	r := newClusterRig(t)
	for name, bin := range map[string]string{"d1": old, "d2": old, "d3": ""} { // "": this build
		r.launch(name, daemonConfig{Bin: bin}, natstest.FreeAddr(t), natstest.FreeAddr(t))
	}
	r.waitJoined("d1", "d2", "d3")
	r.waitStream("d3", 3, "")
	t.Logf("d1 and d2 of %s, d3 of this build clustered after %v", previousRelease, time.Since(start).Round(time.Millisecond))

	var bids []string
	for _, name := range []string{"d1", "d2"} {
		// The previous restart moved the stream's leader: a publish caught
		// in that move waits out its 15 s ack timeout (decision 397), and a
		// daemon stopped meanwhile counts it lost. Each host is stopped
		// once every daemon's events are taken, as an operator restarts the
		// next host once the last is back (decision 398).
		r.waitEventsTaken("d1", "d2", "d3")
		bids = append(bids, createBatch(t, r.q, upgradeJobs)) // runs while name restarts
		r.restart(name)
		t.Logf("%s upgraded after %v", name, time.Since(start).Round(time.Millisecond))
	}
	bids = append(bids, createBatch(t, r.q, upgradeJobs))
	batches := r.finish(bids, upgradeJobs)
	all := []string{"d1", "d2", "d3"}
	r.waitEventsTaken(all...)
	r.assertEveryTimeline(batches, r.listeners(all...))
	if out, err := r.cli("check"); err != nil {
		t.Errorf("ingestq check after the upgrade: %v\n%s", err, out)
	}
	// "ingestq_queue" is events' metaQueue, the stream's note of its queue.
	if info := r.streamInfo("d1"); info == nil || info.Config.Metadata["ingestq_queue"] == "" {
		t.Errorf("after the upgrade the event stream names no queue (stream info %+v)", info)
	}
	// An old daemon rewrites the stream without its queue whenever it
	// settles it (its start, a change of the cluster); a new one adopts it
	// again when it settles it in turn: at most once per change of the
	// cluster, of which there were five (three started, two replaced).
	const adoptionsAtMost = 5
	for _, name := range all {
		h := r.hosts[name]
		adopted := h.logLines("the stream named no queue")
		if len(adopted) > adoptionsAtMost {
			t.Errorf("%s adopted the stream %d times, want at most %d (a loop with the old daemons?); first: %s",
				name, len(adopted), adoptionsAtMost, adopted[0])
		}
		if l := h.logLines("recorded another queue's events"); len(l) > 0 {
			t.Errorf("%s took the stream of its own queue for another queue's: %s", name, l[0])
		}
		t.Logf("%s adopted the stream %d times", name, len(adopted))
	}
	for _, name := range all {
		r.hosts[name].stop(30 * time.Second)
		r.hosts[name].assertNoLoss()
	}
	t.Logf("rolling upgrade tested in %v", time.Since(start).Round(time.Millisecond))
}

// previousBuild makes one test at a time build the previous release.
var previousBuild sync.Mutex

// buildPreviousRelease builds cmd/ingestq as of previousRelease, as TestMain
// builds this one, from the repository's git history (git archive, so the
// working tree is untouched), beside ingestqBin: later tests of the same run
// reuse it, and the build cache makes later runs cheap.
func buildPreviousRelease(t *testing.T) string {
	t.Helper()
	// Two parallel tests ask for it: the second waits for the first's
	// build, then finds its binary (a CI run failed when both built at once
	// and the second's rename found its .tmp renamed by the first).
	previousBuild.Lock()
	defer previousBuild.Unlock()
	bin := filepath.Join(filepath.Dir(ingestqBin), "ingestq-"+previousRelease)
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if out, err := exec.Command("git", "cat-file", "-e", previousRelease+"^{commit}").CombinedOutput(); err != nil {
		why := "it is not in this clone's git history"
		if shallow, _ := exec.Command("git", "rev-parse", "--is-shallow-repository").Output(); strings.TrimSpace(string(shallow)) == "true" {
			why = "this clone is shallow (made with --depth) and does not have it"
		}
		t.Fatalf("the previous release's commit %s (previousRelease in upgrade_test.go), whose daemons the rolling upgrade "+
			"runs: %s (git cat-file: %v, %s); fetch the whole history with git fetch --unshallow",
			previousRelease, why, err, strings.TrimSpace(string(out)))
	}
	took := time.Now()
	src := t.TempDir()
	archive := filepath.Join(src, "src.tar")
	gitArchive := exec.Command("git", "archive", "-o", archive, previousRelease)
	gitArchive.Dir = filepath.Join("..", "..") // the whole tree, not this folder's
	if out, err := gitArchive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", previousRelease, err, out)
	}
	if out, err := exec.Command("tar", "-xf", archive, "-C", src).CombinedOutput(); err != nil {
		t.Fatalf("unpack %s's sources: %v\n%s", previousRelease, err, out)
	}
	// -trimpath: the folder's name stays out of the build cache's keys.
	flags := append([]string{"build", "-trimpath"}, buildFlags...)
	tmp := bin + ".tmp" // renamed once whole: a build cut short is not reused
	build := exec.Command("go", append(flags, "-o", tmp, "./cmd/ingestq")...)
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %s of %s: %v\n%s", buildHow, previousRelease, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	t.Logf("built %s of %s in %v", buildHow, previousRelease, time.Since(took).Round(time.Millisecond))
	return bin
}
