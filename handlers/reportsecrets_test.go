package handlers_test

import (
	"strings"
	"testing"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/reactor/queue"
)

// The e-mailed report names the batch's payload URL and each job's with
// their secrets masked (a password, a presigned URL's signature, a sig),
// as every door below admin shows them: its readers are the profile's
// notify addresses. The daemon's log shows none of them either.
func TestReportEmailMasksDepositorURLs(t *testing.T) {
	t.Parallel()
	var logs logtest.Buffer
	r, sink := mailingRig(t, withLogs(t, &logs))
	data := []byte("content of one.txt\n")
	file := withSecrets(r.content.put("/masked/one.txt", data), "?sig=sig-s3cret")
	payload := withSecrets(r.content.put("/masked/m.checkm", manifest("mrt-single-file-batch-manifest", fileRow(file, "one.txt", data))),
		"?X-Amz-Credential=AKIA%2F20261127&X-Amz-Signature=sig-s3cret")
	b := r.waitBatch(r.submit(payload).ID, queue.Completed, queue.Failed)
	if b.State() != queue.Completed {
		t.Fatalf("batch %s (%q), want Completed", b.State(), b.Status.Message)
	}
	var m sunkMail
	select {
	case m = <-sink.msgs: // Report runs before the batch moves: the sink has it already
	default:
		t.Fatalf("no report e-mailed (%d connections)", sink.accepts.Load())
	}
	_, body := m.read(t)
	if !strings.Contains(body, "Payload:   "+maskSecrets(payload)+"\n") || !strings.Contains(body, "  "+maskSecrets(file)+"\n") {
		t.Errorf("the report does not name the payload %q and the job's URL %q masked:\n%s", maskSecrets(payload), maskSecrets(file), body)
	}
	if strings.Contains(body, "s3cret") {
		t.Errorf("the report shows a secret (s3cret):\n%s", body)
	}
	if lines := logs.Lines("s3cret"); len(lines) > 0 {
		t.Errorf("the daemon's log shows a secret: %q", lines)
	}
}

// A payload refused for what it holds (empty, named .checkm and no
// manifest, submitted as a manifest and none, an object's manifest of the
// wrong kind) fails its batch or job with a message naming its URL with
// the secrets masked: the message is shown to every token and e-mailed in
// the report, and named the depositor's password and signature whole.
func TestPayloadRefusalsMaskTheURL(t *testing.T) {
	t.Parallel()
	r, sink := mailingRig(t)
	signed := "?X-Amz-Signature=sig-s3cret"
	data := []byte("hello\n")
	single := withSecrets(r.content.put("/s/single.checkm", manifest("mrt-single-file-batch-manifest", fileRow(r.content.put("/s/one.txt", data), "one.txt", data))), signed)
	cases := []struct {
		name, payload string
		extra         []string
		jobLevel      bool
	}{
		{"empty", withSecrets(r.content.put("/s/empty.txt", nil), signed), nil, false},
		{"named .checkm", withSecrets(r.content.put("/s/plain.checkm", data), signed), nil, false},
		{"not a manifest", withSecrets(r.content.put("/s/plain.txt", data), signed), []string{"type", handlers.SubmitManifest}, false},
		{"an object's manifest of the wrong kind", r.content.put("/s/batch.checkm", manifest("mrt-batch-manifest", row{url: single, size: -1})), nil, true},
	}
	for _, c := range cases {
		b := r.waitBatch(r.submit(c.payload, c.extra...).ID, queue.Completed, queue.Failed)
		msg, url := b.Status.Message, c.payload
		if c.jobLevel {
			for _, j := range r.jobsOf(b.ID) {
				msg, url = j.Status.Message, single
			}
		}
		if !strings.Contains(msg, maskSecrets(url)) || strings.Contains(msg, "s3cret") {
			t.Errorf("%s: message %q; want it to name %q, its secrets masked", c.name, msg, maskSecrets(url))
		}
	}
	for range cases {
		var m sunkMail
		select {
		case m = <-sink.msgs: // Report runs before the batch moves: the sink has each already
		default:
			t.Fatalf("%d reports e-mailed, want %d", len(cases)-len(sink.msgs), len(cases))
		}
		if _, body := m.read(t); strings.Contains(body, "s3cret") {
			t.Errorf("a report shows a secret (s3cret):\n%s", body)
		}
	}
}

// withSecrets is u with a depositor's password in it (pw-s3cret), and
// query (its secrets sig-s3cret) after it.
func withSecrets(u, query string) string {
	return strings.Replace(u, "http://", "http://depositor:pw-s3cret@", 1) + query
}

// maskSecrets is u of withSecrets as redact masks it.
var maskSecrets = strings.NewReplacer("pw-s3cret", "xxxxx", "sig-s3cret", "xxxxx").Replace
