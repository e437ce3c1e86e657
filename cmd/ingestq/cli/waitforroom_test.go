package cli_test

import (
	"archive/zip"
	"bytes"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingestq/ingestq/cmd/ingestq/cli"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// README's by-hand path on a disk 85 % full: the daemon holds the four jobs
// back in Provisioning, and submit --wait says so in one note (the count,
// the job's message, what to do), however many polls find them waiting;
// once there is room, it follows the batch to its report.
func TestSubmitWaitNotesJobsWaitingForRoom(t *testing.T) {
	// Not parallel: it replaces the daemon's view of the disk.
	web := demoWeb(t)
	// 85 % full, 15 GiB free: only --max-fill (as a daemon has it by
	// default; serve's helper lifts it) holds a job back.
	bid, stderr, code, notes := submitWaitingForRoom(t, 15<<30, "Provisioning", web.URL+"/batch.checkm", "--max-fill", "0.8")
	wantCode(t, code, 1) // the sample's wrong digest fails one job, so the batch
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

// A zip that fits the working storage but not the room left in it waits in
// Downloading (Provisioning let it on for its own size), and submit --wait
// names it in one note, in the daemon's words, whatever the polls that
// find it waiting; once there is room, the zip is unpacked and the batch
// reports.
func TestSubmitWaitNotesAZipWaitingForRoom(t *testing.T) {
	// Not parallel: it replaces the daemon's view of the disk. 4 MiB free:
	// room for the zip and the 1 MiB margin, not for its 8 MiB unpacked.
	var zipped bytes.Buffer
	zw := zip.NewWriter(&zipped)
	w, err := zw.Create("mostly-zeros.bin")
	if err != nil {
		t.Fatal(err)
	}
	// A random byte in every 64: a zip of 334 KB (25:1), well within the
	// 1000:1 a zip bomb is refused at.
	data := make([]byte, 8<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < len(data); i += 64 {
		data[i] = byte(rng.Uint32())
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "z.zip", time.Time{}, bytes.NewReader(zipped.Bytes()))
	}))
	t.Cleanup(web.Close)
	bid, stderr, code, notes := submitWaitingForRoom(t, 4<<20, "Downloading", web.URL+"/z.zip", "--space-margin", "1MiB")
	wantCode(t, code, 0)
	want := regexp.MustCompile(`^note: job jid\d+ of batch ` + bid + ` waits in Downloading to unpack its zip: ` +
		regexp.QuoteMeta("waiting for room: 4 MiB free, needs 8 MiB + 1 MiB margin (--space-margin; over 100% full, --max-fill 100% with the job); "+
			"container "+web.URL+"/z.zip unpacks to 8388608 bytes in 1 files, as its entries' headers say (8392704 bytes of disk, "+
			"each file's last 4096-byte block whole); free some space on the daemon's working storage (it keeps --space-margin free beyond each job's estimate)") + `$`)
	if len(notes) != 1 || !want.MatchString(notes[0]) {
		t.Errorf("notes %q, want one matching %s", notes, want)
	}
	if !strings.Contains(stderr, "1/1 jobs finished (1 completed, 0 failed)") {
		t.Errorf("the batch did not finish once there was room:\n%s", stderr)
	}
}

// submitWaitingForRoom serves a daemon (with serveArgs) whose working
// storage has free bytes of 100 GiB, and runs submit --wait of payload
// until it has noted why jobs wait and read a job still waiting in state
// twice since (each poll that reads a waiting job logs it, at debug); then
// the storage has room. It returns the batch's bid, the command's stderr
// and exit code, and the notes it wrote.
func submitWaitingForRoom(t *testing.T, free uint64, state, payload string, serveArgs ...string) (bid, stderr string, code int, notes []string) {
	t.Helper()
	var room atomic.Bool
	cli.SetDiskSpace(t, func(string) (uint64, uint64, error) {
		if room.Load() {
			return 90 << 30, 100 << 30, nil
		}
		return free, 100 << 30, nil
	})
	e := newEnv(t)
	nats := closedAddr(t)
	serve(t, zktest.Shared(t).Addr, e.root, append([]string{"--nats-listen", nats, "--provision-wait", "50ms"}, serveArgs...)...)
	c := runBackground(t, "--zk", zktest.Shared(t).Addr, "--zk-root", e.root, "--nats", "nats://"+nats, "--log-level", "debug",
		"submit", "--profile", "demo", "--wait", payload)
	c.waitFor(t, "did not read a job waiting in "+state+" twice after a note", func(_, stderr string) bool {
		_, after, noted := strings.Cut(stderr, "note: ")
		return noted && strings.Count(after, "submit --wait: the job longest in "+state) >= 2
	})
	room.Store(true)
	out, stderr, code := c.exit(t)
	t.Logf("stdout:\n%sstderr:\n%s", out, stderr)
	bid, _, _ = strings.Cut(out, "\n")
	return bid, stderr, code, regexp.MustCompile(`(?m)^note: .*$`).FindAllString(stderr, -1)
}
