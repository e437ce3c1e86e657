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
