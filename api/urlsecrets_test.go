package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/reactor/queue"
)

// A depositor's URLs as a depositor may write them: a password, a
// presigned URL's signature, a token; and a file: URL, a server path.
const (
	secretManifestURL = "https://depositor:pw-s3cret@example.org/m.checkm?X-Amz-Credential=AKIA%2F20261127&X-Amz-Signature=sig-s3cret"
	secretPayloadURL  = "https://depositor:pw-s3cret@example.org/obj.zip?sig=sig-s3cret&v=2"
	secretHookURL     = "https://hook:hook-s3cret@cb.example.org/done?token=tok-s3cret"
	secretFileURL     = "file:///srv/deposits/obj.zip?token=tok-s3cret"
)

// A job's configuration and a batch's submission show the depositor's
// URLs whole to an admin token only: a read token, an unscoped operate
// token and a depositor's scoped token (its own job) are shown each
// password, signature and token masked, in every key (payload_url, and
// another program's keys too), and a file: URL hidden as a server path.
func TestDepositorURLSecretsShownToAdminOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, withDepositors)
	bt, err := b.q.CreateBatch(t.Context(), queue.SubmissionOf(map[string]any{"batchID": "uuid-secrets", "profile_name": "alpha",
		"submitter": "tester", "payload_url": secretManifestURL, "notification_url": secretHookURL}))
	must(t, err)
	cfg := queue.JobConfig{Profile: "alpha", PayloadURL: secretPayloadURL}
	cfg.Extra.Set("callbacks", []string{secretHookURL})
	cfg.Extra.Set("source", map[string]string{"url": secretFileURL})
	j, err := b.q.CreateJob(t.Context(), bt, queue.JobSpec{Config: cfg})
	must(t, err)

	masked := map[string]string{
		secretManifestURL: "https://depositor:xxxxx@example.org/m.checkm?X-Amz-Credential=AKIA%2F20261127&X-Amz-Signature=xxxxx",
		secretPayloadURL:  "https://depositor:xxxxx@example.org/obj.zip?sig=xxxxx&v=2",
		secretHookURL:     "https://hook:xxxxx@cb.example.org/done?token=xxxxx",
		secretFileURL:     "[server path hidden]",
	}
	for _, c := range []struct {
		who, token string
		whole      bool
	}{
		{"a read token", readToken, false},
		{"an operate token", operateToken, false},
		{"a depositor's token, scoped to its profile", alphaToken, false},
		{"an admin token", adminToken, true},
	} {
		shown := func(u string) string {
			if c.whole {
				return u
			}
			return masked[u]
		}
		var job struct {
			Configuration struct {
				PayloadURL string            `json:"payload_url"`
				Callbacks  []string          `json:"callbacks"`
				Source     map[string]string `json:"source"`
			} `json:"configuration"`
		}
		a := b.do("GET", "jobs/"+j.ID, c.token, nil)
		a.ok(t, http.StatusOK, &job)
		got := job.Configuration
		if got.PayloadURL != shown(secretPayloadURL) || len(got.Callbacks) != 1 || got.Callbacks[0] != shown(secretHookURL) ||
			got.Source["url"] != shown(secretFileURL) {
			t.Errorf("%s is shown the job's configuration %+v; want payload_url %q, callbacks [%q], source.url %q",
				c.who, got, shown(secretPayloadURL), shown(secretHookURL), shown(secretFileURL))
		}
		var batch struct {
			Submission map[string]any `json:"submission"`
		}
		ab := b.do("GET", "batches/"+bt.ID, c.token, nil)
		ab.ok(t, http.StatusOK, &batch)
		if s := batch.Submission; s["payload_url"] != shown(secretManifestURL) || s["notification_url"] != shown(secretHookURL) || s["submitter"] != "tester" {
			t.Errorf("%s is shown the batch's submission %v; want payload_url %q, notification_url %q, submitter as written",
				c.who, s, shown(secretManifestURL), shown(secretHookURL))
		}
		if !c.whole && (strings.Contains(string(a.body), "s3cret") || strings.Contains(string(ab.body), "s3cret")) {
			t.Errorf("%s is shown a secret (s3cret) in the job's or the batch's answer", c.who)
		}
	}
}

// A value of a job's configuration or a batch's submission that is no URL
// is shown to every token as written, whatever "=" it holds: a title, a
// file name and a local id a depositor wrote read like libpq's key=value
// form (Key = …, pass=…, token=…), whose "secret" redact.Location masked
// below admin ("Key = xxxxx sketches"), while a URL beside them is masked.
func TestDepositorTextShownAsWritten(t *testing.T) {
	t.Parallel()
	b := setup(t, withDepositors)
	const title, fileName, localID = "Key = Largo sketches", "pass=1 of 3.txt", "token=ABC;sig=2024-01"
	bt, err := b.q.CreateBatch(t.Context(), queue.SubmissionOf(map[string]any{"batchID": "uuid-text", "profile_name": "alpha",
		"submitter": "tester", "payload_url": secretPayloadURL, "erc_what": title, "file_name": fileName, "local_id": localID}))
	must(t, err)
	cfg := queue.JobConfig{Profile: "alpha", PayloadURL: secretPayloadURL, FileName: fileName}
	cfg.Extra.Set("erc_what", title)
	cfg.Extra.Set("local_id", localID)
	j, err := b.q.CreateJob(t.Context(), bt, queue.JobSpec{Config: cfg})
	must(t, err)
	for _, c := range []struct{ who, token string }{{"a read token", readToken}, {"an admin token", adminToken}} {
		var job struct {
			Configuration map[string]any `json:"configuration"`
		}
		b.do("GET", "jobs/"+j.ID, c.token, nil).ok(t, http.StatusOK, &job)
		var batch struct {
			Submission map[string]any `json:"submission"`
		}
		b.do("GET", "batches/"+bt.ID, c.token, nil).ok(t, http.StatusOK, &batch)
		for what, got := range map[string]map[string]any{"the job's configuration": job.Configuration, "the batch's submission": batch.Submission} {
			if got["erc_what"] != title || got["file_name"] != fileName || got["local_id"] != localID {
				t.Errorf("%s is shown %s with erc_what %q, file_name %q, local_id %q; want %q, %q, %q as written",
					c.who, what, got["erc_what"], got["file_name"], got["local_id"], title, fileName, localID)
			}
			if c.token == readToken && got["payload_url"] != "https://depositor:xxxxx@example.org/obj.zip?sig=xxxxx&v=2" {
				t.Errorf("a read token is shown %s's payload_url %q, want it masked", what, got["payload_url"])
			}
		}
	}
}
