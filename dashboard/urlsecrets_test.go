package dashboard_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/reactor/queue"
)

// A job's page shows the depositor's payload URL whole to an admin token
// only: a read and an operate token, and anyone when the daemon has no
// tokens, are shown its password and signature masked; a scoped token is
// refused the page (the dashboard is the whole queue's), shown neither.
func TestJobPagePayloadSecretsShownToAdminOnly(t *testing.T) {
	t.Parallel()
	b, open := setup(t), setup(t, noTokens)
	const payload = "https://depositor:pw-s3cret@example.org/obj.zip?X-Amz-Credential=AKIA%2F20261127&X-Amz-Signature=sig-s3cret"
	const masked = "https://depositor:xxxxx@example.org/obj.zip?X-Amz-Credential=AKIA%2F20261127&X-Amz-Signature=xxxxx"
	jobOf := func(b *bundle) string {
		j, err := b.q.CreateJob(t.Context(), b.batch("uuid-secrets"), queue.JobSpec{Config: queue.JobConfig{Profile: "p1", PayloadURL: payload}})
		must(t, err)
		return j.ID
	}
	jid, openJID := jobOf(b), jobOf(open)
	for _, c := range []struct {
		who, token string
		status     int
		shown      string
	}{
		{"a read token", readToken, http.StatusOK, masked},
		{"an operate token", operateToken, http.StatusOK, masked},
		{"an admin token", adminToken, http.StatusOK, payload},
		{"a scoped token", scopedToken, http.StatusForbidden, ""},
		{"anyone, without tokens", "", http.StatusOK, masked},
	} {
		var a answer
		if c.token == "" {
			a = open.get("", "/ui/jobs/"+openJID)
		} else {
			a = b.get(c.token, "/ui/jobs/"+jid)
		}
		if c.shown != "" {
			a.is(t, c.status, `<dd id="payload">`+c.shown+"</dd>")
		} else {
			a.is(t, c.status)
		}
		if c.shown != payload && strings.Contains(a.body, "s3cret") {
			t.Errorf("%s is shown a secret (s3cret) on the job's page", c.who)
		}
	}
}
