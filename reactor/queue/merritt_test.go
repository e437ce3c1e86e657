package queue_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/reactor/queue"
)

// A job and a batch written with Merritt's keys read with ingestq's too;
// where both have a value, ingestq's wins; nothing is written back.
func TestMerrittKeysAreRead(t *testing.T) {
	r := newRun(t)
	b := r.processing(true)
	config := `{"profile":"merritt_demo","jobID":"jid-5d1c","digestType":"SHA-256","digestValue":"ab","size":0,` +
		`"filename":"a.pdf","responseForm":"xml","response_type":"json","title":"T","profile_name":"","localID":"x;y"}`
	created, err := r.q.CreateJob(t.Context(), b, queue.JobSpec{Priority: 5})
	r.ok(err)
	r.raw("/jobs/"+created.ID+"/configuration", config)
	j, err := r.q.LoadJob(t.Context(), created.ID)
	r.ok(err)
	want := map[string]any{"profile_name": "merritt_demo", "hash_algorithm": "sha256", "hash_value": "ab", "file_name": "a.pdf",
		"response_type": "json", "erc_what": "T", "local_id": "x;y"}
	for k, v := range want {
		if j.Config.Map()[k] != v {
			t.Errorf("configuration %s = %v, want %v", k, j.Config.Map()[k], v)
		}
	}
	if _, ok := j.Config.Map()["file_size"]; ok {
		t.Errorf("size 0 (Merritt's \"not given\") became file_size %v", j.Config.Map()["file_size"])
	}
	if data, _, err := r.conn.Get(r.q.Path("/jobs/" + created.ID + "/configuration")); err != nil || string(data) != config {
		t.Errorf("configuration rewritten: %s %v", data, err)
	}

	mb, err := r.q.CreateBatch(t.Context(), queue.SubmissionOf(map[string]any{"profile": "merritt_demo", "type": "batchManifestContainer", "objectID": "ark:/1/x"}))
	r.ok(err)
	got, err := r.q.LoadBatch(t.Context(), mb.ID)
	r.ok(err)
	if got.Profile() != "merritt_demo" || got.Submission.Map()["type"] != "manifest" || got.Submission.Map()["primary_id"] != "ark:/1/x" {
		t.Errorf("batch read as profile %q, submission %v", got.Profile(), got.Submission)
	}
}

// A job asked to record its id carries it as configuration.jobID, where
// mrt-zk's Job.jid() reads it; the caller's map is left alone, and a job
// created as mrt-zk creates one gets its configuration as given.
func TestRecordJobID(t *testing.T) {
	r := newRun(t)
	b := r.processing(true)
	cfg := queue.JobConfig{Profile: "demo"}
	j, err := r.q.CreateJob(t.Context(), b, queue.JobSpec{Priority: 5, Config: cfg, RecordID: true})
	r.ok(err)
	plain, err := r.q.CreateJob(t.Context(), b, queue.JobSpec{Priority: 5, Config: cfg})
	r.ok(err)
	if cfg.JobID != "" {
		t.Errorf("the caller's configuration was changed: %v", cfg)
	}
	for jid, want := range map[string]any{j.ID: j.ID, plain.ID: nil} {
		loaded, err := r.q.LoadJob(t.Context(), jid)
		r.ok(err)
		if loaded.Config.Map()["jobID"] != want {
			t.Errorf("job %s: jobID %v, want %v", jid, loaded.Config.Map()["jobID"], want)
		}
	}
	if j.Config.Map()["jobID"] != j.ID {
		t.Errorf("returned job's configuration %v, want its jobID", j.Config)
	}
}

// Merritt's batch handler (mrt-ingest's consumer/BatchConsumer.java) makes
// a batch's jobs, then moves the batch to Reporting and unlocks it, while
// the jobs run: mrt-zk's reporter (acquireBatchForReporting) takes such a
// batch once its batch-processing is empty. It is not taken for its report
// before its job is done, and check finds nothing wrong with it meanwhile.
func TestMerrittHandlerLeavesItsBatchReporting(t *testing.T) {
	r := newRun(t)
	b := r.processing(false)
	j := r.job(b, "jid0", 5, nil)
	// mrt-zk's setStatus(Reporting) then unlock, two requests, as Java writes them.
	r.raw("/batches/"+b.ID+"/status", fmt.Sprintf(`{"message":"","status":"Reporting","last_modified":%q}`,
		time.Now().Format(queue.TimeLayout)))
	r.ok(r.conn.Delete(r.q.Path("/batches/"+b.ID+"/lock"), -1))

	got, _, err := r.q.AcquireCompletedBatch(t.Context(), []string{b.ID}, nil)
	r.ok(err)
	if got != nil {
		t.Fatalf("batch %s taken for its report while its job %s is Pending", got.ID, j.ID)
	}
	v, w, err := r.q.CheckAll(t.Context(), queue.CheckOptions{})
	r.ok(err)
	if len(v)+len(w) != 0 {
		t.Fatalf("check of a batch Merritt's handler left Reporting: violations %v, warnings %v", v, w)
	}
	r.pipeline(j.ID, queue.Completed, "", false)
	got, _, err = r.q.AcquireCompletedBatch(t.Context(), []string{b.ID}, nil)
	r.ok(err)
	if got == nil || got.ID != b.ID || got.State() != queue.Reporting || !got.Locked {
		t.Fatalf("once its job is done, acquired %v; want %s locked in Reporting", got, b.ID)
	}
}

// A job's identifiers always hold local_id as a list, [] when the depositor
// gave none: mrt-zk's Job.localId() casts it to a JSONArray (Merritt's batch
// report calls it for every job) and mrt-ingest's JSONUtil reads it with
// getJSONArray, so a null threw in both. Created with a primary id alone, and
// changed to one, the node says [].
func TestIdentifiersWithoutLocalIDsWriteAList(t *testing.T) {
	r := newRun(t)
	b := r.processing(true)
	j, err := r.q.CreateJob(t.Context(), b, queue.JobSpec{Priority: 5, Identifiers: &queue.Identifiers{PrimaryID: "ark:/99999/fk4a"}})
	r.ok(err)
	localIDs := func() string {
		t.Helper()
		data, _, err := r.conn.Get(r.q.Path("/jobs/" + j.ID + "/identifiers"))
		r.ok(err)
		var ids map[string]json.RawMessage
		r.ok(json.Unmarshal(data, &ids))
		return string(ids["local_id"])
	}
	if got := localIDs(); got != "[]" {
		t.Errorf("created: local_id %s, want []", got)
	}
	j = r.acquire(queue.Pending, j.ID)
	r.ok(r.q.SetJobStatus(t.Context(), j, queue.Estimating, queue.JobChange{Identifiers: &queue.Identifiers{PrimaryID: "ark:/99999/fk4b"}}))
	if got := localIDs(); got != "[]" {
		t.Errorf("changed: local_id %s, want []", got)
	}
}

// mrt-zk's Java storage lock is persistent (MerrittLocks.lockObjectStorage):
// one Merritt's storage service left when it stopped holds back every store
// of the object until someone deletes it. check warns of object locks older
// than --lock-age as of job locks, and says of one that no session holds
// that it is persistent; a younger one is no finding.
func TestCheckWarnsOfOldObjectLocks(t *testing.T) {
	r := newRun(t)
	ctx := t.Context()
	r.raw("/locks/storage/ark_99999_fk4left", "")
	r.ok(r.conn.Delete(r.q.Path("/locks/localid"), -1)) // as Merritt's Ruby init_locks leaves it
	ok, err := r.q.LockInventory(ctx, "ark:/99999/fk4held", "")
	r.ok(err)
	if !ok {
		t.Fatal("inventory lock not taken")
	}
	v, w, err := r.q.CheckAll(ctx, queue.CheckOptions{LockAge: time.Nanosecond})
	r.ok(err)
	if len(v) > 0 {
		t.Errorf("violations %v, want none", v)
	}
	want := map[string]string{
		"/locks/storage/ark_99999_fk4left":   "by no session: a persistent lock",
		"/locks/inventory/ark_99999_fk4held": "by session 0x",
	}
	for _, x := range w {
		if has, ok := want[x.Path]; ok && strings.Contains(x.Problem, has) && !x.Since.IsZero() {
			delete(want, x.Path)
		}
	}
	for p, has := range want {
		t.Errorf("no warning %s: …%s… (with its since) in %v", p, has, w)
	}
	_, w, err = r.q.CheckAll(ctx, queue.CheckOptions{})
	r.ok(err)
	if len(w) > 0 {
		t.Errorf("with the default lock age, warnings %v, want none", w)
	}
}

// mrt-zk's setStatus copies the old status JSON and puts its own keys over
// it, so a key another writer added survives Merritt's moves. ingestq's
// moves keep it too, on a job, a batch and an access request; its own
// fields are still written as ingestq means them.
func TestForeignStatusKeysSurviveMoves(t *testing.T) {
	r := newRun(t)
	const foreign = `"merritt_note":{"by":"admin","n":2}`
	withForeign := func(p string) {
		t.Helper()
		data, _, err := r.conn.Get(r.q.Path(p))
		r.ok(err)
		r.raw(p, strings.Replace(string(data), "{", "{"+foreign+",", 1))
	}
	kept := func(p string, want queue.State) {
		t.Helper()
		data, _, err := r.conn.Get(r.q.Path(p))
		r.ok(err)
		if !strings.Contains(string(data), foreign) || !strings.Contains(string(data), fmt.Sprintf(`"status":%q`, want)) {
			t.Errorf("%s after the move to %s: %s; want %s kept", p, want, data, foreign)
		}
	}
	b := r.batch()
	withForeign("/batches/" + b.ID + "/status")
	b, _, err := r.q.AcquirePendingBatch(t.Context(), nil)
	r.ok(err)
	r.ok(r.q.SetBatchStatus(t.Context(), b, queue.Processing, queue.BatchChange{Release: true}))
	kept("/batches/"+b.ID+"/status", queue.Processing)

	j := r.job(b, "jid0", 5, nil)
	withForeign("/jobs/" + j.ID + "/status")
	j = r.acquire(queue.Pending, j.ID)
	r.ok(r.q.SetJobStatus(t.Context(), j, queue.Estimating, queue.JobChange{Release: true}))
	kept("/jobs/"+j.ID+"/status", queue.Estimating)

	a, err := r.q.CreateAccess(t.Context(), queue.AccessSmall, map[string]any{"token": "abc"})
	r.ok(err)
	withForeign("/access/small/" + a.ID + "/status")
	a, err = r.q.AcquireAccess(t.Context(), queue.AccessSmall)
	r.ok(err)
	r.ok(r.q.MoveAccess(t.Context(), a, queue.Processing, "", nil))
	kept("/access/small/"+a.ID+"/status", queue.Processing)
}

// A job lock that is a persistent node (another program's: mrt-zk's Java
// takes its storage locks so) has no session: it is named as such, not as
// a session that may yet expire.
func TestPersistentJobLockIsNamed(t *testing.T) {
	r := newRun(t)
	b := r.processing(true)
	j := r.job(b, "jid0", 5, nil)
	r.raw("/jobs/"+j.ID+"/lock", "")
	j, err := r.q.LoadJob(t.Context(), j.ID)
	r.ok(err)
	if got := r.q.SessionHolder(t.Context(), j.LockSession); !j.Locked || !strings.Contains(got, "persistent") || strings.Contains(got, "died") {
		t.Errorf("locked %v by %q; want a persistent lock named", j.Locked, got)
	}
}

// mrt-zk moves a job's batch ref by a delete, then a create: a Merritt
// service paused between the two (a long GC, a slow server, a crash) leaves
// the batch-processing of a batch whose jobs it made (no job-count) empty
// for longer than settle. The job's node still names the batch, so the
// batch is not reported until the job's ref is back and done.
func TestCountlessBatchWaitsForAJobBetweenItsRefs(t *testing.T) {
	r := newRun(t)
	b := r.processing(true)
	j := r.job(b, "jid0", 5, nil)
	// Merritt's Estimating consumer (mrt-ingest's EstimateConsumer): status
	// Estimating, state ref moved, the batch ref deleted, and no create yet.
	r.raw("/jobs/"+j.ID+"/status", fmt.Sprintf(`{"status":"Estimating","last_modified":%q,"message":"","last_successful_status":"Pending","retry_count":0}`,
		time.Now().Format(queue.TimeLayout)))
	r.ok(r.conn.Delete(r.q.Path("/jobs/states/pending/05-"+j.ID), -1))
	r.raw("/jobs/states/estimating/05-"+j.ID, "")
	r.ok(r.conn.Delete(r.q.Path("/batches/"+b.ID+"/states/batch-processing/"+j.ID), -1))

	got, _, err := r.q.AcquireCompletedBatch(t.Context(), []string{b.ID}, nil)
	r.ok(err)
	if got != nil {
		t.Fatalf("batch %s taken for its report while its job %s is between its batch refs", got.ID, j.ID)
	}
	r.raw("/batches/"+b.ID+"/states/batch-completed/"+j.ID, "")
	got, _, err = r.q.AcquireCompletedBatch(t.Context(), []string{b.ID}, nil)
	r.ok(err)
	if got == nil || got.ID != b.ID {
		t.Fatalf("once its job's ref is back in a done bucket, acquired %v; want %s", got, b.ID)
	}
}

// encoding/json reads a status key of another case into the field
// ("Holder" as holder): such a key is the field's, not another writer's,
// so a move that drops the field (a release drops holder) does not write
// it back.
func TestStatusKeyOfAnotherCaseIsNotKept(t *testing.T) {
	r := newRun(t)
	b := r.processing(true)
	j := r.job(b, "jid0", 5, nil)
	p := "/jobs/" + j.ID + "/status"
	data, _, err := r.conn.Get(r.q.Path(p))
	r.ok(err)
	r.raw(p, strings.Replace(string(data), "{", `{"Holder":{"host":"gone","session":5},`, 1))
	j = r.acquire(queue.Pending, j.ID)
	r.ok(r.q.SetJobStatus(t.Context(), j, queue.Estimating, queue.JobChange{Release: true}))
	got, err := r.q.LoadJob(t.Context(), j.ID)
	r.ok(err)
	data, _, err = r.conn.Get(r.q.Path(p))
	r.ok(err)
	if got.Status.Holder != nil || strings.Contains(strings.ToLower(string(data)), `"holder"`) {
		t.Errorf("after a move that released the job, holder %+v, status %s; want none", got.Status.Holder, data)
	}
}

// ingestq's move marks the status as its own (JobStatus.Move), and the
// acquisition after it keeps the mark; mrt-zk's next move, which copies the
// status and writes its keys over it, keeps the key but no longer matches
// it: that move is another program's.
func TestIngestqMarksOnlyItsOwnMoves(t *testing.T) {
	r := newRun(t)
	b := r.batch()
	b, _, err := r.q.AcquirePendingBatch(t.Context(), nil)
	r.ok(err)
	j := r.job(b, "jid0", 5, nil)
	if got, err := r.q.LoadJob(t.Context(), j.ID); err != nil || got.MovedByIngestq() {
		t.Fatalf("a new job (%v): marked as moved by ingestq, %+v", err, got.Status)
	}
	j = r.acquire(queue.Pending, j.ID)
	r.ok(r.q.SetJobStatus(t.Context(), j, queue.Estimating, queue.JobChange{Release: true}))
	j = r.acquire(queue.Estimating, j.ID)
	if !j.MovedByIngestq() {
		t.Fatalf("ingestq's move to Estimating, after its acquisition: status %+v, not marked", j.Status)
	}
	p := "/jobs/" + j.ID + "/status"
	data, _, err := r.conn.Get(r.q.Path(p))
	r.ok(err)
	r.raw(p, strings.Replace(string(data), `"status":"Estimating"`, `"status":"Provisioning"`, 1))
	got, err := r.q.LoadJob(t.Context(), j.ID)
	r.ok(err)
	if got.Status.Move == "" || got.MovedByIngestq() {
		t.Fatalf("mrt-zk's move to Provisioning over ingestq's status: mark %q, ingestq's %v; want the old mark kept, not ingestq's", got.Status.Move, got.MovedByIngestq())
	}
}
