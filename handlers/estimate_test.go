package handlers_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// estTap records the events of one subject filter on a channel of its own.
// The rig's job log is filled by another subscription, which may lag behind
// the batch events waitBatch sees; receiving from a tap waits instead.
func estTap(t *testing.T, r *rig, subject string) <-chan events.Event {
	t.Helper()
	ch := make(chan events.Event, 1024)
	unsub, err := r.bus.Subscribe(subject, func(e events.Event) {
		select {
		case ch <- e:
		default: // far more than a test makes; never block the NATS goroutine
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unsub)
	return ch
}

// estCollect receives from a tap until it has, for each of keys, the
// first event that key names (key returns "" for an event of no interest).
// The long limit only stops a hung test; it is not part of what is asserted.
func estCollect(t *testing.T, r *rig, ch <-chan events.Event, keys []string, key func(events.Event) string) map[string]events.Event {
	t.Helper()
	want := map[string]bool{}
	for _, k := range keys {
		want[k] = true
	}
	got := map[string]events.Event{}
	limit := time.After(5 * time.Minute)
	for len(got) < len(want) {
		select {
		case e := <-ch:
			if k := key(e); want[k] {
				if _, dup := got[k]; !dup {
					got[k] = e
				}
			}
		case <-limit:
			r.dump()
			t.Fatalf("events of %v not all heard; have %v", keys, got)
		}
	}
	return got
}

// leftEstimating names a job by its Estimating → Provisioning event: the
// attrs are what Estimating computed, before Downloading rewrites
// space_needed.
func leftEstimating(e events.Event) string {
	if e.Kind == events.KindJob && e.From == string(queue.Estimating) {
		return e.JobID
	}
	return ""
}

// jidsOf lists the ids of jobs.
func jidsOf(jobs map[string]*queue.Job) []string {
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	return ids
}

// Without sizes in the manifest, Estimating asks each file's server with
// HEAD; one size it cannot learn makes the whole estimate 0 (unknown), and
// such a job is still ingested.
func TestEstimateSizes(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	// Files behind this server answer GET as usual, but HEAD with 405
	// under /405/ and with no Content-Length under /nolen/.
	odd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mode, rest, _ := strings.Cut(strings.TrimPrefix(req.URL.Path, "/"), "/")
		switch {
		case req.Method != http.MethodHead:
		case mode == "405":
			http.Error(w, "no HEAD here", http.StatusMethodNotAllowed)
			return
		case mode == "nolen":
			w.WriteHeader(http.StatusOK) // no body, so net/http adds no length
			return
		}
		req.URL.Path = "/" + rest // the content server's own path
		r.content.serve(w, req)
	}))
	t.Cleanup(odd.Close)

	objs := []struct {
		files object
		base  map[string]string // file name → base URL (the content server if absent)
		want  float64           // space_needed after Estimating
	}{
		{files: object{"a.txt": bytes.Repeat([]byte("a"), 1234), "b.bin": bytes.Repeat([]byte{1}, 56_789), "c.txt": []byte("seven!\n")},
			want: 1234 + 56_789 + 7},
		{files: object{"known.txt": []byte("known size\n"), "refused.txt": bytes.Repeat([]byte("r"), 300)},
			base: map[string]string{"refused.txt": odd.URL + "/405"}, want: 0},
		{files: object{"silent.txt": bytes.Repeat([]byte("s"), 4321), "known2.txt": []byte("also known\n")},
			base: map[string]string{"silent.txt": odd.URL + "/nolen"}, want: 0},
	}
	var lines []row
	for i, o := range objs {
		var rows []row
		for name, data := range o.files {
			path := fmt.Sprintf("/o%d/%s", i, name)
			url := r.content.put(path, data)
			if b, ok := o.base[name]; ok {
				url = b + path
			}
			rw := fileRow(url, name, data)
			rw.size = -1 // an empty size column: Estimating must ask
			rows = append(rows, rw)
		}
		lines = append(lines, row{url: r.content.put(fmt.Sprintf("/o%d.checkm", i), manifest("mrt-ingest-manifest", rows...)), size: -1})
	}
	tap := estTap(t, r, "ingestq.job.provisioning.>")
	b := r.submit(r.content.put("/batch.checkm", manifest("mrt-batch-manifest", lines...)))
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("batch %s: %s", b.State(), b.Status.Message)
	}
	jobs := r.jobsOf(b.ID)
	if len(jobs) != len(objs) {
		t.Fatalf("%d jobs, want %d", len(jobs), len(objs))
	}
	est := estCollect(t, r, tap, jidsOf(jobs), leftEstimating)
	for key, j := range jobs {
		i := -1
		for k, l := range lines {
			if strings.HasSuffix(key, l.url) {
				i = k
			}
		}
		if i < 0 {
			t.Fatalf("job %s has unknown object key %q", j.ID, key)
		}
		attrs := est[j.ID].Attrs
		// JSON numbers arrive as float64.
		if got := attrs["space_needed"]; got != objs[i].want {
			t.Errorf("object %d (job %s): space_needed after Estimating %v, want %v", i, j.ID, got, objs[i].want)
		}
		if got := attrs["files"]; got != float64(len(objs[i].files)) {
			t.Errorf("object %d (job %s): files %v, want %d", i, j.ID, got, len(objs[i].files))
		}
		r.checkStored(j, objs[i].files)
	}
}

// A job over a LargeJobs threshold is moved back to the rule's priority; a
// small one keeps the profile's.
func TestEstimateLargeJobPriority(t *testing.T) {
	t.Parallel()
	prof := profile.Default()
	prof.LargeJobs = []profile.SizeRule{{Over: 1000, Priority: 20}}
	r := newRig(t, prof)
	big, small := bytes.Repeat([]byte("B"), 5000), []byte("ten bytes!")
	want := map[string]struct {
		prio int
		obj  object
	}{}
	var rows []row
	for name, data := range map[string][]byte{"big.bin": big, "small.txt": small} {
		rw := fileRow(r.content.put("/f/"+name, data), name, data)
		rows = append(rows, rw)
		prio := profile.DefaultPriority
		if len(data) > 1000 {
			prio = 20
		}
		want[rw.url] = struct {
			prio int
			obj  object
		}{prio, object{name: data}}
	}
	tap := estTap(t, r, "ingestq.job.provisioning.>")
	b := r.submit(r.content.put("/singles.checkm", manifest("mrt-single-file-batch-manifest", rows...)))
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("batch %s: %s", b.State(), b.Status.Message)
	}
	jobs := r.jobsOf(b.ID)
	if len(jobs) != 2 {
		t.Fatalf("%d jobs, want 2", len(jobs))
	}
	est := estCollect(t, r, tap, jidsOf(jobs), leftEstimating)
	for _, j := range jobs {
		w, ok := want[j.Config.Map()["payload_url"].(string)]
		if !ok {
			t.Fatalf("job %s: unexpected payload_url %v", j.ID, j.Config.Map()["payload_url"])
		}
		r.checkStored(j, w.obj)
		if j.Priority != w.prio {
			t.Errorf("job %s (%v): priority %d, want %d", j.ID, j.Config.Map()["payload_url"], j.Priority, w.prio)
		}
		// The change is made by Estimating itself, not later.
		if p := est[j.ID].Priority; p == nil || *p != w.prio {
			got := "none"
			if p != nil {
				got = fmt.Sprint(*p)
			}
			t.Errorf("job %s: priority on leaving Estimating %s, want %d", j.ID, got, w.prio)
		}
	}
}

// A job that does not fit the working storage waits in Provisioning and is
// tested again on the timer until room appears, then goes on.
func TestProvisionWaitsForRoom(t *testing.T) {
	t.Parallel()
	var (
		full     atomic.Bool
		calls    atomic.Int32
		wrongDir atomic.Value // a dir other than the working folder, if asked about one
		thrice   = make(chan struct{})
		once     sync.Once
	)
	full.Store(true)
	r := newRig(t, nil, func(hc *handlers.Config, _ *reactor.Config) {
		hc.MaxFill = handlers.Defaults.MaxFill // the rule as a daemon has it (the rig lifts it)
		work := filepath.Join(hc.DataDir, "work")
		hc.Space = func(dir string) (free, total uint64, err error) {
			if dir != work {
				wrongDir.Store(dir)
			}
			if calls.Add(1) >= 3 {
				once.Do(func() { close(thrice) })
			}
			if full.Load() {
				return 1 << 20, 100 << 20, nil // 99% full: beyond MaxFill and the margin
			}
			return 99 << 30, 100 << 30, nil
		}
	})
	data := []byte("waits for room\n")
	b := r.submit(r.content.put("/wait.txt", data))
	select {
	case <-thrice:
	case <-time.After(5 * time.Minute): // only stops a hung test
		r.dump()
		t.Fatal("Space was not asked three times")
	}
	// Space still says full, so the job cannot have moved on.
	j := r.jobsOf(b.ID)["file"]
	if j == nil || j.State() != queue.Provisioning {
		t.Fatalf("job after 3 tests of a full disk: %+v, want Provisioning", j)
	}
	if !strings.HasPrefix(j.Status.Message, "waiting for room: ") || !strings.Contains(j.Status.Message, "MiB free") ||
		!strings.Contains(j.Status.Message, "--max-fill 80%") {
		t.Errorf("waiting job's message %q does not say why it waits, and which setting draws the line", j.Status.Message)
	}
	// One GET is the batch handler's look at the payload's first bytes.
	if n := r.content.getCount("/wait.txt"); n > 1 {
		t.Errorf("%d GETs of the file while the disk was full: it was downloaded", n)
	}
	// /readyz's check of the working storage reads the disk as Provisioning does.
	if err := r.p.CheckWork(t.Context()); err == nil || !strings.Contains(err.Error(), "has 1 MiB free, below --space-margin") {
		t.Errorf("the working storage's check, with Space saying 1 MiB free: %v", err)
	}
	full.Store(false)
	if err := r.p.CheckWork(t.Context()); err != nil {
		t.Errorf("the working storage's check, with room: %v", err)
	}
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("batch %s: %s", b.State(), b.Status.Message)
	}
	r.checkStored(r.jobsOf(b.ID)["file"], object{"wait.txt": data})
	if d := wrongDir.Load(); d != nil {
		t.Errorf("Space asked about %v, want the working folder", d)
	}
}

// A job waiting for room is tested again every --provision-wait, and the
// numbers of its message (MiB free, percent full) move with every download
// of the daemon: its status says them at each test, its events say the
// wait once while one limit holds it back. Before, each test whose numbers
// had moved was one more progress event: 120 an hour a waiting job, and a
// big batch's thousand jobs waiting for room filled the stream with them.
func TestAWaitForRoomIsOneEvent(t *testing.T) {
	t.Parallel()
	var (
		full   atomic.Bool
		tests  atomic.Int32
		thrice = make(chan struct{})
		once   sync.Once
	)
	full.Store(true)
	r := newRig(t, nil, func(hc *handlers.Config, _ *reactor.Config) {
		hc.MaxFill = handlers.Defaults.MaxFill
		hc.Space = func(string) (free, total uint64, err error) {
			if !full.Load() {
				return 99 << 30, 100 << 30, nil
			}
			n := tests.Add(1)
			if n >= 3 {
				once.Do(func() { close(thrice) })
			}
			return uint64(n) << 20, 100 << 20, nil // short of the margin, a MiB more free at each test
		}
	})
	b := r.submit(r.content.put("/wait.txt", []byte("waits for room\n")))
	select {
	case <-thrice:
	case <-time.After(5 * time.Minute): // only stops a hung test
		r.dump()
		t.Fatal("Space was not asked three times")
	}
	full.Store(false)
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("batch %s: %s", b.State(), b.Status.Message)
	}
	var waits []string
	for _, e := range r.jobEvents(r.jobsOf(b.ID)["file"].ID) {
		if e.Kind == events.KindProgress && e.Attrs["waiting"] == true {
			waits = append(waits, e.To+": "+e.Message)
		}
	}
	if len(waits) != 1 || !strings.HasPrefix(waits[0], "Provisioning: waiting for room: ") {
		t.Errorf("the job's waits for room heard as %d progress events over %d tests of a full disk: %q; want one, in Provisioning",
			len(waits), tests.Load(), waits)
	}
}
