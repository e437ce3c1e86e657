package handlers_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/internal/pgtest"
	"github.com/ingestq/ingestq/internal/s3test"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// faultWait bounds a wait for a moment a fault test sets up: only a bug
// waits this long.
const faultWait = 2 * time.Minute

// The S3 server stops in the middle of a Put: every content file of v1 is
// written, its inventory is on the way. The step fails and is retried
// while the server is down; once it is back, the job completes with one
// version in S3 and each content file stored once (the leftover of the
// first try is removed, not kept beside a second copy).
func TestS3StoppedDuringStoring(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t) // not parallel: the AWS_* variables are the process's
	g := s3test.StartGate(t, srv.Addr, "/v1/inventory.json")
	target := srv.URL(g.Addr, "ocfl")
	logs := &logtest.Buffer{}
	r := newRig(t, nil, withStorage(target), withLogs(t, logs), withAttempts(10, 50*time.Millisecond))

	files := object{"a.txt": []byte("alpha\n"), "b/c.txt": []byte("charlie\n"), "d.bin": bytes.Repeat([]byte("delta"), 50_000)}
	b := r.submitObject("/obj.checkm", files)
	select {
	case <-g.Held:
	case <-time.After(faultWait):
		t.Fatalf("no PUT of v1/inventory.json reached S3 in %v", faultWait)
	}
	j := r.jobsOf(b.ID)["manifest"]
	ark := j.Identifiers.PrimaryID
	behind := srv.URL(srv.Addr, "ocfl") // the server itself, not through the gate
	written := objectKeys(t, behind, ark)
	if n := len(slices.DeleteFunc(slices.Clone(written), func(k string) bool { return !strings.HasPrefix(k, "v1/content/") })); n != len(files)+4 || slices.Contains(written, "inventory.json") {
		t.Fatalf("when the server stops, the object holds %v; want the %d content files of v1 and no root inventory", written, len(files)+4)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	g.Release()
	logs.WaitFor(t, "reactor: step failed; retrying", "job="+j.ID, "state=Storing")
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}

	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("batch %s (%s), want Completed once the server is back", b.State(), b.Status.Message)
	}
	r.checkStored(r.jobsOf(b.ID)["manifest"], files)
	r.checkStoredOnce(target, ark)
}

// An upload corrupted on its way to S3 (one byte flipped by a proxy) is
// refused by the checksum sent with it; the step fails, is retried, and
// the object ends stored once, in both copies, and valid.
func TestUploadCorruptedInFlight(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	px := s3test.StartProxy(t, srv.Addr)
	target, replica := srv.URL(px.Addr(), "ocfl"), t.TempDir()
	logs := &logtest.Buffer{}
	r := newRig(t, nil, withStorage(target, replica), withLogs(t, logs), withAttempts(5, 20*time.Millisecond))

	// Only a content file holds a NUL byte: no request head, JSON or
	// system file does, so the byte flipped is in this file's upload.
	files := object{"zeros.bin": make([]byte, 64<<10), "note.txt": []byte("text\n")}
	px.FlipNextZero()
	j := r.deposit("/obj.checkm", files)
	ark := r.checkStored(j, files)
	if px.Flipped() != 1 {
		t.Fatalf("the proxy flipped %d bytes, want 1", px.Flipped())
	}
	logs.WaitFor(t, "reactor: step failed; retrying", "job="+j.ID, "state=Storing", "digest mismatch")
	r.checkCopies(j, ark, 1, target, replica)
	r.checkStoredOnce(target, ark)
}

// A replica that refuses its copy fails the job in Storing after the
// primary's copy is made. Once the replica is mended, a requeue writes
// only the missing copy: no file of the primary's is written again.
func TestRequeueWritesOnlyTheMissingCopy(t *testing.T) {
	t.Parallel()
	svcStore, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	svc, replica := serveFault(t, storage.NewServer(svcStore, nil))
	primary := t.TempDir()
	r := newRig(t, nil, withStorage(primary, replica))

	// Writes only: every target's head is read before the first write.
	svc.writes.Store(true)
	svc.code.Store(http.StatusForbidden)
	files := object{"a.txt": []byte("alpha\n"), "b.txt": []byte("bravo\n")}
	j := r.deposit("/obj.checkm", files)
	if j.State() != queue.Failed || !strings.HasPrefix(j.Status.Message, "Storing") || !strings.Contains(j.Status.Message, "copy 2 of 2") {
		t.Fatalf("job %s %q, want Failed in Storing at copy 2 of 2", j.State(), j.Status.Message)
	}
	ark := j.Identifiers.PrimaryID
	written := fileInfos(t, primary)
	if len(objectKeys(t, primary, ark)) == 0 {
		t.Fatalf("the primary holds nothing of %s after the replica refused", ark)
	}

	svc.code.Store(0)
	r.ingestq("requeue", j.ID)
	r.ingestq("report", j.BatchID)
	if b := r.waitBatch(j.BatchID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("after the requeue: batch %s (%s)", b.State(), b.Status.Message)
	}
	j = r.jobsOf(j.BatchID)["manifest"]
	r.checkStored(j, files)
	if after := fileInfos(t, primary); !sameFiles(after, written) {
		t.Errorf("the requeue wrote to the primary: %d files before, %d after, or some replaced", len(written), len(after))
	}
	if _, err := svcStore.Latest(t.Context(), ark); err != nil {
		t.Errorf("the replica lacks %s after the requeue: %v", ark, err)
	}
	if j.Store == nil || len(j.Store.Copies) != 2 {
		t.Errorf("job %s: store manifest %+v, want 2 copies", j.ID, j.Store)
	}
}

// fileInfos maps every file under dir to its FileInfo.
func fileInfos(t *testing.T, dir string) map[string]os.FileInfo {
	t.Helper()
	out := map[string]os.FileInfo{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		out[p], err = d.Info()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameFiles tells whether two listings of fileInfos hold the same files:
// a file written again (a new file renamed into place) is another file.
func sameFiles(a, b map[string]os.FileInfo) bool {
	return maps.EqualFunc(a, b, os.SameFile)
}

// PostgreSQL restarts while both jobs of a batch are inside their Record
// transactions (each waits on a lock the test holds). The jobs complete,
// and each version is recorded once: one row, its copy and its events
// once.
func TestPostgresRestartedDuringRecording(t *testing.T) {
	t.Parallel()
	pg := pgtest.Start(t)
	db := pgtest.NewDatabase(t, pg)
	r := newRig(t, nil, withInventory(db), withAttempts(10, 50*time.Millisecond))

	conn := pgConnect(t, db)
	tx, err := conn.Begin(t.Context())
	if err == nil {
		_, err = tx.Exec(t.Context(), `LOCK TABLE versions IN ACCESS EXCLUSIVE MODE`)
	}
	if err != nil {
		t.Fatal(err)
	}
	objs := []object{{"one.txt": []byte("1")}, {"two.txt": []byte("22")}}
	b, lines := r.submitBatch("pg", objs)
	// A Record waiting for the table took its object row and local ids:
	// the restart cuts it in the middle of its transaction.
	waitFor(t, "Record of each job waiting to insert its version", func() bool {
		var n int
		err := tx.QueryRow(t.Context(), `SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
			WHERE NOT l.granted AND c.relname = 'versions' AND l.mode = 'RowExclusiveLock'`).Scan(&n)
		return err == nil && n == len(objs)
	})
	if err := pg.Restart(); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(context.Background()) // the restart broke it

	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("batch %s (%s), want Completed", b.State(), b.Status.Message)
	}
	conn = pgConnect(t, db)
	for key, j := range r.jobsOf(b.ID) {
		i := slices.IndexFunc(lines, func(l row) bool { return strings.HasSuffix(key, l.url) })
		ark := r.checkStored(j, objs[i])
		for _, c := range []struct {
			what, query string
			want        int
		}{
			{"versions", `SELECT count(*) FROM versions WHERE ark = $1`, 1},
			{"copies", `SELECT count(*) FROM replicas WHERE ark = $1`, 1},
			{"ingestion events", `SELECT count(*) FROM events WHERE ark = $1 AND type = 'ingestion'`, 1},
			{"identifier assignments", `SELECT count(*) FROM events WHERE ark = $1 AND type = 'identifier assignment'`, 1},
		} {
			var n int
			if err := conn.QueryRow(t.Context(), c.query, ark).Scan(&n); err != nil || n != c.want {
				t.Errorf("%s: %d %s recorded (%v), want %d", ark, n, c.what, err, c.want)
			}
		}
	}
}

// Daemons started at the same moment on one PostgreSQL inventory run its
// migrations together: every one starts, each migration is applied once,
// and every daemon reads the inventory.
func TestDaemonsMigrateAtOnce(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDatabase(t, pgtest.Start(t))
	q := newRig(t, nil).q // a queue for the daemons
	set, err := profile.NewSet(profile.Default())
	if err != nil {
		t.Fatal(err)
	}
	const daemons = 3
	pipelines := make([]*handlers.Pipeline, daemons)
	errs := make([]error, daemons)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range daemons {
		dir := t.TempDir()
		wg.Go(func() {
			<-start
			pipelines[i], errs[i] = handlers.New(context.Background(), handlers.Config{Queue: q, Profiles: set, DataDir: dir, Inventory: db})
		})
	}
	close(start)
	wg.Wait()
	for _, p := range pipelines {
		if p != nil {
			t.Cleanup(func() { _ = p.Close() })
		}
	}
	for i, p := range pipelines {
		if errs[i] != nil {
			t.Fatalf("daemon %d: %v", i, errs[i])
		}
		if _, err := p.Inventory().Object(t.Context(), "ark:/99999/fk4none"); !errors.Is(err, inventory.ErrNotFound) {
			t.Errorf("daemon %d: Object of an unknown ARK: %v, want ErrNotFound", i, err)
		}
	}
	files, err := os.ReadDir("inventory/migrations")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := pgConnect(t, db).Query(t.Context(), `SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	applied, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	want := make([]int, len(files))
	for i := range want {
		want[i] = i + 1
	}
	if !slices.Equal(applied, want) {
		t.Errorf("schema_migrations holds versions %v, want each of %v once", applied, want)
	}
}

// checkStoredOnce asserts that ark's object root in target holds one
// version and each of its content files once: the object's declaration,
// the root and v1 inventories with their sidecars, and v1's content (the
// tests that use it store no two files with one content).
func (r *rig) checkStoredOnce(target, ark string) {
	r.t.Helper()
	v, err := openTarget(r.t, target).Latest(r.t.Context(), ark)
	if err != nil {
		r.t.Fatal(err)
	}
	want := []string{"0=ocfl_object_1.1", "inventory.json", "inventory.json.sha256", "v1/inventory.json", "v1/inventory.json.sha256"}
	for _, f := range v.Files {
		want = append(want, "v1/content/"+f.Name)
	}
	slices.Sort(want)
	if got := objectKeys(r.t, target, ark); !slices.Equal(got, want) {
		r.t.Errorf("%s in %s holds\n%v\nwant exactly\n%v", ark, target, got, want)
	}
}

// waitsSeen is an Observer that reports each step that waited, and runs
// stored (once) when a Storing step is done, before its job moves on.
type waitsSeen struct {
	reactor.Observer
	states chan queue.State
	stored func()
}

func (o waitsSeen) StepRan(s queue.State, r reactor.StepResult, _ time.Duration) {
	switch {
	case r == reactor.StepWait:
		o.states <- s
	case r == reactor.StepDone && s == queue.Storing:
		o.stored()
	}
}
func (waitsSeen) Moved(string, queue.State, string)   {}
func (waitsSeen) Transferred(reactor.Transfer, int64) {}

// waited waits for n steps to have waited, each of state s (for what).
func (o waitsSeen) waited(t *testing.T, s queue.State, n int, what string) {
	t.Helper()
	for range n {
		select {
		case got := <-o.states:
			if got != s {
				t.Fatalf("a step of %s waited; want %s's, for %s", got, s, what)
			}
		case <-time.After(faultWait):
			t.Fatalf("%s did not wait for %s", s, what)
		}
	}
}

// The inventory's PostgreSQL stops as a job is stored, before it gets to
// Recording: the job waits for it in its state, tried again and again with
// its attempts unspent (more tries than the 2 attempts pass without failing
// it), its message saying why; once PostgreSQL is back, it completes.
func TestInventoryOutageWaitsForIt(t *testing.T) {
	t.Parallel()
	pg := pgtest.Start(t)
	db := pgtest.NewDatabase(t, pg)
	obs := waitsSeen{states: make(chan queue.State, 100), stored: sync.OnceFunc(func() {
		if err := pg.Stop(); err != nil {
			t.Error(err)
		}
	})}
	r := newRig(t, nil, withInventory(db), withAttempts(2, 10*time.Millisecond),
		func(_ *handlers.Config, rc *reactor.Config) { rc.Observer = obs })
	b := r.submitObject("/obj.checkm", object{"a.txt": []byte("alpha\n")})
	obs.waited(t, queue.Recording, 4, "the inventory")
	j := r.jobsOf(b.ID)["manifest"]
	if j.State() != queue.Recording || !strings.HasPrefix(j.Status.Message, reactor.WaitingPrefix) || !strings.Contains(j.Status.Message, "the inventory is unavailable") {
		t.Fatalf("job %s, message %q: want Recording, waiting for the inventory", j.State(), j.Status.Message)
	}
	if err := pg.Restart(); err != nil {
		t.Fatal(err)
	}
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("batch %s (%s), want Completed", b.State(), b.Status.Message)
	}
}

// The S3 server answers 503 SlowDown to everything for a while (a minute
// in an operator's walk-through), or 429 Too Many Requests (some
// S3-compatible services throttle with it; its code here is not SlowDown):
// a job reaching Processing, whose minting asks storage whether an ARK is
// taken, waits for it with its attempts unspent (more tries than its 2
// attempts pass), its message saying why; once S3 answers again, it
// completes. Every job of the batch failed in seconds, "Please reduce your
// request rate"; with a 429, until decision 929's review was acted on.
func TestS3BusyWaitsForIt(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t) // not parallel: the AWS_* variables are the process's
	for _, answer := range []s3test.BusyAnswer{
		{Status: http.StatusServiceUnavailable, Code: "SlowDown"},
		{Status: http.StatusTooManyRequests, Code: "TooManyRequests"},
	} {
		t.Run(strconv.Itoa(answer.Status), func(t *testing.T) {
			busy := s3test.StartBusy(t, srv.Addr)
			busy.Answer(answer)
			target := srv.URL(busy.Addr, "ocfl")
			obs := waitsSeen{states: make(chan queue.State, 100), stored: func() {}}
			r := newRig(t, nil, withStorage(target), withAttempts(2, 10*time.Millisecond),
				func(_ *handlers.Config, rc *reactor.Config) { rc.Observer = obs })
			busy.Set(true)
			b := r.submitObject("/obj.checkm", object{"a.txt": []byte("alpha\n")})
			obs.waited(t, queue.Processing, 4, "storage")
			j := r.jobsOf(b.ID)["manifest"]
			if j.State() != queue.Processing || !strings.HasPrefix(j.Status.Message, reactor.WaitingPrefix) || !strings.Contains(j.Status.Message, "storage target") {
				t.Fatalf("job %s, message %q: want Processing, waiting for the storage target", j.State(), j.Status.Message)
			}
			busy.Set(false)
			if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
				t.Fatalf("batch %s (%s), want Completed once S3 answers", b.State(), b.Status.Message)
			}
		})
	}
}

// The S3 server answers 503 SlowDown for one object's file forever and
// serves every other (an object on a lost erasure set): its job waits,
// its attempts unspent, but once S3 has answered another job's step it
// waits alone: storage is no longer counted out (ingestq_backend_out 0)
// and Storing is not paused for the other jobs. Its message says so. Each
// of its tries counted storage out again and paused Storing on the daemon
// for every job, up to a minute at a time. Once S3 serves it, it completes.
func TestS3BusyForOneObjectWaitsAlone(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t) // not parallel: the AWS_* variables are the process's
	busy := s3test.StartBusy(t, srv.Addr)
	target := srv.URL(busy.Addr, "ocfl")
	gauge := "backend=storage target " + target
	obs := watchBackEnds(t)
	r := newRig(t, nil, withStorage(target), withAttempts(2, 10*time.Millisecond), obs.option())
	busy.SetFor("/bad.txt")
	bad := r.submitObject("/bad.checkm", object{"bad.txt": []byte("bad\n")})
	obs.waited(t, queue.Storing, 1, "storage")
	if got := obs.out(t); got[gauge] != 1 {
		t.Errorf("at the first 503, ingestq_backend_out is %v; want 1 for %q", got, gauge)
	}
	good := r.submitObject("/good.checkm", object{"good.txt": []byte("good\n")})
	if b := r.waitBatch(good.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("the other batch %s (%s), want Completed", b.State(), b.Status.Message)
	}
	for len(obs.states) > 0 { // the waits before S3 answered the other job
		<-obs.states
	}
	obs.waited(t, queue.Storing, 3, "storage")
	checkWaiting(t, r.jobsOf(bad.ID)["manifest"], queue.Storing, "storage target "+target+" is unavailable", "bad.txt", "this job alone waits")
	if got := obs.out(t); got[gauge] != 0 {
		t.Errorf("while S3 serves other jobs, ingestq_backend_out is %v; want 0 for %q", got, gauge)
	}
	if n := obs.spent.Load(); n != 0 {
		t.Errorf("steps spent %d attempts; want none", n)
	}
	busy.Set(false)
	if b := r.waitBatch(bad.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("batch %s (%s), want Completed once S3 serves the object", b.State(), b.Status.Message)
	}
}

func pgConnect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// waitFor polls cond (there is no event to wait on) until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(faultWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %v", what, faultWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A working storage with no room left (a tmpfs of its own, filled as the
// job starts Downloading) is a back end out: Downloading waits for room,
// its attempts unspent, the job saying why; once there is room, the job
// completes. A disk filled for a few seconds failed every job writing to it.
func TestFullWorkingStorageWaitsForRoom(t *testing.T) {
	t.Parallel()
	work := smallDisk(t)
	filler := filepath.Join(work, "filler")
	obs := waitsSeen{states: make(chan queue.State, 100), stored: func() {}}
	r := newRig(t, nil, withAttempts(2, 10*time.Millisecond),
		func(hc *handlers.Config, rc *reactor.Config) { hc.WorkDir, hc.Margin, rc.Observer = work, 1, obs },
		fillAt(t, queue.Downloading, filler))
	b := r.submitObject("/obj.checkm", object{"a.txt": []byte("alpha\n")})
	obs.waited(t, queue.Downloading, 3, "room in the working storage")
	j := r.jobsOf(b.ID)["manifest"]
	if j.State() != queue.Downloading || !strings.HasPrefix(j.Status.Message, reactor.WaitingPrefix+": the working storage "+work) ||
		!strings.Contains(j.Status.Message, "no space left on device") {
		t.Fatalf("job %s, message %q: want Downloading, waiting for room in the working storage", j.State(), j.Status.Message)
	}
	// /readyz's check of the working storage names it, and is fine again once there is room.
	if err := r.p.CheckWork(t.Context()); err == nil || !strings.Contains(err.Error(), "the working storage "+work+" has 0 MiB free") {
		t.Errorf("the working storage's check, full: %v", err)
	}
	if err := os.Remove(filler); err != nil { // room again
		t.Fatal(err)
	}
	if err := r.p.CheckWork(t.Context()); err != nil {
		t.Errorf("the working storage's check, with room: %v", err)
	}
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("batch %s (%s), want Completed", b.State(), b.Status.Message)
	}
}
