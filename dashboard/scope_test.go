package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/reactor/queue"
)

// The dashboard shows the whole queue: a token scoped to profiles is
// refused, at sign-in and on every page and action, saying to use the API.
func TestDashboardRefusesScopedTokens(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bt := b.batch("uuid-scoped")
	jid := b.job(bt)
	login := b.post("", "/ui/login", url.Values{"token": {scopedToken}})
	for what, a := range map[string]answer{
		"sign-in":  login,
		"overview": b.get(scopedToken, "/ui/"),
		"batch":    b.get(scopedToken, "/ui/batches/"+bt.ID),
		"hold":     b.post(scopedToken, "/ui/jobs/"+jid, url.Values{"action": {"hold"}}),
	} {
		if a.status != http.StatusForbidden || !strings.Contains(a.body, "scoped to profiles p1") || !strings.Contains(a.body, "use the API") {
			t.Errorf("%s: %d, want 403 saying the token is scoped: %.300s", what, a.status, a.body)
		}
	}
	if login.header.Get("Set-Cookie") != "" {
		t.Errorf("a refused sign-in set a cookie: %s", login.header.Get("Set-Cookie"))
	}
	if st := b.state(jid); st != queue.Pending {
		t.Fatalf("a scoped token's hold moved job %s to %s", jid, st)
	}
}
