package cli_test

import (
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ingestq/ingestq/cmd/ingestq/cli"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// README's by-hand path on a disk 85 % full: the daemon holds the four jobs
// back in Provisioning, and submit --wait says so in one note (the count,
// the job's message, what to do), however many polls find them waiting;
// once there is room, it follows the batch to its report.
func TestSubmitWaitNotesJobsWaitingForRoom(t *testing.T) {
	// Not parallel: it replaces the daemon's view of the disk.
	var room atomic.Bool
	cli.SetDiskSpace(t, func(string) (free, total uint64, err error) {
		if room.Load() {
			return 90 << 30, 100 << 30, nil
		}
		return 15 << 30, 100 << 30, nil // 85 % full, 15 GiB free: only --max-fill holds a job back
	})
	e := newEnv(t)
	nats := closedAddr(t)
	// --max-fill as a daemon has it by default (serve's helper lifts it).
	serve(t, zktest.Shared(t).Addr, e.root, "--nats-listen", nats, "--max-fill", "0.8", "--provision-wait", "50ms")
	web := demoWeb(t)

	c := runBackground(t, "--zk", zktest.Shared(t).Addr, "--zk-root", e.root, "--nats", "nats://"+nats, "--log-level", "debug",
		"submit", "--profile", "demo", "--wait", web.URL+"/batch.checkm")
	// Each poll that reads a waiting job logs it (debug): the note, then
	// two more polls of jobs still waiting.
	c.waitFor(t, "did not read a waiting job twice after a note", func(_, stderr string) bool {
		_, after, noted := strings.Cut(stderr, "note: ")
		return noted && strings.Count(after, "submit --wait: the job longest in Provisioning") >= 2
	})
	room.Store(true)
	out, stderr, code := c.exit(t)
	wantCode(t, code, 1) // the sample's wrong digest fails one job, so the batch
	t.Logf("stdout:\n%sstderr:\n%s", out, stderr)
	bid, _, _ := strings.Cut(out, "\n")
	notes := regexp.MustCompile(`(?m)^note: .*$`).FindAllString(stderr, -1)
	want := "note: 4 jobs of batch " + bid + " wait in Provisioning: waiting for room: 85% full, --max-fill 80% (with the job; " +
		"15360 MiB free, needs 0 MiB + 64 MiB margin); free some space on the daemon's working storage, or raise its --max-fill " +
		"(1: only --space-margin holds a job back)"
	if len(notes) != 1 || notes[0] != want {
		t.Errorf("notes %q, want one: %q", notes, want)
	}
	if !strings.Contains(stderr, "4/4 jobs finished (3 completed, 1 failed)") {
		t.Errorf("the batch did not finish once there was room:\n%s", stderr)
	}
}
