package reactor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch"
)

// peaks records the most children each watched folder was listed with, as
// a foreign reader (a Java client) would list it.
type peaks struct {
	mu  sync.Mutex
	max map[string]int
}

func watchPeaks(t *testing.T, e *env, folders ...string) *peaks {
	p := &peaks{max: map[string]int{}}
	w := zkwatch.NewWatcher(e.session(), zkwatch.WatcherConfig{Rescan: -1, Logger: e.log}, func(c zkwatch.Change) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.max[c.Path] = max(p.max[c.Path], c.Count)
	})
	t.Cleanup(w.Close)
	for _, f := range folders {
		w.Watch(e.q.Path(f))
	}
	return p
}

func (p *peaks) over(limit int) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for f, n := range p.max {
		if n > limit {
			out = append(out, fmt.Sprintf("%s listed %d", f, n))
		}
	}
	return out
}

// A batch of more objects than the window has its jobs made a chunk at a
// time and its Completed jobs archived: it completes with every object's
// job, while no job folder, and none of its buckets, ever lists more than a
// window's worth; its report names every job, its status-report the jobs
// still live, and the queue's check passes.
func TestWindowedBatch(t *testing.T) {
	const objects, window = 600, 100
	e := newEnv(t)
	batches := e.outside("ingestq.batch.>")
	folders := []string{"/jobs"}
	for _, s := range queue.JobMachine.States {
		folders = append(folders, "/jobs/states/"+s.Folder())
	}
	b := e.submit(map[string]any{"profile_name": "demo", "payload_url": fmt.Sprintf("passthrough:%d", objects)})
	for _, bucket := range queue.Buckets {
		folders = append(folders, "/batches/"+b.ID+"/states/"+bucket)
	}
	seen := watchPeaks(t, e, folders...)
	t.Cleanup(func() {
		if t.Failed() {
			f, err := e.q.LoadFeed(context.Background(), b.ID)
			c, _ := e.q.BucketCounts(context.Background(), b.ID)
			s, _ := e.q.StateCounts(context.Background())
			n, _ := e.q.Archived(context.Background(), b.ID)
			bb, _ := e.q.LoadBatch(context.Background(), b.ID)
			t.Logf("feed %+v %v; buckets %v; states %v; archived %d; batch %+v", f, err, c, s, n, bb)
		}
	})
	e.daemon("host-a", func(c *reactor.Config) { c.Window = window })

	rep := e.waitBatch(batches, b.ID)
	if rep.To != "Completed" {
		t.Fatalf("batch ended %s: %s", rep.To, rep.Message)
	}
	if got := rep.Attrs["successful_count"]; got != float64(objects) {
		t.Errorf("report event: %v successful jobs, want %d", got, objects)
	}
	// Archiving lags a little behind completion: here 21 jobs over the
	// window as a rule, 41 once in a full parallel `make test` (session 12,
	// with steps handed on without a new acquisition). Half a window of
	// slack keeps a default window (5,000) far below what a Java client
	// can list (about 50,000).
	if over := seen.over(window + window/2); len(over) > 0 {
		t.Errorf("folders past the window: %s", strings.Join(over, "; "))
	}
	got, err := e.q.LoadBatch(t.Context(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	jids, ids, _, err := e.q.Successes(t.Context(), got)
	minted := 0
	for _, id := range ids {
		if id != nil {
			minted++
		}
	}
	if err != nil || len(jids) != objects || minted != 0 { // pass-through mints no identifiers
		t.Fatalf("successes: %d jobs, %d identifiers, %v; want %d, 0", len(jids), minted, err, objects)
	}
	archived, err := e.q.ArchivedJobs(t.Context(), b.ID)
	if err != nil || len(archived) == 0 || len(archived)+len(got.Report.SuccessfulJobs) != objects || got.JobCount != objects {
		t.Fatalf("%d archived (%v) + %d in the status-report, job-count %d; want %d in all",
			len(archived), err, len(got.Report.SuccessfulJobs), got.JobCount, objects)
	}
	st, err := (&ops.Service{Q: e.q}).BatchStatus(t.Context(), b.ID)
	if err != nil || st.Jobs.Total != objects || st.Jobs.Finished != objects || st.Jobs.ByState[queue.Completed] != objects {
		t.Errorf("batch status %+v (%v): want %d jobs, all finished and Completed", st.Jobs, err, objects)
	}
	keys := map[string]bool{}
	for _, a := range archived {
		keys[a.Key] = true
	}
	for _, jid := range got.Report.SuccessfulJobs {
		j, err := e.q.LoadJob(t.Context(), jid)
		if err != nil {
			t.Fatal(err)
		}
		keys[j.Config.ObjectKey] = true
	}
	if len(keys) != objects {
		t.Errorf("%d distinct object keys among the jobs, want %d", len(keys), objects)
	}
	e.clean()
}

// Cancelling a windowed batch stops its job making: the jobs it has end
// Failed or finish, and it reports with the objects that had no job named.
func TestWindowedBatchCancelled(t *testing.T) {
	const objects, window = 500, 100
	e := newEnv(t)
	batches := e.outside("ingestq.batch.>")
	jobs := e.outside("ingestq.job.estimating.*")
	b := e.submit(map[string]any{"profile_name": "demo", "payload_url": fmt.Sprintf("passthrough:%d", objects)})
	e.daemon("host-a", func(c *reactor.Config) {
		c.Window, c.Jobs = window, reactor.PassThrough{Delay: 20 * time.Millisecond}.Handlers()
	})
	<-jobs // its first window is made
	if err := e.q.StopFeeding(t.Context(), b.ID, "cancelled by the test"); err != nil {
		t.Fatal(err)
	}
	f, err := e.q.LoadFeed(t.Context(), b.ID)
	if err != nil || f == nil || f.Stopped == "" || f.MadeObjects() >= objects {
		t.Fatalf("feed %+v (%v): want stopped before every object had a job", f, err)
	}
	rep := e.waitBatch(batches, b.ID)
	if rep.To != "Failed" || !strings.Contains(rep.Message, "stopped making jobs: cancelled by the test") {
		t.Fatalf("batch ended %s: %q; want Failed, naming the stop", rep.To, rep.Message)
	}
	got, err := e.q.LoadBatch(t.Context(), b.ID)
	if err != nil || got.JobCount != f.MadeObjects() {
		t.Fatalf("job-count %d (%v), want %d", got.JobCount, err, f.MadeObjects())
	}
	e.clean()
}

// A feeder that died while making a chunk (Feed.Making, some of its jobs
// made) is resumed by the next daemon without a second job for any object.
func TestWindowedBatchResumesCutChunk(t *testing.T) {
	const objects, window = 600, 100
	e := newEnv(t)
	batches := e.outside("ingestq.batch.>")
	b := e.submit(map[string]any{"profile_name": "demo", "payload_url": fmt.Sprintf("passthrough:%d", objects)})

	// The daemon that died: it took the batch, kept its objects, and made
	// half of the first chunk's jobs.
	s := e.session()
	q := e.queue(s)
	taken, _, err := q.AcquirePendingBatch(t.Context(), nil)
	if err != nil || taken == nil || taken.ID != b.ID {
		t.Fatalf("acquire %s: %v %v", b.ID, taken, err)
	}
	objs, err := reactor.PassThrough{}.Objects(t.Context(), taken)
	if err != nil {
		t.Fatal(err)
	}
	f, err := q.WriteObjects(t.Context(), taken, objs, window/5)
	if err != nil {
		t.Fatal(err)
	}
	f.Making = true
	if err := q.SetFeed(t.Context(), taken, f); err != nil {
		t.Fatal(err)
	}
	for _, o := range objs[:window/10] {
		spec := o.Spec
		spec.Config.ObjectKey, spec.RecordID = o.Key, true
		if _, err := q.CreateJob(t.Context(), taken, spec); err != nil {
			t.Fatal(err)
		}
	}
	s.Close() // its lock goes with its session

	e.daemon("host-a", func(c *reactor.Config) { c.Window = window })
	if rep := e.waitBatch(batches, b.ID); rep.To != "Completed" || rep.Attrs["successful_count"] != float64(objects) {
		t.Fatalf("batch ended %s with %v successful: %s", rep.To, rep.Attrs["successful_count"], rep.Message)
	}
	got, err := e.q.LoadBatch(t.Context(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	jids, _, _, err := e.q.Successes(t.Context(), got)
	if err != nil || len(jids) != objects {
		t.Fatalf("%d successful jobs (%v), want %d: one per object", len(jids), err, objects)
	}
	e.clean() // check counts each object's jobs
}

// reportCatcher is a Reporter that hands on each report it is given.
type reportCatcher chan reactor.Report

func (c reportCatcher) Report(_ context.Context, _ *queue.Batch, r reactor.Report) error {
	c <- r
	return nil
}

// A windowed batch's report gives its archived jobs' notes, as its live
// jobs': the archive keeps them, up to what a report gives (256 KiB of
// JSON), and counts the rest. Here every other job's note is 4,000 '<'
// (24 KB of JSON each): some of them fill the archive's room, so the
// report gives each job's note whole or counts it left out, and none is
// lost. Before, the archived jobs' notes were in neither.
func TestWindowedBatchReportsArchivedJobsNotes(t *testing.T) {
	const objects, window = 60, 20
	noteOf := func(jid string) string {
		if jid[len(jid)-1]%2 == 0 {
			return queue.NotePrefix + jid + " " + strings.Repeat("<", 4000)
		}
		return queue.NotePrefix + "names of " + jid
	}
	e := newEnv(t)
	batches := e.outside("ingestq.batch.>")
	reports := make(reportCatcher, 1)
	e.daemon("host-a", func(c *reactor.Config) {
		c.Window, c.Reporter = window, reports
		processing := c.Jobs[queue.Processing]
		c.Jobs[queue.Processing] = reactor.JobHandlerFunc(func(ctx context.Context, s *reactor.Step) (reactor.Result, error) {
			res, err := processing.Handle(ctx, s)
			res.Change.Message = noteOf(s.Job.ID)
			return res, err
		})
	})
	b := e.submit(map[string]any{"profile_name": "demo", "payload_url": fmt.Sprintf("passthrough:%d", objects)})
	if rep := e.waitBatch(batches, b.ID); rep.To != "Completed" {
		t.Fatalf("batch ended %s: %s", rep.To, rep.Message)
	}
	rep := <-reports
	archived, err := e.q.ArchivedJobs(t.Context(), b.ID)
	if err != nil || len(archived) == 0 {
		t.Fatalf("%d jobs archived (%v), want some", len(archived), err)
	}
	for jid, note := range rep.Notes {
		if note != noteOf(jid) {
			t.Errorf("report's note of %s: %.60q…, want %.60q…", jid, note, noteOf(jid))
		}
	}
	if len(rep.SuccessfulJobs) != objects || len(rep.Notes)+rep.NotesLeftOut != objects || rep.NotesLeftOut == 0 {
		t.Errorf("report of %d jobs gives %d notes and leaves out %d; want %d jobs, each note given or counted, some left out",
			len(rep.SuccessfulJobs), len(rep.Notes), rep.NotesLeftOut, objects)
	}
	kept, leftOut, given := 0, 0, 0 // bytes of JSON of the archive's notes, the notes it left out, and gave
	for _, a := range archived {
		switch {
		case a.Note == noteOf(a.ID) && !a.NoteLeftOut:
			data, _ := json.Marshal(a.Note)
			kept += len(data)
			if rep.Notes[a.ID] == a.Note {
				given++
			}
		case a.NoteLeftOut && a.Note == "":
			leftOut++
		default:
			t.Errorf("archived job %s: note %.60q… (left out: %t), want its own or none left out", a.ID, a.Note, a.NoteLeftOut)
		}
	}
	f, err := e.q.LoadFeed(t.Context(), b.ID)
	if err != nil || given == 0 || leftOut == 0 || f.NoteBytes != kept || kept > 256<<10 {
		t.Errorf("archive: %d bytes of notes kept (feed counts %+v, %v), %d of them in the report, %d left out; want some of each, at most 256 KiB, counted",
			kept, f, err, given, leftOut)
	}
}
