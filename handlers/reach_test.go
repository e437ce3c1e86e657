package handlers_test

import (
	"strings"
	"testing"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/fetch"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// By default a depositor's URL may not reach this host: a payload on
// 127.0.0.1 fails the batch at intake, naming the URL, the address and the
// setting that allows it, and the server is never asked.
func TestPayloadOnLoopbackRefusedByDefault(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil, func(hc *handlers.Config, _ *reactor.Config) { hc.Fetch.Allow = nil })
	hello := []byte("hello\n")
	payload := r.content.put("/obj.checkm", manifest("mrt-ingest-manifest", fileRow(r.content.put("/f.txt", hello), "f.txt", hello)))
	b := r.submit(payload)
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Failed {
		t.Fatalf("batch %s, want Failed at intake", b.State())
	}
	msg := b.Status.Message
	for _, w := range []string{"payload: fetch ", "it reaches 127.0.0.1, a loopback address", fetch.AllowSetting} {
		if !strings.Contains(msg, w) {
			t.Errorf("message %q does not say %q", msg, w)
		}
	}
	namesOnce(t, msg, payload)
	if jobs := r.jobsOf(b.ID); len(jobs) != 0 {
		t.Errorf("%d jobs, want none", len(jobs))
	}
	if n := r.content.getCount("/obj.checkm"); n != 0 {
		t.Errorf("the payload's server was asked %d times, want never", n)
	}
}

// A manifest line that names the cloud's metadata fails its object only,
// at once, even with loopback allowed; the batch's other object is stored.
func TestManifestLineToMetadataFailsItsObject(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	good := object{"good.txt": []byte("good\n")}
	goodObj := r.content.put("/good.checkm", manifest("mrt-ingest-manifest", fileRow(r.content.put("/good.txt", good["good.txt"]), "good.txt", good["good.txt"])))
	secret := "http://169.254.169.254/latest/meta-data/iam/security-credentials/role"
	badObj := r.content.put("/bad.checkm", manifest("mrt-ingest-manifest", row{url: secret, name: "keys.json", size: -1}))
	b := r.submit(r.content.put("/batch.checkm", manifest("mrt-batch-manifest", row{url: goodObj, size: -1}, row{url: badObj, size: -1})))
	b = r.waitBatch(b.ID, queue.Completed, queue.Failed)
	jobs := r.jobsOf(b.ID)
	if len(jobs) != 2 {
		t.Fatalf("%d jobs, want 2 (batch %s: %s)", len(jobs), b.State(), b.Status.Message)
	}
	for key, j := range jobs {
		if strings.HasSuffix(key, goodObj) {
			r.checkStored(j, good)
			continue
		}
		// "Downloading: …", not "Downloading failed after 2 attempts: …"
		msg := j.Status.Message
		if j.State() != queue.Failed || !strings.HasPrefix(msg, string(queue.Downloading)+": producer/keys.json: download ") ||
			!strings.Contains(msg, "it reaches 169.254.169.254, a link-local address, which a depositor's URL may never reach") {
			t.Errorf("job of %s is %s: %q; want it Failed in Downloading, at once, on a refused address", key, j.State(), msg)
		}
		namesOnce(t, msg, secret)
	}
}
