package handlers_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/handlers/storage/ocfl/ocfltest"
	"github.com/ingestq/ingestq/internal/pgtest"
	"github.com/ingestq/ingestq/internal/s3test"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// The same object deposited again, unchanged (the same files and bytes
// under the same local id: a depositor submitting a batch again), makes no
// version and ingests nothing: the version's record in the inventory stays
// as its deposit made it, with no second ingestion, replication or fixity
// event, and the job completes saying that version already held the
// content (its inventory node, its message, the callback, the report). A
// changed deposit after it is a version of its own, recorded in full.
// The embedded back ends: bbolt, and an OCFL root in a local folder.
func TestUnchangedRedepositIngestsNothing(t *testing.T) {
	t.Parallel()
	prof, calls := callbackProfile(t)
	r := newRig(t, prof)
	redepositUnchanged(t, r, calls, handlers.DefaultStorage(r.data))
}

// The same on the shared back ends: OCFL on a real S3 server (the primary)
// and in a local folder (a replica), recorded in a real PostgreSQL.
func TestUnchangedRedepositIngestsNothingOnS3AndPostgres(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t) // not parallel: the AWS_* variables are the process's
	primary, replica := srv.URL(srv.Addr, "ocfl"), t.TempDir()
	prof, calls := callbackProfile(t)
	r := newRig(t, prof, withStorage(primary, replica), withInventory(pgtest.NewDatabase(t, pgtest.Start(t))))
	redepositUnchanged(t, r, calls, primary, replica)
}

// An unchanged re-deposit that finds a replica lacking the version (its
// copy lost, the target restored empty) writes that copy again. That copy
// is what it did, and all it records: a replication and a fixity check of
// the copy, no ingestion; the replica's row keeps its first verification.
func TestUnchangedRedepositRecordsTheCopyItWrote(t *testing.T) {
	t.Parallel()
	primary, replica := t.TempDir(), t.TempDir()
	r := newRig(t, nil, withStorage(primary, replica))
	obj := object{"a.txt": []byte("alpha\n")}
	first := r.deposit("/first.checkm", obj, "local_id", "same-1")
	ark := r.checkStored(first, obj)
	was := r.versionRecord(ark, 1)
	if err := os.RemoveAll(filepath.Join(replica, filepath.FromSlash(ocfltest.ObjectRoot(ark)))); err != nil {
		t.Fatal(err)
	}
	again := r.deposit("/again.checkm", obj, "local_id", "same-1")
	r.checkStored(again, obj)
	// Written from this deposit's files: its describing files are this
	// deposit's, not the primary's (decision 240), the content the same.
	v, err := openTarget(t, replica).Latest(t.Context(), ark)
	if err != nil || v.Number != 1 || !storage.Unchanged(v.Files, r.versionRecordFiles(ark, 1), []string{"system/mrt-premis.xml", "system/mrt-manifest.txt"}) {
		t.Errorf("the replica after the unchanged deposit: %+v (%v), want version 1 with its content", v, err)
	}
	if again.Inventory == nil || !again.Inventory.Unchanged || again.Inventory.Version != 1 {
		t.Errorf("job %s: inventory node %+v, want unchanged, version 1", again.ID, again.Inventory)
	}
	now := r.versionRecord(ark, 1)
	if asJSON(now.Replicas) != asJSON(was.Replicas) || now.Job != first.ID {
		t.Errorf("version 1: replicas %s from job %s; want %s from job %s, as first recorded", asJSON(now.Replicas), now.Job, asJSON(was.Replicas), first.ID)
	}
	had := map[string]bool{}
	for _, e := range was.Events {
		had[e.ID] = true
	}
	var added []string
	for _, e := range now.Events {
		if !had[e.ID] {
			added = append(added, e.Type)
			if !strings.Contains(e.Detail, "file://"+filepath.ToSlash(replica)+"/") {
				t.Errorf("event %s %q added by the unchanged deposit, want it about the copy in %s", e.Type, e.Detail, replica)
			}
		}
	}
	if slices.Sort(added); !slices.Equal(added, []string{inventory.EventFixityCheck, inventory.EventReplication}) {
		t.Errorf("events added to version 1 by the unchanged deposit: %v; want a fixity check and a replication", added)
	}
}

// A step that did its work and was then run again (its daemon died before
// the transition: decisions 239 and 254) still finds the version its own:
// a deposit whose Storing and Recording each ran twice records its version
// in full, once, and is not taken for an unchanged one; an unchanged
// re-deposit run the same way still adds nothing.
func TestStepsRunAgainKeepTheirOwnVersion(t *testing.T) {
	t.Parallel()
	prof, calls := callbackProfile(t)
	var runs stepRuns
	r := newRig(t, prof, failOnceAfter(&runs, queue.Storing, queue.Recording))
	for _, j := range redepositUnchanged(t, r, calls, handlers.DefaultStorage(r.data)) {
		for _, state := range []queue.State{queue.Storing, queue.Recording} {
			if n := runs.of(state, j.ID); n != 2 {
				t.Errorf("job %s: %s ran %d times, want twice", j.ID, state, n)
			}
		}
	}
}

// redepositUnchanged deposits an object, the same object again, then a
// changed one, and checks what each left in storage (every target) and in
// the inventory, and what each job reported. It returns the three jobs.
func redepositUnchanged(t *testing.T, r *rig, calls func(jid string) []handlers.Callback, targets ...string) []*queue.Job {
	t.Helper()
	obj := object{"a.txt": []byte("alpha\n"), "deep/b.txt": []byte("beta\n")}
	first := r.deposit("/first.checkm", obj, "local_id", "same-1")
	ark := r.checkStored(first, obj)
	r.checkOwnRecord(first, ark, 1)
	was := r.versionRecord(ark, 1)
	keys := map[string][]string{}
	for _, target := range targets {
		keys[target] = allKeys(t, target)
	}

	again := r.deposit("/again.checkm", obj, "local_id", "same-1")
	if got := r.checkStored(again, obj); got != ark || again.Store.Mode != "update" {
		t.Fatalf("the same object again: %s (mode %s), want %s as an update", got, again.Store.Mode, ark)
	}
	if v, err := r.p.Primary().Latest(t.Context(), ark); err != nil || v.Number != 1 {
		t.Errorf("after the same object again: version %d (%v), want still 1", v.Number, err)
	}
	for target, before := range keys {
		if after := allKeys(t, target); !slices.Equal(after, before) {
			t.Errorf("%s: the unchanged deposit wrote %d keys", target, len(after)-len(before))
		}
	}
	if now := r.versionRecord(ark, 1); !sameRecord(now, was) {
		t.Errorf("the unchanged deposit %s changed the record of version 1:\nbefore %s\nafter  %s", again.ID, asJSON(was), asJSON(now))
	}
	if d, _ := r.p.Inventory().Object(t.Context(), ark); len(d.Versions) != 1 || d.Object.LatestVersion != 1 {
		t.Errorf("inventory after the unchanged deposit: %d versions, latest %d; want 1, 1", len(d.Versions), d.Object.LatestVersion)
	}
	// The depositor is told: the job's inventory node, its message, the
	// callback, the batch report.
	if again.Inventory == nil || !again.Inventory.Unchanged || again.Inventory.Version != 1 {
		t.Errorf("job %s: inventory node %+v, want unchanged, version 1", again.ID, again.Inventory)
	}
	const note = "unchanged: version 1 already held this content; no version was made"
	if again.Status.Message != note {
		t.Errorf("job %s: message %q, want %q", again.ID, again.Status.Message, note)
	}
	if cbs := calls(again.ID); len(cbs) == 0 || !cbs[len(cbs)-1].Unchanged || cbs[len(cbs)-1].Version != 1 || cbs[len(cbs)-1].ARK != ark {
		t.Errorf("job %s: callbacks %+v, want one saying unchanged, version 1 of %s", again.ID, cbs, ark)
	}
	if line := r.reportLine(again); !strings.Contains(line, ark) || !strings.Contains(line, note) {
		t.Errorf("job %s: report line %q, want %s and %q", again.ID, line, ark, note)
	}

	// Changed content: a version of its own, with its own events, and
	// version 1's record as it was.
	changed := object{"a.txt": []byte("alpha, revised\n"), "deep/b.txt": []byte("beta\n")}
	third := r.deposit("/third.checkm", changed, "local_id", "same-1")
	if got := r.checkStored(third, changed); got != ark {
		t.Fatalf("changed content: %s, want %s", got, ark)
	}
	r.checkOwnRecord(third, ark, 2)
	if now := r.versionRecord(ark, 1); !sameRecord(now, was) {
		t.Errorf("the changed deposit %s changed the record of version 1:\nbefore %s\nafter  %s", third.ID, asJSON(was), asJSON(now))
	}
	if third.Inventory == nil || third.Inventory.Unchanged || third.Inventory.Version != 0 || third.Status.Message != "" {
		t.Errorf("job %s (changed content): inventory node %+v, message %q; want neither to say unchanged", third.ID, third.Inventory, third.Status.Message)
	}
	if cbs := calls(third.ID); len(cbs) == 0 || cbs[len(cbs)-1].Unchanged || cbs[len(cbs)-1].Version != 0 {
		t.Errorf("job %s (changed content): callbacks %+v, want one not saying unchanged", third.ID, cbs)
	}
	if line := r.reportLine(third); strings.Contains(line, "unchanged") {
		t.Errorf("job %s (changed content): report line %q says unchanged", third.ID, line)
	}
	return []*queue.Job{first, again, third}
}

// checkOwnRecord asserts that version n of ark is recorded as job j's
// deposit: its row names the job, with one ingestion event, the job's, and
// a replication event for each copy; and that the job does not say it was
// unchanged.
func (r *rig) checkOwnRecord(j *queue.Job, ark string, n int) {
	r.t.Helper()
	rec := r.versionRecord(ark, n)
	if rec.Job != j.ID || rec.Batch != j.BatchID {
		r.t.Errorf("%s version %d: recorded from job %s of %s, want job %s of %s", ark, n, rec.Job, rec.Batch, j.ID, j.BatchID)
	}
	count := map[string]int{}
	for _, e := range rec.Events {
		count[e.Type]++
		if e.Type == inventory.EventIngestion && !strings.HasSuffix(e.Detail, "job "+j.ID) {
			r.t.Errorf("%s version %d: ingestion event %q, want job %s's", ark, n, e.Detail, j.ID)
		}
	}
	if count[inventory.EventIngestion] != 1 || count[inventory.EventReplication] != len(rec.Replicas) ||
		count[inventory.EventIdentifierAssignment] != 1 {
		r.t.Errorf("%s version %d: events %v with %d copies; want one ingestion, one identifier assignment, a replication per copy",
			ark, n, count, len(rec.Replicas))
	}
	if j.Inventory == nil || j.Inventory.Unchanged || j.Status.Message != "" {
		r.t.Errorf("job %s: inventory node %+v, message %q; want neither to say unchanged", j.ID, j.Inventory, j.Status.Message)
	}
}

// versionRecord is the inventory's record of version n of ark.
func (r *rig) versionRecord(ark string, n int) inventory.Record {
	r.t.Helper()
	d, err := r.p.Inventory().Object(r.t.Context(), ark)
	if err != nil {
		r.t.Fatalf("inventory: %s: %v", ark, err)
	}
	i := slices.IndexFunc(d.Versions, func(rec inventory.Record) bool { return rec.Version == n })
	if i < 0 {
		r.t.Fatalf("inventory: %s has no version %d: %s", ark, n, asJSON(d))
	}
	return d.Versions[i]
}

// versionRecordFiles are the files of version n of ark as the inventory
// records them.
func (r *rig) versionRecordFiles(ark string, n int) []storage.File {
	var out []storage.File
	for _, f := range r.versionRecord(ark, n).Files {
		out = append(out, storage.File{Name: f.Name, Size: f.Size, SHA256: f.SHA256})
	}
	return out
}

// sameRecord compares two records as the inventory gives them back.
func sameRecord(a, b inventory.Record) bool { return asJSON(a) == asJSON(b) }

func asJSON(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}

// reportLine is job j's line in its batch's report.
func (r *rig) reportLine(j *queue.Job) string {
	r.t.Helper()
	var b *queue.Batch
	r.read(func() (err error) { b, err = r.q.LoadBatch(r.t.Context(), j.BatchID); return err })
	rep := reactor.Report{StatusReport: queue.StatusReport{SuccessfulJobs: []string{j.ID}}}
	_, body, err := r.p.ReportText(r.t.Context(), b, rep)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), j.ID+" ") {
			return l
		}
	}
	r.t.Fatalf("the report of %s does not list job %s:\n%s", b.ID, j.ID, body)
	return ""
}

// callbackProfile is the default profile with a callback that keeps what
// it receives: calls returns a job's callbacks.
func callbackProfile(t *testing.T) (*profile.Profile, func(jid string) []handlers.Callback) {
	var mu sync.Mutex
	got := map[string][]handlers.Callback{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var cb handlers.Callback
		if err := json.NewDecoder(req.Body).Decode(&cb); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		got[cb.JobID] = append(got[cb.JobID], cb)
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	prof := profile.Default()
	prof.Callback = srv.URL + "/callback"
	return prof, func(jid string) []handlers.Callback {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got[jid])
	}
}
