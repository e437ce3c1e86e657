package handlers_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ingestq/ingestq/cmd/ingestq/cli"
	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// fault wraps a handler: while code is set, every request is answered with
// that status instead; with writes set, every request but a GET or HEAD.
type fault struct {
	next   http.Handler
	code   atomic.Int32
	writes atomic.Bool
	hits   atomic.Int32
}

func (f *fault) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.hits.Add(1)
	read := r.Method == http.MethodGet || r.Method == http.MethodHead
	if c := int(f.code.Load()); c != 0 && !(f.writes.Load() && read) {
		http.Error(w, "fault injected by the test", c)
		return
	}
	f.next.ServeHTTP(w, r)
}

func serveFault(t *testing.T, h http.Handler) (*fault, string) {
	f := &fault{next: h}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

// remote is a profile whose storage, inventory and callback are real HTTP
// servers a test can break and mend.
type remote struct {
	storage, inventory, callback *fault
	callbacks                    atomic.Int32
}

func remoteProfile(t *testing.T) (*profile.Profile, *remote) {
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.OpenLocal(t.TempDir() + "/inv.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inv.Close() })
	rm := &remote{}
	prof := profile.Default()
	rm.storage, prof.Storage = serveFault(t, storage.NewServer(st, nil))
	rm.inventory, prof.Inventory = serveFault(t, inventory.NewServer(inv, nil))
	rm.callback, prof.Callback = serveFault(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		rm.callbacks.Add(1)
	}))
	return prof, rm
}

// ingestq runs the command line against the rig's queue.
func (r *rig) ingestq(args ...string) string {
	r.t.Helper()
	var out, errb bytes.Buffer
	args = append([]string{"--zk", zktest.Shared(r.t).Addr, "--zk-root", r.root, "--nats", r.bus.ClientURL()}, args...)
	if code := cli.Run(context.Background(), args, &out, &errb, func(string) string { return "" }); code != 0 {
		r.t.Fatalf("ingestq %v: exit %d: %s", args, code, errb.String())
	}
	return out.String()
}

// A failure forced at each state fails the job with a message naming the
// cause; once the cause is mended, `ingestq requeue` resumes the job where
// it failed (not from the start), and `ingestq report` completes the batch.
func TestFailureThenRequeue(t *testing.T) {
	t.Parallel()
	good, wrong := []byte("the real content\n"), []byte("something else!!\n")
	cases := []struct {
		name    string
		failIn  queue.State
		breakIt func(r *rig, rm *remote)
		mendIt  func(r *rig, rm *remote)
		wantMsg []string
		refetch bool // the requeued step downloads again
	}{
		{name: "dead URL", failIn: queue.Downloading,
			breakIt: func(r *rig, _ *remote) { r.content.setMode("/f.txt", http.StatusNotFound) },
			mendIt:  func(r *rig, _ *remote) { r.content.setMode("/f.txt", 0) },
			wantMsg: []string{"producer/f.txt", "/f.txt", "404"}, refetch: true},
		{name: "wrong digest", failIn: queue.Downloading,
			breakIt: func(r *rig, _ *remote) { r.content.put("/f.txt", wrong) },
			mendIt:  func(r *rig, _ *remote) { r.content.put("/f.txt", good) },
			wantMsg: []string{"producer/f.txt", "md5 mismatch"}, refetch: true},
		// Writes only: Processing asks both whether its freshly minted ARK is
		// in use (decision 255), and a back end refusing every request fails
		// the job there.
		{name: "storage refusing its writes", failIn: queue.Storing,
			breakIt: func(_ *rig, rm *remote) { rm.storage.writes.Store(true); rm.storage.code.Store(http.StatusForbidden) },
			mendIt:  func(_ *rig, rm *remote) { rm.storage.code.Store(0) },
			wantMsg: []string{"Storing", "403"}},
		// A 500, not a 503: a busy service (503, 429) is waited for, its
		// attempts unspent (busy).
		{name: "inventory failing its records", failIn: queue.Recording,
			breakIt: func(_ *rig, rm *remote) {
				rm.inventory.writes.Store(true)
				rm.inventory.code.Store(http.StatusInternalServerError)
			},
			mendIt:  func(_ *rig, rm *remote) { rm.inventory.code.Store(0) },
			wantMsg: []string{"Recording", "500"}},
		{name: "callback failing", failIn: queue.Notify,
			breakIt: func(_ *rig, rm *remote) { rm.callback.code.Store(http.StatusInternalServerError) },
			mendIt:  func(_ *rig, rm *remote) { rm.callback.code.Store(0) },
			wantMsg: []string{"Notify", "callback", "500"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			prof, rm := remoteProfile(t)
			r := newRig(t, prof)
			r.content.put("/f.txt", good)
			c.breakIt(r, rm)
			b := r.submit(r.content.put("/obj.checkm", manifest("mrt-ingest-manifest", fileRow(r.content.srv.URL+"/f.txt", "f.txt", good))))
			if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Failed {
				t.Fatalf("batch %s, want Failed", b.State())
			}
			j := r.jobsOf(b.ID)["manifest"]
			if j.State() != queue.Failed || !strings.HasPrefix(j.Status.Message, string(c.failIn)) {
				t.Fatalf("job %s: %q, want Failed in %s", j.State(), j.Status.Message, c.failIn)
			}
			for _, w := range c.wantMsg {
				if !strings.Contains(j.Status.Message, w) {
					t.Errorf("message %q does not name %q", j.Status.Message, w)
				}
			}
			c.mendIt(r, rm)
			gets, heard := r.content.getCount("/f.txt"), len(r.jobEvents(j.ID))
			if out := r.ingestq("requeue", j.ID); !strings.Contains(out, string(c.failIn)) {
				t.Errorf("requeue said %q, want it to name %s", out, c.failIn)
			}
			r.ingestq("report", b.ID)
			if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
				t.Fatalf("after requeue and report: batch %s (%s)", b.State(), b.Status.Message)
			}
			j, err := r.q.LoadJob(t.Context(), j.ID)
			if err != nil || j.State() != queue.Completed || j.Status.RetryCount != 1 {
				t.Fatalf("job after requeue: %+v, %v", j, err)
			}
			// The daemon's first step after the requeue is the failed one.
			var after []events.Event
			for _, e := range r.jobEvents(j.ID)[heard:] {
				if e.Kind == events.KindJob && e.RecoveredBy == "" && e.Actor == "" { // not the requeue's own move (its actor's)
					after = append(after, e)
				}
			}
			if len(after) == 0 || after[0].From != string(c.failIn) {
				t.Errorf("events after requeue %+v, want the first from %s", after, c.failIn)
			}
			if refetched := r.content.getCount("/f.txt") > gets; refetched != c.refetch {
				t.Errorf("file fetched again after requeue: %v, want %v", refetched, c.refetch)
			}
			if rm.callbacks.Load() != 1 {
				t.Errorf("%d callbacks reached the depositor, want 1", rm.callbacks.Load())
			}
		})
	}
}

// A manifest with a wrong digest fails the job in Downloading; the
// depositor fixes the served manifest (and drops a file from it); `ingestq
// requeue` says the manifest is fetched again, the job completes with the
// fixed list, and the file already verified is not downloaded again.
func TestRequeueFetchesAFixedManifest(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	good, bad, dropped := []byte("good file\n"), []byte("fixed later\n"), []byte("no longer listed\n")
	rows := []row{
		fileRow(r.content.put("/fix/good.txt", good), "good.txt", good),
		fileRow(r.content.put("/fix/bad.txt", bad), "bad.txt", bad),
		fileRow(r.content.put("/fix/dropped.txt", dropped), "dropped.txt", dropped),
	}
	rows[1].digest = strings.Repeat("0", 32) // wrong on purpose
	url := r.content.put("/fix.checkm", manifest("mrt-ingest-manifest", rows...))
	b := r.submit(url)
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Failed {
		t.Fatalf("batch %s, want Failed on the wrong digest", b.State())
	}
	j := r.jobsOf(b.ID)["manifest"]
	if j.State() != queue.Failed || !strings.Contains(j.Status.Message, "bad.txt") {
		t.Fatalf("job %s %q, want Failed naming bad.txt", j.State(), j.Status.Message)
	}
	goodGets := r.content.getCount("/fix/good.txt")
	// good.txt was verified unless the failure cancelled its download first.
	_, err := os.Stat(filepath.Join(r.data, "work", j.ID, "producer", "good.txt"))
	goodKept := err == nil
	t.Logf("good.txt verified and kept before the requeue: %v", goodKept)

	// The depositor fixes the digest and drops a file.
	rows[1] = fileRow(r.content.put("/fix/bad.txt", bad), "bad.txt", bad)
	r.content.put("/fix.checkm", manifest("mrt-ingest-manifest", rows[:2]...))
	out := r.ingestq("requeue", j.ID)
	if !strings.Contains(out, "Downloading") || !strings.Contains(out, "manifest is fetched again") {
		t.Errorf("requeue said %q, want it to resume at Downloading and say the manifest is fetched again", out)
	}
	r.ingestq("report", b.ID)
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("after the fix and requeue: batch %s (%s)", b.State(), b.Status.Message)
	}
	r.checkStored(r.jobsOf(b.ID)["manifest"], object{"good.txt": good, "bad.txt": bad})
	if got := r.content.getCount("/fix/good.txt"); goodKept && got != goodGets {
		t.Errorf("good.txt fetched %d more times after the requeue, want 0 (it was verified)", got-goodGets)
	}
}
