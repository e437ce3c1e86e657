package handlers_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// merrittSubmission is a submission as Merritt's ingest service writes it
// (mrt-ingest handlers/batchProcess/HandlerSubmit.java), for one file. Merritt
// keeps its uploads on its own disk, so payload_url is the one ingestq key.
func merrittSubmission(profile, url, typ, alg, digest string, size int) map[string]any {
	return map[string]any{
		"batchID": "bid-" + uuid.NewString(), "profile": profile, "type": typ,
		"filename": "hello.txt", "size": size, "update": false, "submitter": "merritt-ui/jdoe", "responseForm": "xml",
		"creator": "Doe, Jane", "title": "A Merritt object", "date": "2026", "localID": "merritt-loc-1",
		"digestType": alg, "digestValue": digest, "notification": "jdoe@example.org",
		"notificationFormat": "xml", "submissionDate": "2026-11-23T10:00:00-08:00", "payload_url": url,
	}
}

// A batch submitted with Merritt's keys goes through: its profile, digest
// (named as Merritt names it), size (0 when not given), file name, ERC
// fields, local id, response form and batch manifest type are read, and its
// job carries what mrt-zk's readers need.
func TestMerrittSubmission(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	data := []byte("hello from Merritt\n")
	url := r.content.put("/merritt/hello.txt", data)
	sub := merrittSubmission(r.prof.Name, url, "file", "SHA-256", sha256hex(data), len(data))
	good, err := r.q.CreateBatch(t.Context(), queue.SubmissionOf(sub))
	r.ok(err)
	// The same with a wrong digest: it fails, so the digest was read.
	sub = merrittSubmission(r.prof.Name, r.content.put("/merritt/other/hello.txt", data), "file", "SHA-256", sha256hex([]byte("other")), len(data))
	bad, err := r.q.CreateBatch(t.Context(), queue.SubmissionOf(sub))
	r.ok(err)
	// Merritt's name for a batch manifest of single files.
	list := r.content.put("/merritt/list.checkm", manifest("mrt-single-file-batch-manifest", fileRow(url, "hello.txt", data)))
	listed, err := r.q.CreateBatch(t.Context(), queue.SubmissionOf(merrittSubmission(r.prof.Name, list, "batchManifestFile", "", "", 0)))
	r.ok(err)
	// Merritt writes size 0 when the depositor gave none, and MD5 so.
	unsizedURL := r.content.put("/merritt/unsized/hello.txt", data)
	sub = merrittSubmission(r.prof.Name, unsizedURL, "file", "MD5", fileRow(unsizedURL, "", data).digest, 0)
	sub["localID"] = "merritt-loc-2" // another object: one local id names one object
	unsized, err := r.q.CreateBatch(t.Context(), queue.SubmissionOf(sub))
	r.ok(err)
	// Merritt's own submission names its upload, which stays on its disk.
	sub = merrittSubmission(r.prof.Name, url, "file", "", "", 0)
	delete(sub, "payload_url")
	upload, err := r.q.CreateBatch(t.Context(), queue.SubmissionOf(sub))
	r.ok(err)

	if b := r.waitBatch(good.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("batch %s: %s", b.State(), b.Status.Message)
	}
	j := r.jobsOf(good.ID)["file"]
	r.checkStored(j, object{"hello.txt": data})
	if j.Profile() != r.prof.Name || j.Metadata == nil || *j.Metadata != (queue.Metadata{Who: "Doe, Jane", What: "A Merritt object", When: "2026"}) ||
		!slices.Equal(j.Identifiers.LocalIDs, []string{"merritt-loc-1"}) {
		t.Errorf("job %s: profile %q, metadata %+v, identifiers %+v", j.ID, j.Profile(), j.Metadata, j.Identifiers)
	}
	cfg := r.rawJSON("/jobs/" + j.ID + "/configuration")
	for k, want := range map[string]any{"response_type": "xml", "hash_algorithm": "sha256", "file_size": float64(len(data)), "submitter": "merritt-ui/jdoe"} {
		if cfg[k] != want {
			t.Errorf("configuration %s = %v, want %v", k, cfg[k], want)
		}
	}
	r.wantMrtZKReadable(j.ID)

	b := r.waitBatch(bad.ID, queue.Completed, queue.Failed)
	if b.State() != queue.Failed || len(b.Report.FailedJobs) != 1 {
		t.Fatalf("batch with a wrong digest: %s, report %+v", b.State(), b.Report)
	}
	failed, err := r.q.LoadJob(t.Context(), b.Report.FailedJobs[0])
	r.ok(err)
	if want := "sha256 mismatch: want " + sha256hex([]byte("other")); !strings.Contains(failed.Status.Message, want) {
		t.Errorf("job with a wrong digest: %q, want %q", failed.Status.Message, want)
	}

	if b := r.waitBatch(listed.ID, queue.Completed, queue.Failed); b.State() != queue.Completed || len(b.Report.SuccessfulJobs) != 1 {
		t.Fatalf("batchManifestFile batch %s: %s, report %+v", b.State(), b.Status.Message, b.Report)
	}
	if b := r.waitBatch(unsized.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Errorf("batch without a size: %s %q", b.State(), b.Status.Message)
	}
	want := `payload: submission has no payload_url, only the file name "hello.txt" of an upload that ingestq cannot fetch`
	if b := r.waitBatch(upload.ID, queue.Completed, queue.Failed); b.State() != queue.Failed || b.Status.Message != want {
		t.Errorf("batch of an upload: %s %q, want Failed %q", b.State(), b.Status.Message, want)
	}
}

// Merritt's batch handler makes the jobs with mrt-zk's Job.createJob and
// createJobConfiguration (profile_name, submitter, payload_url,
// payload_type, response_type: no file name), moves the batch to Reporting
// and unlocks it (mrt-ingest's BatchConsumer); the daemon, which does not
// work intake, runs the job, a single file named by its URL, and reports
// the batch once, when the job is done.
func TestMrtZKJobOfAFileFromMerrittsBatchHandler(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil, func(_ *handlers.Config, rc *reactor.Config) {
		rc.Roles = slices.DeleteFunc(reactor.AllRoles(), func(x reactor.Role) bool { return x == reactor.RoleIntake })
	})
	data := []byte("hello from a Merritt job\n")
	url := r.content.put("/merritt/job/hello.txt", data)
	ctx := t.Context()
	b, err := r.q.CreateBatch(ctx, queue.SubmissionOf(map[string]any{"batchID": "bid-" + uuid.NewString(), "profile": r.prof.Name, "type": "file"}))
	r.ok(err)
	b, _, err = r.q.AcquirePendingBatch(ctx, func(x *queue.Batch) bool { return x.ID == b.ID })
	r.ok(err)
	// mrt-zk writes the configuration under the job's lock, before its
	// status and refs: the job is made with it, naming no file.
	j, err := r.q.CreateJob(ctx, b, queue.JobSpec{Priority: 5, Config: queue.JobConfig{Profile: r.prof.Name,
		Submitter: "merritt-ui/jdoe", PayloadURL: url, PayloadType: "file", ResponseType: "xml"}})
	r.ok(err)
	conn := zktest.Connect(t)
	if cfg := r.rawJSON("/jobs/" + j.ID + "/configuration"); cfg["file_name"] != nil {
		t.Fatalf("configuration %v names a file; mrt-zk's createJobConfiguration names none", cfg)
	}
	status := fmt.Sprintf(`{"message":"","status":"Reporting","last_modified":%q}`, time.Now().Format(queue.TimeLayout))
	_, err = conn.Set(r.q.Path("/batches/"+b.ID+"/status"), []byte(status), -1)
	r.ok(err)
	r.ok(conn.Delete(r.q.Path("/batches/"+b.ID+"/lock"), -1))

	done := r.waitBatch(b.ID, queue.Completed, queue.Failed)
	job, err := r.q.LoadJob(ctx, j.ID)
	r.ok(err)
	if done.State() != queue.Completed || done.Report == nil || !slices.Equal(done.Report.SuccessfulJobs, []string{j.ID}) {
		t.Fatalf("batch %s %q, report %+v; job %s %q; want Completed naming the job", done.State(), done.Status.Message, done.Report,
			job.State(), job.Status.Message)
	}
	r.checkStored(job, object{"hello.txt": data})
}

// rawJSON reads a node as JSON, as a foreign reader would.
func (r *rig) rawJSON(p string) map[string]any {
	r.t.Helper()
	data, _, err := zktest.Connect(r.t).Get(r.q.Path(p))
	r.ok(err)
	var m map[string]any
	r.ok(json.Unmarshal(data, &m))
	return m
}

// wantMrtZKReadable asserts a job's nodes hold what mrt-zk's Job reads
// (jid(), profileName(), submitter(), payloadUrl(), payloadType(),
// responseType(), primaryId(), localId()), as strings, and a local_id list.
func (r *rig) wantMrtZKReadable(jid string) {
	r.t.Helper()
	cfg := r.rawJSON("/jobs/" + jid + "/configuration")
	if cfg["jobID"] != jid {
		r.t.Errorf("configuration jobID = %v, want %s", cfg["jobID"], jid)
	}
	for _, k := range []string{"profile_name", "submitter", "payload_url", "payload_type", "response_type"} {
		if s, ok := cfg[k].(string); !ok || s == "" {
			r.t.Errorf("configuration %s = %v, want a string", k, cfg[k])
		}
	}
	ids := r.rawJSON("/jobs/" + jid + "/identifiers")
	if _, ok := ids["primary_id"].(string); !ok {
		r.t.Errorf("identifiers primary_id = %v, want a string", ids["primary_id"])
	}
	if _, ok := ids["local_id"].([]any); !ok {
		r.t.Errorf("identifiers local_id = %v, want a list", ids["local_id"])
	}
}

func (r *rig) ok(err error) {
	r.t.Helper()
	if err != nil {
		r.t.Fatal(err)
	}
}

// A batch a foreign writer made without its submission node fails saying
// so, naming the node; it said `unknown profile ""`.
func TestBatchWithoutASubmissionSaysSo(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	b, err := r.q.CreateBatch(t.Context(), queue.SubmissionOf(map[string]any{}))
	r.ok(err)
	want := "payload: the batch has no submission: /batches/" + b.ID + "/submission is missing, or names no payload_url and no profile_name"
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Failed || b.Status.Message != want {
		t.Errorf("batch %s %q, want Failed %q", b.State(), b.Status.Message, want)
	}
}

// A job configuration as Merritt's ingest service writes it (its package
// type, file name and no payload_type) fails saying Merritt's type was
// seen and not read as ingestq's; an empty one fails saying it is empty
// (`payload_type ""` and `unknown profile ""` before).
func TestMerrittOrEmptyJobConfigurationSaysWhatWasSeen(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil, func(_ *handlers.Config, rc *reactor.Config) {
		rc.Roles = slices.DeleteFunc(reactor.AllRoles(), func(x reactor.Role) bool { return x == reactor.RoleIntake })
	})
	ctx := t.Context()
	b, err := r.q.CreateBatch(ctx, queue.SubmissionOf(map[string]any{"batchID": "bid-" + uuid.NewString(), "profile": r.prof.Name, "type": "file"}))
	r.ok(err)
	b, _, err = r.q.AcquirePendingBatch(ctx, func(x *queue.Batch) bool { return x.ID == b.ID })
	r.ok(err)
	want := map[string]string{}
	merritt, err := r.q.CreateJob(ctx, b, queue.JobSpec{Priority: 5, Config: queue.JobConfigOf(map[string]any{"profile": r.prof.Name,
		"type": "file", "filename": "hello.txt", "payload_url": r.content.put("/merritt/job/hello.txt", []byte("hello\n"))})})
	r.ok(err)
	want[merritt.ID] = `configuration: no payload_type, only Merritt's type "file", which is not read as ingestq's: want payload_type file, container or object_manifest`
	empty, err := r.q.CreateJob(ctx, b, queue.JobSpec{Priority: 5})
	r.ok(err)
	want[empty.ID] = "the job's configuration is empty (/jobs/" + empty.ID + "/configuration: missing, empty or {})"
	n := len(want)
	r.ok(r.q.SetBatchStatus(ctx, b, queue.Processing, queue.BatchChange{JobCount: &n, Release: true}))

	r.waitBatch(b.ID, queue.Completed, queue.Failed)
	for jid, msg := range want {
		j, err := r.q.LoadJob(ctx, jid)
		r.ok(err)
		if j.State() != queue.Failed || !strings.Contains(j.Status.Message, msg) {
			t.Errorf("job %s: %s %q, want Failed saying %q", jid, j.State(), j.Status.Message, msg)
		}
	}
}
