package handlers_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/audit"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/internal/pgtest"
	"github.com/ingestq/ingestq/internal/s3test"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// The inventory restored from a dump older than storage (local OCFL roots,
// a primary and a replica; PostgreSQL): a deposit to an object whose
// version 2 the inventory lost fails at Storing, naming the object, the
// version, the job that stored it and the commands that mend it, and
// writes nothing; after `audit --repair`, a requeue stores and records
// version 3. It stored and recorded version 3 over the lost 2.
func TestStoringWritesNothingOverVersionsTheInventoryLost(t *testing.T) {
	t.Parallel()
	inventoryLostVersions(t, t.TempDir(), t.TempDir())
}

// The same with the primary on S3.
func TestStoringWritesNothingOverVersionsTheInventoryLostOnS3(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t) // not parallel: the AWS_* variables are the process's
	inventoryLostVersions(t, srv.URL(srv.Addr, "ocfl"), t.TempDir())
}

func inventoryLostVersions(t *testing.T, primary, replica string) {
	ctx := t.Context()
	pg := pgtest.Start(t)
	invURL := pgtest.NewDatabase(t, pg)
	r := newRig(t, nil, withStorage(primary, replica), withInventory(invURL))
	one, two, three := object{"a.txt": []byte("one")}, object{"a.txt": []byte("two")}, object{"a.txt": []byte("three")}
	first := r.deposit("/lost/v1.checkm", one, "local_id", "lost")
	ark := r.checkStored(first, one)
	dump, err := pg.Dump(invURL)
	if err != nil {
		t.Fatal(err)
	}
	second := r.deposit("/lost/v2.checkm", two, "local_id", "lost")
	r.checkStored(second, two)
	if err := pg.Restore(invURL, dump); err != nil {
		t.Fatal(err)
	}
	keys := map[string][]string{primary: allKeys(t, primary), replica: allKeys(t, replica)}
	recorded, err := r.p.Inventory().Object(ctx, ark)
	if err != nil {
		t.Fatal(err)
	}

	b := r.waitBatch(r.submitObject("/lost/v3.checkm", three, "local_id", "lost").ID, queue.Completed, queue.Failed)
	j := r.jobsOf(b.ID)["manifest"]
	if j.State() != queue.Failed || !strings.HasPrefix(j.Status.Message, string(queue.Storing)+": ") {
		t.Fatalf("job %s over the lost version 2: %s %q, want Failed at Storing", j.ID, j.State(), j.Status.Message)
	}
	for _, w := range []string{"primary target " + primary + " holds version 2 of " + ark, "it records up to version 1",
		"stored by job " + second.ID + " of batch " + second.BatchID + ", now Completed", "nothing was written",
		"`ingestq hold queue`", "`ingestq audit --repair " + ark + "`", "`ingestq release queue`", "`ingestq requeue " + j.ID + "`"} {
		if !strings.Contains(j.Status.Message, w) {
			t.Errorf("message %q does not say %q", j.Status.Message, w)
		}
	}
	for target, before := range keys {
		if after := allKeys(t, target); !slices.Equal(after, before) {
			t.Errorf("%s was written: %d keys before, %d after", target, len(before), len(after))
		}
	}
	if after, err := r.p.Inventory().Object(ctx, ark); err != nil || !reflect.DeepEqual(after, recorded) {
		t.Errorf("the inventory changed: %+v (%v), was %+v", after, err, recorded)
	}

	// The operator does as the message says.
	j = repairThenRequeue(t, r, j, ark, queue.Storing, 2)
	r.checkStored(j, three)
	r.checkCopies(j, ark, 3, primary, replica)
	wantRecordedBy(t, r, ark, first.ID, second.ID, j.ID)
}

// A job whose Recording finds a version under its own that the inventory
// lost (restored while the job was between Storing and Recording) records
// nothing and fails, saying what mends it; after `audit --repair`, a
// requeue records its version. It recorded version 3 over the lost 2.
func TestRecordingRecordsNothingOverVersionsTheInventoryLost(t *testing.T) {
	t.Parallel()
	pg := pgtest.Start(t)
	invURL := pgtest.NewDatabase(t, pg)
	gate := newRecordingGate(t)
	r := newRig(t, nil, withInventory(invURL), gate.option())
	ctx := t.Context()
	one, two, three := object{"a.txt": []byte("one")}, object{"a.txt": []byte("two")}, object{"a.txt": []byte("three")}
	first := r.deposit("/under/v1.checkm", one, "local_id", "under")
	ark := r.checkStored(first, one)
	dump, err := pg.Dump(invURL)
	if err != nil {
		t.Fatal(err)
	}
	second := r.deposit("/under/v2.checkm", two, "local_id", "under")
	r.checkStored(second, two)

	gate.closed.Store(true)
	b := r.submitObject("/under/v3.checkm", three, "local_id", "under")
	held := gate.wait(t)
	if err := pg.Restore(invURL, dump); err != nil {
		t.Fatal(err)
	}
	gate.open()
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Failed {
		t.Fatalf("batch %s, want Failed: its job's Recording over the lost version 2", b.State())
	}
	j := r.jobsOf(b.ID)["manifest"]
	if j.ID != held || j.State() != queue.Failed || !strings.HasPrefix(j.Status.Message, string(queue.Recording)+": ") {
		t.Fatalf("job %s: %s %q, want %s Failed at Recording", j.ID, j.State(), j.Status.Message, held)
	}
	for _, w := range []string{"version 3 of " + ark + " is this job's", "does not record version 2 under it",
		"stored by job " + second.ID, "nothing was recorded", "`ingestq audit --repair " + ark + "`", "`ingestq requeue " + j.ID + "`"} {
		if !strings.Contains(j.Status.Message, w) {
			t.Errorf("message %q does not say %q", j.Status.Message, w)
		}
	}
	if d, err := r.p.Inventory().Object(ctx, ark); err != nil || d.Object.LatestVersion != 1 {
		t.Errorf("the inventory after the refused Recording: %+v (%v), want version 1 alone", d.Object, err)
	}

	j = repairThenRequeue(t, r, j, ark, queue.Recording, 2, 3) // the repair records the held job's stored version too
	r.checkStored(j, three)
	wantRecordedBy(t, r, ark, first.ID, second.ID, j.ID)
}

// Two jobs of one object: the first stored its version and has not
// recorded it (held at Recording) when the second reaches Storing. The
// second waits, its message saying for whom, writes nothing and spends no
// attempt; once the first records, it stores the next version, and both
// complete in order. It stored on top at once.
func TestASecondJobOfAnObjectWaitsForTheFirstToRecord(t *testing.T) {
	t.Parallel()
	logs := &logtest.Buffer{}
	gate := newRecordingGate(t)
	r := newRig(t, nil, withLogs(t, logs), gate.option())
	ctx := t.Context()
	one, two, three := object{"a.txt": []byte("one")}, object{"a.txt": []byte("two")}, object{"a.txt": []byte("three")}
	first := r.deposit("/twice/v1.checkm", one, "local_id", "twice")
	ark := r.checkStored(first, one)

	gate.closed.Store(true)
	ba := r.submitObject("/twice/a.checkm", two, "local_id", "twice")
	a := gate.wait(t)
	bb := r.submitObject("/twice/b.checkm", three, "local_id", "twice")
	line := logs.WaitFor(t, objectWaitLine, "stored by job "+a)
	jb := r.jobsOf(bb.ID)["manifest"]
	if jb.State() != queue.Storing || !strings.HasPrefix(jb.Status.Message, "waiting for job "+a+" to record version 2 of "+ark) ||
		!strings.Contains(jb.Status.Message, "stored by job "+a+" of batch "+ba.ID+", now at Recording") {
		t.Errorf("the second job %s: %s %q (logged %s), want it waiting at Storing for %s", jb.ID, jb.State(), jb.Status.Message, line, a)
	}
	if v, err := r.p.Primary().Latest(ctx, ark); err != nil || v.Number != 2 {
		t.Errorf("the primary's head while the first job is held: version %d (%v), want 2", v.Number, err)
	}

	gate.open()
	ja := r.jobsOf(r.waitBatch(ba.ID, queue.Completed, queue.Failed).ID)["manifest"]
	jb = r.jobsOf(r.waitBatch(bb.ID, queue.Completed, queue.Failed).ID)["manifest"]
	if ja.State() != queue.Completed || r.versionContent(ark, 2)["producer/a.txt"] != sha256hex(two["a.txt"]) {
		t.Errorf("the first job %s: %s %q, version 2 %v, want Completed, holding its file", ja.ID, ja.State(), ja.Status.Message, r.versionContent(ark, 2))
	}
	r.checkStored(jb, three)
	wantRecordedBy(t, r, ark, first.ID, ja.ID, jb.ID)
	if n := len(logs.Lines("step failed; retrying", jb.ID)); n != 0 {
		t.Errorf("the waiting job spent %d attempts, want none", n)
	}
}

// Two jobs of an object waiting on each other, built with real steps: job
// B's Storing put version 2 and its daemon died before the transition (B
// Failed at Storing); version 2 recorded by a repair, job A stored version
// 3 on top and is held before Recording; the inventory restored to version
// 1 (as if the two Storing steps had run at once, a lock lost with its
// session); B requeued to Storing. A's Recording waits for B's version 2,
// and B's Storing, finding its own version 2 under A's head, is a redo:
// it writes nothing, records 2, and A records 3. B waited for A, which
// waited for B, for ever (decision 668 (b)).
func TestTwoJobsOfAnObjectDoNotWaitOnEachOther(t *testing.T) {
	t.Parallel()
	pg := pgtest.Start(t)
	invURL := pgtest.NewDatabase(t, pg)
	gate := newRecordingGate(t)
	var runs stepRuns
	var a, b atomic.Pointer[queue.Job]
	var r *rig
	deadlock := make(chan string, 1)
	r = newRig(t, nil, withInventory(invURL), failOnceAfter(&runs, queue.Storing),
		func(_ *handlers.Config, rc *reactor.Config) { rc.Attempts = 1 }, // a step cut fails its job: it stays put until requeued
		beforeStep(queue.Recording, func(j *queue.Job) {
			gate.hold(j)
			if ja, jb := a.Load(), b.Load(); ja != nil && jb != nil && j.ID == ja.ID {
				if now, err := r.q.LoadJob(t.Context(), jb.ID); err == nil && strings.HasPrefix(now.Status.Message, "waiting for job "+ja.ID+" ") {
					select {
					case deadlock <- now.Status.Message:
					default:
					}
				}
			}
		}))
	requeue := func(j *queue.Job) {
		t.Helper()
		r.ingestq("requeue", j.ID)
		r.ingestq("report", j.BatchID)
	}
	stored := func(path string, obj object) *queue.Job { // its Storing cut once: Failed there
		t.Helper()
		j := r.deposit(path, obj, "local_id", "both")
		if j.State() != queue.Failed || !strings.HasPrefix(j.Status.Message, "Storing") {
			t.Fatalf("job %s: %s %q, want Failed at Storing (cut after its Put)", j.ID, j.State(), j.Status.Message)
		}
		return j
	}
	one, two, three := object{"a.txt": []byte("one")}, object{"a.txt": []byte("two")}, object{"a.txt": []byte("three")}
	first := stored("/both/v1.checkm", one)
	requeue(first)
	if bt := r.waitBatch(first.BatchID, queue.Completed, queue.Failed); bt.State() != queue.Completed {
		t.Fatalf("the first deposit requeued: batch %s (%s)", bt.State(), bt.Status.Message)
	}
	ark := r.jobsOf(first.BatchID)["manifest"].Identifiers.PrimaryID
	dump, err := pg.Dump(invURL)
	if err != nil {
		t.Fatal(err)
	}

	jb := stored("/both/b.checkm", two)
	b.Store(jb)
	if _, err := r.q.HoldQueue(t.Context(), queue.QueueIngest); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runAuditWith(r, audit.Options{Repair: true, ARKs: []string{ark}}, func(audit.Repaired) {}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.q.ReleaseQueue(t.Context(), queue.QueueIngest); err != nil {
		t.Fatal(err)
	}
	gate.closed.Store(true)
	ja := stored("/both/a.checkm", three)
	a.Store(ja)
	requeue(ja)
	if held := gate.wait(t); held != ja.ID {
		t.Fatalf("job %s held at Recording, want %s", held, ja.ID)
	}
	if err := pg.Restore(invURL, dump); err != nil {
		t.Fatal(err)
	}
	requeue(jb) // at Storing before A's Recording goes on: in flight
	gate.open()

	done := make(chan [2]*queue.Batch, 1)
	go func() {
		done <- [2]*queue.Batch{r.waitBatch(jb.BatchID, queue.Completed, queue.Failed), r.waitBatch(ja.BatchID, queue.Completed, queue.Failed)}
	}()
	select {
	case msg := <-deadlock:
		t.Fatalf("job %s waits for job %s, which waits for it: %s", jb.ID, ja.ID, msg)
	case bs := <-done:
		for _, bt := range bs {
			if bt.State() != queue.Completed {
				t.Fatalf("batch %s: %s (%s), want Completed", bt.ID, bt.State(), bt.Status.Message)
			}
		}
	}
	wantRecordedBy(t, r, ark, first.ID, jb.ID, ja.ID)
	if v, err := r.p.Primary().Latest(t.Context(), ark); err != nil || v.Number != 3 {
		t.Errorf("the primary's head: version %d (%v), want 3: the redo wrote nothing", v.Number, err)
	}
	for n, want := range map[int]object{2: two, 3: three} {
		if got := r.versionContent(ark, n)["producer/a.txt"]; got != sha256hex(want["a.txt"]) {
			t.Errorf("version %d holds %q, want %s's digest", n, got, want["a.txt"])
		}
	}
}

// recordingGate holds each job that reaches Recording while it is closed,
// until it opens or the test ends.
type recordingGate struct {
	closed  atomic.Bool
	reached chan string // the jid of each job held
	opened  chan struct{}
	ended   <-chan struct{}
}

func newRecordingGate(t *testing.T) *recordingGate {
	return &recordingGate{reached: make(chan string, 8), opened: make(chan struct{}), ended: t.Context().Done()}
}

func (g *recordingGate) option() rigOption { return beforeStep(queue.Recording, g.hold) }

// hold holds job j at Recording while the gate is closed.
func (g *recordingGate) hold(j *queue.Job) {
	if g.closed.Load() {
		g.reached <- j.ID
		select {
		case <-g.opened:
		case <-g.ended: // before the daemon stops: it waits for its steps
		}
	}
}

// wait is the first job held.
func (g *recordingGate) wait(t *testing.T) string {
	t.Helper()
	select {
	case jid := <-g.reached:
		return jid
	case <-time.After(faultWait):
		t.Fatalf("no job reached Recording in %v", faultWait)
		return ""
	}
}

func (g *recordingGate) open() {
	if g.closed.CompareAndSwap(true, false) {
		close(g.opened)
	}
}

// repairThenRequeue mends ark as job j's message says: it holds the
// ingest queue, has the audit record from storage the versions the
// inventory lacks (want), releases the queue, requeues j (it resumes at
// resumes) and has its batch report again; it returns j completed.
func repairThenRequeue(t *testing.T, r *rig, j *queue.Job, ark string, resumes queue.State, want ...int) *queue.Job {
	t.Helper()
	if _, err := r.q.HoldQueue(t.Context(), queue.QueueIngest); err != nil {
		t.Fatal(err)
	}
	var repaired []int
	found, _, err := runAuditWith(r, audit.Options{Repair: true, ARKs: []string{ark}}, func(rp audit.Repaired) {
		repaired = append(repaired, rp.Version)
	})
	if err != nil || len(found) != 0 || !slices.Equal(repaired, want) {
		t.Errorf("repair of %s: %v, repaired versions %v, findings:\n%s\nwant %v, no finding", ark, err, repaired, findingLines(found), want)
	}
	if _, err := r.q.ReleaseQueue(t.Context(), queue.QueueIngest); err != nil {
		t.Fatal(err)
	}
	if out := r.ingestq("requeue", j.ID); !strings.Contains(out, string(resumes)) {
		t.Errorf("requeue said %q, want it to name %s", out, resumes)
	}
	r.ingestq("report", j.BatchID)
	if b := r.waitBatch(j.BatchID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("after the repair and a requeue: batch %s (%s)", b.State(), b.Status.Message)
	}
	j, err = r.q.LoadJob(t.Context(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// wantRecordedBy asserts that the inventory records ark's versions 1, 2,
// … as made by jobs, in order, with no hole.
func wantRecordedBy(t *testing.T, r *rig, ark string, jobs ...string) {
	t.Helper()
	d, err := r.p.Inventory().Object(t.Context(), ark)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, v := range d.Versions {
		got = append(got, v.Job)
		if v.Version != i+1 {
			t.Errorf("%s: record %d is version %d, want %d (a hole)", ark, i, v.Version, i+1)
		}
	}
	if !slices.Equal(got, jobs) {
		t.Errorf("%s: versions recorded by %v, want %v", ark, got, jobs)
	}
}

// A job that stored version 1, failed at Recording, and is run again from
// Downloading over changed content stores version 2 on top of its own
// unrecorded 1. Its Recording fails, naming version 1 as this job's and the
// commands that mend it; after them it completes, both versions recorded as
// its own. It waited for itself ("waiting for job <itself> …, now at
// Recording") for ever. The reviewer's test (decision 668 (e)), its end
// made the mend's.
func TestRecordingDoesNotWaitForItself(t *testing.T) {
	t.Parallel()
	var refused atomic.Bool
	selfWait := make(chan string, 1)
	r := newRig(t, nil, func(_ *handlers.Config, rc *reactor.Config) {
		if rc.Jobs == nil {
			rc.Jobs = map[queue.State]reactor.JobHandler{}
		}
		rc.Jobs[queue.Recording] = reactor.JobHandlerFunc(func(_ context.Context, s *reactor.Step) (reactor.Result, error) {
			if refused.CompareAndSwap(false, true) {
				return reactor.Result{}, reactor.Fatal(errors.New("test: the inventory refused the record"))
			}
			if msg := s.Job.Status.Message; strings.HasPrefix(msg, "waiting for job "+s.Job.ID+" ") {
				select {
				case selfWait <- msg:
				default:
				}
			}
			return reactor.Result{}, nil
		})
	})
	b := r.submit(r.content.put("/thesis.txt", []byte("draft")), "local_id", "thesis-1")
	r.waitBatch(b.ID, queue.Completed, queue.Failed)
	j := r.jobsOf(b.ID)["file"]
	if j.State() != queue.Failed || !strings.HasPrefix(j.Status.Message, "Recording: test:") {
		t.Fatalf("job %s %q, want Failed at Recording", j.State(), j.Status.Message)
	}
	ark := j.Identifiers.PrimaryID
	// The depositor mends its file; the operator has the job run from
	// Downloading again (redoAdvice: its working folder removed).
	r.content.put("/thesis.txt", []byte("final"))
	if err := os.RemoveAll(filepath.Join(r.data, "work", j.ID)); err != nil {
		t.Fatal(err)
	}
	r.ingestq("requeue", j.ID)
	r.ingestq("report", j.BatchID)
	done := make(chan *queue.Batch, 1)
	go func() { done <- r.waitBatch(j.BatchID, queue.Completed, queue.Failed) }()
	select {
	case msg := <-selfWait:
		t.Fatalf("job %s waits for itself: %s", j.ID, msg)
	case <-done:
	}
	j, err := r.q.LoadJob(t.Context(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if j.State() != queue.Failed || !strings.HasPrefix(j.Status.Message, "Recording: version 2 of "+ark+" is this job's") {
		t.Fatalf("the job run again: %s %q, want Failed at Recording over its own version 1", j.State(), j.Status.Message)
	}
	for _, w := range []string{"version 1: stored by this job (batch " + j.BatchID + ") on an earlier run of its steps", "nothing was recorded",
		"`ingestq audit --repair " + ark + "`", "`ingestq requeue " + j.ID + "`"} {
		if !strings.Contains(j.Status.Message, w) {
			t.Errorf("message %q does not say %q", j.Status.Message, w)
		}
	}
	j = repairThenRequeue(t, r, j, ark, queue.Recording, 1, 2)
	r.checkStored(j, object{"thesis.txt": []byte("final")})
	wantRecordedBy(t, r, ark, j.ID, j.ID)
	if got := r.versionContent(ark, 1)["producer/thesis.txt"]; got != sha256hex([]byte("draft")) {
		t.Errorf("version 1 holds %q, want the draft's digest", got)
	}
}
