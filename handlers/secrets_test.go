package handlers_test

import (
	"strings"
	"testing"

	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/reactor/queue"
)

// A depositor's URL with a password (http://user:pass@host/…) is never
// shown with it: not in the failure of a download that is refused (the
// HTTP client's url.Error is logged at each failed attempt) or answered
// 404, not in the daemon's log, and not in the PREMIS event of a file
// downloaded from it, which the inventory keeps for good; nor that of a
// payload refused (a scheme the profile does not allow, a manifest
// profile ingestq does not read).
func TestDepositorPasswordNeverShown(t *testing.T) {
	t.Parallel()
	var logs logtest.Buffer
	r := newRig(t, profile.Default(), withLogs(t, &logs))
	withPassword := func(u string) string { return strings.Replace(u, "http://", "http://depositor:s3cret@", 1) }
	hello := []byte("hello\n")

	for _, c := range []struct{ name, url, says string }{
		{"refused", withPassword(refusedURL(t, "/refused.txt")), "connection refused"},
		{"404", withPassword(r.content.srv.URL + "/gone.txt"), "HTTP 404 Not Found"}, // never put
	} {
		b := r.submit(r.content.put("/"+c.name+".checkm", manifest("mrt-ingest-manifest", fileRow(c.url, "f.txt", hello))))
		if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Failed {
			t.Fatalf("%s: batch %s, want Failed", c.name, b.State())
		}
		msg := r.jobsOf(b.ID)["manifest"].Status.Message
		namesOnce(t, msg, c.url, c.says)
		if !strings.Contains(msg, "depositor:xxxxx@") {
			t.Errorf("%s: message %q, want the URL's user with its password masked", c.name, msg)
		}
	}
	logs.WaitFor(t, "http: request failed", "depositor:xxxxx@") // the refused download's attempts

	odd := withPassword(r.content.put("/odd.checkm", manifest("mrt-odd-manifest", fileRow("http://example.org/f.txt", "f.txt", hello))))
	for _, c := range []struct{ name, payload, says string }{
		{"a scheme the profile does not allow", "ftp://depositor:s3cret@example.org/obj.checkm",
			`payload_url "ftp://depositor:xxxxx@example.org/obj.checkm": scheme "ftp" not allowed`},
		{"a manifest profile ingestq does not read", odd, strings.Replace(odd, "s3cret", "xxxxx", 1) + `:2: unknown profile`},
	} {
		b := r.waitBatch(r.submit(c.payload).ID, queue.Completed, queue.Failed)
		if b.State() != queue.Failed || !strings.Contains(b.Status.Message, c.says) {
			t.Errorf("a payload of %s: batch %s %q, want Failed saying %q", c.name, b.State(), b.Status.Message, c.says)
		}
	}

	good := withPassword(r.content.put("/f.txt", hello))
	b := r.submit(r.content.put("/good.checkm", manifest("mrt-ingest-manifest", fileRow(good, "f.txt", hello))))
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("batch %s (%q), want Completed", b.State(), b.Status.Message)
	}
	ark := r.checkStored(r.jobsOf(b.ID)["manifest"], map[string][]byte{"f.txt": hello})
	detail, err := r.p.Inventory().Object(t.Context(), ark)
	if err != nil || len(detail.Versions) != 1 {
		t.Fatalf("inventory of %s: %+v, %v", ark, detail, err)
	}
	downloaded := 0
	for _, e := range detail.Versions[0].Events {
		if strings.Contains(e.Detail, "s3cret") {
			t.Errorf("event %s of %s: %q", e.Type, e.File, e.Detail)
		}
		if strings.Contains(e.Detail, "downloaded from "+strings.Replace(good, "s3cret", "xxxxx", 1)) {
			downloaded++
		}
	}
	if downloaded != 1 {
		t.Errorf("%d events say the file was downloaded from its URL, password masked; want 1: %+v", downloaded, detail.Versions[0].Events)
	}
	if lines := logs.Lines("s3cret"); len(lines) > 0 {
		t.Errorf("the daemon's log shows the password: %q", lines)
	}
}

// A requeued job fetches its object manifest again, and the log line that
// says so names the payload URL with its secrets masked, as every other
// does: its password, and a secret in its query (a presigned URL's
// signature, another daemon's hand-off key).
func TestRefetchedManifestURLMasked(t *testing.T) {
	t.Parallel()
	var logs logtest.Buffer
	r := newRig(t, profile.Default(), withLogs(t, &logs))
	const secret = "s3cretKEY"
	data := []byte("fixed later\n")
	rows := []row{fileRow(r.content.put("/refetch/f.txt", data), "f.txt", data)}
	rows[0].digest = strings.Repeat("0", 32) // wrong on purpose
	manifestURL := r.content.put("/refetch.checkm", manifest("mrt-ingest-manifest", rows...))
	payload := strings.Replace(manifestURL, "http://", "http://depositor:"+secret+"@", 1) + "?key=" + secret + "&X-Amz-Signature=" + secret
	b := r.submit(payload)
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Failed {
		t.Fatalf("batch %s, want Failed on the wrong digest", b.State())
	}
	j := r.jobsOf(b.ID)["manifest"]
	r.content.put("/refetch.checkm", manifest("mrt-ingest-manifest", fileRow(r.content.put("/refetch/f.txt", data), "f.txt", data)))
	r.ingestq("requeue", j.ID)
	line := logs.WaitFor(t, "object manifest fetched again", j.ID)
	if !strings.Contains(line, "depositor:xxxxx@") || !strings.Contains(line, "key=xxxxx") {
		t.Errorf("the line of the manifest fetched again: %q, want the payload URL with its secrets masked", line)
	}
	r.ingestq("report", b.ID)
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("after the fix and requeue: batch %s (%s)", b.State(), b.Status.Message)
	}
	if lines := logs.Lines(secret); len(lines) > 0 {
		t.Errorf("the daemon's log shows a secret of the payload URL: %q", lines)
	}
}
