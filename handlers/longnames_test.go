package handlers_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers/storage/ocfl/ocfltest"
	"github.com/ingestq/ingestq/internal/redact"
	"github.com/ingestq/ingestq/internal/s3test"
	"github.com/ingestq/ingestq/reactor/queue"
)

// A name intake takes (at most 1,024 bytes) that is too long for a key of
// the S3 primary fails its job at Processing, naming the file, its length,
// the target and the limit, and nothing of it is stored in either target;
// a long name that fits is stored in both. versitygw holds longer keys
// than AWS: the limit is the place's, not the server's answer.
func TestNameTooLongForS3FailsAtProcessing(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t) // not parallel: the AWS_* variables are the process's
	primary, replica := srv.URL(srv.Addr, "ocfl"), t.TempDir()
	r := newRig(t, nil, withStorage(primary, replica))
	// The key: "ocfl/", the object's root (76 bytes), "/v1/content/producer/"
	// (21), then the name: at most 922 bytes of it fit in AWS's 1,024.
	fits, over := longName(900), longName(950)
	r.checkRefusedAtProcessing([]object{{fits: []byte("fits\n")}, {over: []byte("too long for S3\n")}}, over, []string{primary, replica},
		redact.Location(primary), "a name of 959 bytes", "its S3 key", "would be 1052 bytes, 28 over the limit",
		"AWS S3 keys are at most 1024 bytes", "28 bytes shorter")
}

// The same for a local OCFL root whose own path is long: the file's path
// there would pass PATH_MAX.
func TestNameTooLongForALocalRootFailsAtProcessing(t *testing.T) {
	t.Parallel()
	root := deepFolder(t, 3050)
	r := newRig(t, nil, withStorage(root))
	// The path: the root, "/", the object's root (76), "/v1/content/producer/"
	// (21), then the name (its file's name longer than the temporary one
	// written beside it first).
	fits, over := longName(500), longName(1000)
	path := len(root) + 98 + len(over)
	r.checkRefusedAtProcessing([]object{{fits: []byte("fits\n")}, {over: []byte("too long for this root\n")}}, over, []string{root},
		root, "a name of 1009 bytes", fmt.Sprintf("its path (the place's folder, then the key, or the temporary file written beside it) would be %d bytes, %d over the limit", path, path-4095),
		"a path on Linux is at most 4095 bytes (PATH_MAX", fmt.Sprintf("%d bytes shorter", path-4095))
}

// checkRefusedAtProcessing submits objs as a batch: the object holding the
// file named over fails at Processing, tried once, with a message holding
// the quoted name and each of want; nothing of it is stored in any of
// targets; every other object is stored in all of them.
func (r *rig) checkRefusedAtProcessing(objs []object, over string, targets []string, want ...string) {
	t := r.t
	b, lines := r.submitBatch("long", objs)
	r.waitBatch(b.ID, queue.Completed, queue.Failed)
	var storedRoots []string
	for key, j := range r.jobsOf(b.ID) {
		i := slices.IndexFunc(lines, func(l row) bool { return strings.HasSuffix(key, l.url) })
		if _, refused := objs[i][over]; !refused {
			ark := r.checkStored(j, objs[i])
			r.checkCopies(j, ark, 1, targets...)
			storedRoots = append(storedRoots, ocfltest.ObjectRoot(ark)+"/")
			continue
		}
		if j.State() != queue.Failed {
			t.Fatalf("job %s with a name of %d bytes is %s (%s); want Failed at Processing", j.ID, len(over), j.State(), j.Status.Message)
		}
		for _, w := range append(want, strconv.Quote("producer/"+over)) {
			if !strings.Contains(j.Status.Message, w) {
				t.Errorf("job %s: message %q does not say %q", j.ID, j.Status.Message, w)
			}
		}
		var steps []string
		for _, e := range r.jobEvents(j.ID) {
			if e.Kind == events.KindJob && e.From != "" {
				steps = append(steps, e.From+"→"+e.To)
			}
		}
		if len(steps) == 0 || steps[len(steps)-1] != "Processing→Failed" {
			t.Errorf("job %s moved %v; want it failed from Processing", j.ID, steps)
		}
	}
	for _, target := range targets {
		for _, k := range allKeys(t, target) {
			if strings.Count(k, "/") >= 3 && !slices.ContainsFunc(storedRoots, func(root string) bool { return strings.HasPrefix(k, root) }) {
				t.Errorf("%s holds %s, of no stored object", target, k)
			}
		}
	}
}

// longName is a file name of n bytes that intake takes (checkm.CleanName):
// folders of 200 bytes, then a file of at most 206.
func longName(n int) string {
	var b strings.Builder
	for b.Len()+206 < n {
		b.WriteString(strings.Repeat("f", 200) + "/")
	}
	b.WriteString(strings.Repeat("x", n-b.Len()-len(".txt")) + ".txt")
	return b.String()
}

// deepFolder is a path of n bytes in a temporary folder, not made.
func deepFolder(t *testing.T, n int) string {
	dir := t.TempDir()
	for len(dir) < n {
		dir = filepath.Join(dir, strings.Repeat("d", max(1, min(200, n-len(dir)-1))))
	}
	return dir
}

// A name that fits its targets at Processing no longer fits one at Storing
// when another deposit of the object made its next version number longer
// meanwhile (v9 to v10: a byte more in every path). Storing refuses it by
// Processing's rule (checkFits), under the object's lock, before any
// target is written: the job fails there once, its message naming the
// file, its length, the target, the limit and the bytes to take off, and
// neither the primary (whose roomy root would take it) nor the replica
// holds a tenth version.
func TestNameThatNoLongerFitsAtStoringFailsThere(t *testing.T) {
	t.Parallel()
	// The replica's root is deep: a name of 200 bytes fits in its v9
	// content folder to PATH_MAX's byte (the root, "/", the object's root
	// (76), "/v9/content/producer/" (21), the name).
	const nameLen = 200
	primary, replica := t.TempDir(), deepFolder(t, 4095-98-nameLen)
	long := strings.Repeat("x", nameLen-len(".txt")) + ".txt"
	const ark = "ark:/99999/fk4tenthversion"
	reached, release := make(chan string, 1), make(chan struct{})
	var storingRuns atomic.Int32
	r := newRig(t, nil, withStorage(primary, replica), beforeStep(queue.Storing, func(j *queue.Job) {
		if !strings.Contains(j.Config.PayloadURL, "/long/") {
			return
		}
		if storingRuns.Add(1) > 1 {
			return
		}
		reached <- j.ID
		select {
		case <-release:
		case <-t.Context().Done():
		}
	}))
	deposit := func(n int) {
		t.Helper()
		b := r.submit(r.content.put(fmt.Sprintf("/v%d/f.txt", n), []byte(fmt.Sprintf("version %d\n", n))), "primary_id", ark)
		if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
			t.Fatalf("deposit %d of %s: batch %s (%s)", n, ark, b.State(), r.jobsOf(b.ID)["file"].Status.Message)
		}
	}
	for n := 1; n <= 8; n++ {
		deposit(n)
	}
	// The long name at Processing: the object at v8, its next v9, which fits.
	b := r.submit(r.content.put("/long/"+long, []byte("a long name\n")), "primary_id", ark)
	select {
	case <-reached:
	case <-time.After(faultWait):
		t.Fatalf("the deposit of the long name reached no Storing in %v", faultWait)
	}
	deposit(9) // lands first: the long name's next version is v10
	close(release)
	r.waitBatch(b.ID, queue.Completed, queue.Failed)
	j := r.jobsOf(b.ID)["file"]
	for _, want := range []string{"Storing: storage target " + replica, strconv.Quote("producer/" + long), "version 10",
		fmt.Sprintf("a name of %d bytes", len("producer/"+long)), "would be 4096 bytes, 1 over the limit",
		"a path on Linux is at most 4095 bytes (PATH_MAX", "nothing was stored", "1 bytes shorter"} {
		if j.State() != queue.Failed || !strings.Contains(j.Status.Message, want) {
			t.Errorf("job %s: %s %q; want Failed, its message saying %q", j.ID, j.State(), j.Status.Message, want)
		}
	}
	if n := storingRuns.Load(); n != 1 {
		t.Errorf("Storing ran %d times for the long name, want once: no retry can store it", n)
	}
	for _, target := range []string{primary, replica} {
		if v, err := openTarget(t, target).Latest(t.Context(), ark); err != nil || v.Number != 9 {
			t.Errorf("%s in %s: version %d (%v), want 9: nothing of the refused deposit stored", ark, target, v.Number, err)
		}
		for _, k := range objectKeys(t, target, ark) {
			if strings.HasPrefix(k, "v10") || strings.Contains(k, long) {
				t.Errorf("%s holds %s of the refused deposit", target, k)
			}
		}
	}
	deposit(10) // the object's next deposit is stored as its tenth version
}
