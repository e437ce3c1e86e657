package queue_test

import (
	"fmt"
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
