package handlers_test

import (
	"strings"
	"testing"

	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/reactor/queue"
)

// The e-mailed report names the batch's payload URL and each job's with
// their secrets masked (a password, a presigned URL's signature, a sig),
// as every door below admin shows them: its readers are the profile's
// notify addresses. The daemon's log shows none of them either.
func TestReportEmailMasksDepositorURLs(t *testing.T) {
	t.Parallel()
	sink := startSMTPSink(t)
	prof := profile.Default()
	prof.Notify = []string{"curator@example.org"}
	var logs logtest.Buffer
	r := newRig(t, prof, mailsTo(sink), withLogs(t, &logs))
	withSecrets := func(u, query string) string {
		return strings.Replace(u, "http://", "http://depositor:pw-s3cret@", 1) + query
	}
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
	mask := func(u string) string {
		return strings.NewReplacer("pw-s3cret", "xxxxx", "sig-s3cret", "xxxxx").Replace(u)
	}
	if !strings.Contains(body, "Payload:   "+mask(payload)+"\n") || !strings.Contains(body, "  "+mask(file)+"\n") {
		t.Errorf("the report does not name the payload %q and the job's URL %q masked:\n%s", mask(payload), mask(file), body)
	}
	if strings.Contains(body, "s3cret") {
		t.Errorf("the report shows a secret (s3cret):\n%s", body)
	}
	if lines := logs.Lines("s3cret"); len(lines) > 0 {
		t.Errorf("the daemon's log shows a secret: %q", lines)
	}
}
