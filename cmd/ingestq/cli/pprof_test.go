package cli_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// The tokens of the daemons below: an admin's, a reader's, a reader's
// scoped to the demo profile.
const (
	adminToken  = "admin-token-0123456789abcdef"
	readToken   = "read-token-0123456789abcdef"
	scopedToken = "scoped-token-0123456789abcdef"
)

// tokensFile writes the tokens above to a file for --api-tokens.
func tokensFile(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "tokens")
	text := "admin " + adminToken + " ops\nread " + readToken + " prometheus\nread:demo " + scopedToken + " depositor\n"
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// requestWith sends method url with a bearer token ("" for none), under
// ctx, and returns the status, the headers and the body.
func requestWith(ctx context.Context, t *testing.T, method, url, token string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return resp.StatusCode, resp.Header, body
}

// wantStatus GETs url with token and fails unless it answers code with a
// body holding each of words.
func wantStatus(t *testing.T, url, token string, code int, words ...string) []byte {
	t.Helper()
	got, _, body := requestWith(t.Context(), t, "GET", url, token)
	if got != code {
		t.Fatalf("GET %s with token %q: %d, want %d: %s", url, token, got, code, body)
	}
	for _, w := range words {
		if !strings.Contains(string(body), w) {
			t.Errorf("GET %s with token %q: %q does not say %q", url, token, body, w)
		}
	}
	return body
}

// wantProfile fails unless body is a pprof profile: gzip-compressed
// protocol buffers.
func wantProfile(t *testing.T, what string, body []byte) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%s: not a gzip-compressed profile (%v): %.200q", what, err, body)
	}
	data, err := io.ReadAll(zr)
	if err != nil || len(data) == 0 {
		t.Fatalf("%s: %d bytes of profile, %v", what, len(data), err)
	}
}

// On a daemon with API tokens Go's profiles ask an admin token, in the
// API's words: none 401 (with a Bearer challenge), a reader's 403, an
// admin's a real profile. /metrics, /healthz and /readyz stay open.
// seconds is bounded, and one CPU profile or trace runs at a time: a
// second one meanwhile is refused 409, where it was a 500 (a profile) or
// ran (a trace); once the first ends, the next runs. (Not parallel: the
// runtime profiles one CPU at a time, the other test's too.)
func TestProfilesAskAnAdminToken(t *testing.T) {
	e := newEnv(t)
	d := serve(t, zktest.Shared(t).Addr, e.root, "--pipeline", "passthrough", "--api-tokens", tokensFile(t))
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/goroutine?debug=2", "/debug/pprof/profile?seconds=1", "/debug/pprof/trace"} {
		code, h, body := requestWith(t.Context(), t, "GET", d.url+path, "")
		if code != http.StatusUnauthorized || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") ||
			!strings.Contains(string(body), "this needs a bearer token with the admin role") {
			t.Errorf("GET %s without a token: %d, WWW-Authenticate %q: %s; want 401, a Bearer challenge, the API's words", path, code, h.Get("WWW-Authenticate"), body)
		}
		wantStatus(t, d.url+path, readToken, http.StatusForbidden, "the token of prometheus has the read role; this needs admin")
		wantStatus(t, d.url+path, "unknown-token-0123456789abcdef", http.StatusUnauthorized, "unknown bearer token")
	}
	wantStatus(t, d.url+"/metrics", "", http.StatusOK, "ingestq_")
	wantStatus(t, d.url+"/healthz", "", http.StatusOK)
	waitReady(t, d.url, http.StatusOK)

	wantProfile(t, "the heap", wantStatus(t, d.url+"/debug/pprof/heap", adminToken, http.StatusOK))
	wantStatus(t, d.url+"/debug/pprof/goroutine?debug=2", adminToken, http.StatusOK, "goroutine ")
	for _, path := range []string{"/debug/pprof/profile?seconds=3600", "/debug/pprof/trace?seconds=61", "/debug/pprof/heap?seconds=3600", "/debug/pprof/profile?seconds=-1", "/debug/pprof/trace?seconds=NaN"} {
		wantStatus(t, d.url+path, adminToken, http.StatusBadRequest, "at most 60")
	}

	// A CPU profile of a minute, under way: a second one, or a trace,
	// is refused until it ends.
	ctx, cancel := context.WithCancel(t.Context())
	first := make(chan int, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "GET", d.url+"/debug/pprof/profile?seconds=60", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	waitProfiling(t, d.url)
	wantStatus(t, d.url+"/debug/pprof/profile?seconds=1", adminToken, http.StatusConflict, "one at a time")
	wantStatus(t, d.url+"/debug/pprof/trace", adminToken, http.StatusConflict, "one at a time")
	cancel()
	<-first
	deadline := time.Now().Add(30 * time.Second)
	for code := 0; code != http.StatusOK; {
		// The first handler may still be stopping the profiler after its
		// client went: a 409 until it has.
		if time.Now().After(deadline) {
			t.Fatal("a CPU profile still refused 30 s after the first one's client went")
		}
		var body []byte
		if code, _, body = requestWith(t.Context(), t, "GET", d.url+"/debug/pprof/profile?seconds=1", adminToken); code != http.StatusOK && code != http.StatusConflict {
			t.Fatalf("a CPU profile after the first ended: %d: %s", code, body)
		}
		if code == http.StatusOK {
			wantProfile(t, "a CPU profile of a second", body)
		}
	}
}

// waitProfiling waits until the daemon's goroutines show a CPU profile
// under way (the handler's sleep): the request has the profiler.
func waitProfiling(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, _, stacks := requestWith(t.Context(), t, "GET", base+"/debug/pprof/goroutine?debug=2", adminToken)
		if strings.Contains(string(stacks), "net/http/pprof.Profile(") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no CPU profile under way after 30 s:\n%s", stacks)
		}
	}
}

// /metrics is open on a daemon with tokens unless --metrics-auth token:
// then no token is 401, an unknown one 401, a reader's 200, one scoped to
// profiles 403 (the counts are the whole queue's); a token revoked
// (SIGHUP) is 401 at once. /healthz and /readyz stay open. --metrics-auth
// token on a daemon without tokens or without --http, or a value it cannot
// take, is refused.
func TestMetricsAskATokenWhenTheSiteSaysSo(t *testing.T) {
	e := newEnv(t)
	file := tokensFile(t)
	d := serve(t, zktest.Shared(t).Addr, e.root, "--pipeline", "passthrough", "--api-tokens", file, "--metrics-auth", "token")
	code, h, body := requestWith(t.Context(), t, "GET", d.url+"/metrics", "")
	if code != http.StatusUnauthorized || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("/metrics without a token: %d, WWW-Authenticate %q: %s", code, h.Get("WWW-Authenticate"), body)
	}
	wantStatus(t, d.url+"/metrics", "unknown-token-0123456789abcdef", http.StatusUnauthorized, "unknown bearer token")
	wantStatus(t, d.url+"/metrics", scopedToken, http.StatusForbidden, "scoped to profiles demo", "/metrics shows the whole daemon")
	wantStatus(t, d.url+"/metrics", readToken, http.StatusOK, "ingestq_jobs")
	wantStatus(t, d.url+"/metrics", adminToken, http.StatusOK, "ingestq_jobs")
	wantStatus(t, d.url+"/healthz", "", http.StatusOK)
	waitReady(t, d.url, http.StatusOK)

	if err := os.WriteFile(file, []byte("admin "+adminToken+" ops\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hangUp(t)
	d.log.WaitFor(t, "API tokens reloaded")
	wantStatus(t, d.url+"/metrics", readToken, http.StatusUnauthorized, "unknown bearer token")
	d.stop()

	refused := func(env map[string]string, words []string, args ...string) {
		t.Helper()
		argv := append([]string{"--zk", zktest.Shared(t).Addr, "--zk-root", e.root, "serve", "--data-dir", t.TempDir(),
			"--pipeline", "passthrough", "--nats-listen", "off", "--http", "127.0.0.1:0"}, args...)
		stderr, code := serveRefused(t, env, argv...)
		if code != 2 {
			t.Errorf("serve %s: exit %d, want 2 (usage)", strings.Join(args, " "), code)
		}
		wantErrLine(t, stderr, words...)
	}
	refused(nil, []string{"--metrics-auth token: this daemon has no token", "--api-tokens", "INGESTQ_ADMIN_TOKEN"}, "--metrics-auth", "token")
	refused(nil, []string{`--metrics-auth "bearer"`, "want open", "or token"}, "--metrics-auth", "bearer")
	refused(map[string]string{"INGESTQ_METRICS_AUTH": "token"}, []string{"--metrics-auth token: this daemon has no token"})
	refused(map[string]string{"INGESTQ_ADMIN_TOKEN": adminToken}, []string{"--metrics-auth token: the HTTP server is off"}, "--http", "off", "--metrics-auth", "token")
}

// A daemon without tokens answers /metrics and the profiles to anyone, as
// before; seconds is bounded there too. (Not parallel: the runtime
// profiles one CPU at a time, the other test's too.)
func TestProfilesOpenWithoutTokens(t *testing.T) {
	e := newEnv(t)
	d := serve(t, zktest.Shared(t).Addr, e.root, "--pipeline", "passthrough")
	wantStatus(t, d.url+"/metrics", "", http.StatusOK, "ingestq_")
	wantProfile(t, "the heap", wantStatus(t, d.url+"/debug/pprof/heap", "", http.StatusOK))
	wantProfile(t, "a CPU profile", wantStatus(t, d.url+"/debug/pprof/profile?seconds=1", "", http.StatusOK))
	wantStatus(t, d.url+"/debug/pprof/profile?seconds=3600", "", http.StatusBadRequest, "at most 60")
}
