package handlers_test

import (
	"crypto/md5"
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/reactor/queue"
)

// A batch manifest submitted with fields for one object (local_id,
// erc_what) keeps its lines' ids, and says so: the batch's message, from
// its move to Processing to its report, names the fields it did not use
// (decision 543 (c): they were dropped silently), and so does its e-mailed
// report. The note fails nothing: the batch is Completed. An object
// manifest, one object, takes them, and has no note.
func TestBatchManifestNamesTheSubmissionFieldsItLeavesUnused(t *testing.T) {
	t.Parallel()
	r, sink := mailingRig(t)
	rows := contentRows(r, "/unused/", "a.txt", "b.txt")
	for i := range rows {
		rows[i].local = "line-" + rows[i].name
	}
	b := r.submit(r.content.put("/unused/batch.checkm", manifest("mrt-single-file-batch-manifest", rows...)),
		"local_id", "body-id", "erc_what", "Body title")
	const note = "note: the submission's local_id, erc_what are not used: the payload is a batch manifest, whose lines give each object's own"
	if p := r.waitBatch(b.ID, queue.Processing); p.Status.Message != note {
		t.Errorf("batch message at Processing %q, want %q", p.Status.Message, note)
	}
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed || b.Status.Message != note {
		t.Errorf("batch %s %q, want Completed %q", b.State(), b.Status.Message, note)
	}
	select { // sent before the batch moved
	case m := <-sink.msgs:
		if !strings.Contains(m.data, "completed: 2 completed, 0 failed") || !strings.Contains(m.data, "\r\n"+note+"\r\n") ||
			strings.Contains(m.data, "The batch failed") {
			t.Errorf("the e-mailed report %q: want it completed, with the note", m.data)
		}
	default:
		t.Fatal("no report e-mailed")
	}
	var locals []string
	for _, j := range r.jobsOf(b.ID) {
		if j.Identifiers != nil {
			locals = append(locals, j.Identifiers.LocalIDs...)
		}
	}
	if slices.Sort(locals); !slices.Equal(locals, []string{"line-a.txt", "line-b.txt"}) {
		t.Errorf("the jobs' local ids %v, want their lines'", locals)
	}

	data := []byte("one object\n")
	one := r.submit(r.content.put("/unused/object.checkm", manifest("mrt-ingest-manifest",
		fileRow(r.content.put("/unused/one.txt", data), "one.txt", data))), "local_id", "object-id")
	if one = r.waitBatch(one.ID, queue.Completed, queue.Failed); one.State() != queue.Completed || one.Status.Message != "" {
		t.Errorf("object manifest's batch %s %q, want Completed with no message", one.State(), one.Status.Message)
	}
	for _, j := range r.jobsOf(one.ID) {
		if j.Identifiers == nil || !slices.Equal(j.Identifiers.LocalIDs, []string{"object-id"}) {
			t.Errorf("object manifest's job %s identifiers %+v, want local id object-id", j.ID, j.Identifiers)
		}
	}
}

// A batch that fails and has a note: its e-mailed report says how many jobs
// failed as the failure, and the note on its own line, not as part of why
// the batch failed (the note fails nothing); the message keeps both, and
// so does the report asked for again.
func TestBatchManifestNoteIsNoReasonTheBatchFailed(t *testing.T) {
	t.Parallel()
	r, sink := mailingRig(t)
	rows := contentRows(r, "/unused-failed/", "good.txt", "bad.txt")
	wrong := md5.Sum([]byte("something else"))
	rows[1].digest = hex.EncodeToString(wrong[:]) // bad.txt's job fails
	b := r.submit(r.content.put("/unused-failed/batch.checkm", manifest("mrt-single-file-batch-manifest", rows...)),
		"local_id", "body-id")
	const note = "note: the submission's local_id is not used: the payload is a batch manifest, whose lines give each object's own"
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Failed || b.Status.Message != "1 of 2 jobs failed; "+note {
		t.Errorf("batch %s %q, want Failed %q", b.State(), b.Status.Message, "1 of 2 jobs failed; "+note)
	}
	select { // sent before the batch moved
	case m := <-sink.msgs:
		if !strings.Contains(m.data, "\r\nThe batch failed: 1 of 2 jobs failed\r\n") || !strings.Contains(m.data, "\r\n"+note+"\r\n") {
			t.Errorf("the e-mailed report %q: want the failure alone after \"The batch failed:\", and the note on its own line", m.data)
		}
	default:
		t.Fatal("no report e-mailed")
	}
	// Reported again (`ingestq report`), the batch keeps its note.
	if _, err := r.q.ReportBatch(t.Context(), b.ID); err != nil {
		t.Fatal(err)
	}
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.Status.Message != "1 of 2 jobs failed; "+note {
		t.Errorf("batch reported again %s %q, want %q", b.State(), b.Status.Message, "1 of 2 jobs failed; "+note)
	}
	select {
	case m := <-sink.msgs:
		if !strings.Contains(m.data, "\r\n"+note+"\r\n") {
			t.Errorf("the report e-mailed again %q: want the note on its own line", m.data)
		}
	default:
		t.Fatal("no report e-mailed again")
	}
}

// mailingRig is a rig whose profile's reports are e-mailed to sink, and
// opts its hooks.
func mailingRig(t *testing.T, opts ...rigOption) (*rig, *smtpSink) {
	sink := startSMTPSink(t)
	prof := profile.Default()
	prof.Notify = []string{"curator@example.org"}
	return newRig(t, prof, append([]rigOption{mailsTo(sink)}, opts...)...), sink
}

// contentRows are manifest rows for files named names, served under dir,
// each holding "content of NAME".
func contentRows(r *rig, dir string, names ...string) []row {
	var rows []row
	for _, name := range names {
		data := []byte("content of " + name + "\n")
		rows = append(rows, fileRow(r.content.put(dir+name, data), name, data))
	}
	return rows
}
