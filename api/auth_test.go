package api_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/api"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Every route that is not open refuses a request without a token (401,
// with the Bearer challenge) and one with an unknown token; a change
// refuses a token whose role is too low (403), and nothing is written.
func TestEveryRouteRefusesWithoutAToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bt := b.batch("uuid-auth", "demo")
	jid := b.job(bt.ID, 5, 0)
	fill := strings.NewReplacer("{id}", bt.ID, "{jid}", jid, "{name}", "ingest", "{ark...}", "ark:/99999/fk4t1")
	for _, r := range b.api.Routes() {
		path := fill.Replace(r.Path)
		if r.Role == api.RoleNone {
			continue
		}
		b.do(r.Method, path, "", nil).problem(t, http.StatusUnauthorized, "unauthorized", "bearer token")
		a := b.do(r.Method, path, "not-a-known-token-at-all", nil)
		a.problem(t, http.StatusUnauthorized, "unauthorized", "unknown bearer token")
		if got := a.header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
			t.Errorf("%s %s: WWW-Authenticate %q, want a Bearer challenge", r.Method, path, got)
		}
		weak := map[api.Role]string{api.RoleOperate: readToken, api.RoleAdmin: operateToken}[r.Role]
		if weak != "" {
			b.do(r.Method, path, weak, nil).problem(t, http.StatusForbidden, "forbidden", "role", r.Role.String())
		}
	}
	// Basic auth is not a bearer token.
	req, _ := http.NewRequestWithContext(t.Context(), "GET", b.base+"jobs", nil)
	req.SetBasicAuth("u", "p")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("basic auth: %d, want 401", resp.StatusCode)
	}
	if j := b.jobState(jid); j.State() != queue.Pending {
		t.Fatalf("a refused request changed job %s to %s", jid, j.State())
	}
	if bb, err := b.q.LoadBatch(t.Context(), bt.ID); err != nil || bb.State() != queue.Pending {
		t.Fatalf("a refused request changed the batch: %v %v", bb, err)
	}
	if holds, err := b.q.Holds(t.Context()); err != nil || len(holds) != 0 {
		t.Fatalf("a refused request set holds: %v %v", holds, err)
	}
}

// Role by role: read reads, operate holds a job, only admin deletes one or
// fails one with force.
func TestRolesAllowWhatTheyNameOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bt := b.batch("uuid-roles", "demo")
	jid := b.job(bt.ID, 5, 0)
	b.do("GET", "jobs/"+jid, readToken, nil).ok(t, http.StatusOK, nil)
	b.do("POST", "jobs/"+jid+"/hold", operateToken, nil).ok(t, http.StatusOK, nil)
	b.do("POST", "jobs/"+jid+"/fail", operateToken, map[string]any{"force": true}).
		problem(t, http.StatusForbidden, "forbidden", "fail with force needs admin")
	b.do("DELETE", "jobs/"+jid, operateToken, nil).problem(t, http.StatusForbidden, "forbidden", "admin")
	var o ops.Outcome
	b.do("DELETE", "jobs/"+jid, adminToken, nil).ok(t, http.StatusOK, &o)
	if o.State != queue.Deleted || b.jobState(jid).State() != queue.Deleted {
		t.Fatalf("admin delete: %+v, job %s", o, b.jobState(jid).State())
	}
}

// Without any token configured, reads are open and every other route is
// refused, saying which role it needs (the audit, a read, is an admin's:
// it said "changes need a bearer token") and how to configure tokens.
func TestNoTokensReadsOpenChangesRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *options) { o.noTokens = true })
	bt := b.batch("uuid-open", "demo")
	jid := b.job(bt.ID, 5, 0)
	b.do("GET", "jobs/"+jid, "", nil).ok(t, http.StatusOK, nil)
	b.do("GET", "batches", "", nil).ok(t, http.StatusOK, nil)
	fill := strings.NewReplacer("{id}", bt.ID, "{jid}", jid, "{name}", "ingest", "{ark...}", "ark:/99999/fk4t1")
	for _, r := range b.api.Routes() {
		if r.Role > api.RoleRead {
			b.do(r.Method, fill.Replace(r.Path), "", nil).problem(t, http.StatusUnauthorized, "unauthorized",
				"this needs a token with the "+r.Role.String()+" role, and this daemon has none configured", "--api-tokens")
		}
	}
	b.do("POST", "jobs/"+jid+"/hold", adminToken, nil).problem(t, http.StatusUnauthorized, "unauthorized")
	if b.jobState(jid).State() != queue.Pending {
		t.Fatal("a change was made without a token")
	}
}

// A tokens file with a weak (short) token, an unknown role, a line without
// a token, or a token given twice is refused, naming the line.
func TestLoadTokensRefusesBadFiles(t *testing.T) {
	t.Parallel()
	for content, want := range map[string]string{
		"admin short\n":                   "line 1: token of 5 characters: want at least 16",
		"# c\nboss 0123456789abcdefXYZ\n": `line 2: role "boss": want read, operate or admin`,
		"read\n":                          "line 1: want ROLE[:PROFILE,…] TOKEN [NAME]",
		"read 0123456789abcdefXYZ\nadmin 0123456789abcdefXYZ\n": "line 2: token given twice",
	} {
		file := filepath.Join(t.TempDir(), "tokens")
		must(t, os.WriteFile(file, []byte(content), 0o600))
		if _, err := api.LoadTokens(file, ""); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), file) {
			t.Errorf("%q: %v, want an error naming the file and %q", content, err, want)
		}
	}
	if _, err := api.LoadTokens("", "short"); err == nil || !strings.Contains(err.Error(), "environment") {
		t.Errorf("a weak token from the environment: %v, want refused", err)
	}
	tokens, err := api.LoadTokens("", "0123456789abcdef-env")
	must(t, err)
	if tokens.Len() != 1 {
		t.Errorf("the environment's token: %d tokens, want 1", tokens.Len())
	}
	// It acts under a name that says which token it is (it was "env":
	// "cancelled by env").
	if c, err := tokens.Authorize("0123456789abcdef-env", api.RoleAdmin); err != nil || c.Name != "admin token (INGESTQ_ADMIN_TOKEN)" {
		t.Errorf("the environment's token acts as %q (%v), want \"admin token (INGESTQ_ADMIN_TOKEN)\"", c.Name, err)
	}
}
