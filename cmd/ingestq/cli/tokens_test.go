package cli_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// A SIGHUP makes serve read its token file again: a token added works and
// one removed is refused at once, without a restart. A file that no
// longer holds a token is not taken: the tokens in force stay.
func TestServeReloadsTokensOnSIGHUP(t *testing.T) {
	e := newEnv(t)
	file := filepath.Join(t.TempDir(), "tokens")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const old, fresh = "old-token-0123456789abcdef", "new-token-0123456789abcdef"
	write("read " + old + " before\n")
	d := serve(t, zktest.Shared(t).Addr, e.root, "--pipeline", "passthrough", "--api-tokens", file)
	want := func(token string, code int, when string) {
		t.Helper()
		if got, _, _ := requestWith(t.Context(), t, "GET", d.url+"/api/v1/batches", token); got != code {
			t.Fatalf("%s: a read with %s answered %d, want %d", when, token, got, code)
		}
	}
	want(old, http.StatusOK, "at start")
	want(fresh, http.StatusUnauthorized, "at start")

	write("read " + fresh + " after\n")
	hangUp(t)
	d.log.WaitFor(t, "API tokens reloaded")
	want(old, http.StatusUnauthorized, "after the reload")
	want(fresh, http.StatusOK, "after the reload")

	write("# every token removed by mistake\n")
	hangUp(t)
	d.log.WaitFor(t, "API tokens not reloaded")
	want(fresh, http.StatusOK, "after a reload of an empty file")
}

// hangUp sends this process a SIGHUP: the in-process daemon has asked for
// it (serve logs "ingestq: serving" after that), so it does not end the
// test binary.
func hangUp(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
}

// The CLI's token, exported in the shell serve is started from, is none of
// serve's: a reader's INGESTQ_API_TOKEN grants nothing (it made an admin
// token before), and serve says so; INGESTQ_ADMIN_TOKEN is serve's own.
func TestServeTakesNoTokenFromTheCLIsVariable(t *testing.T) {
	e := newEnv(t)
	const readers, admins = "readers-token-0123456789abcdef", "admins-token-0123456789abcdef"
	d := serveEnv(t, map[string]string{"INGESTQ_API_TOKEN": readers}, zktest.Shared(t).Addr, e.root, "--pipeline", "passthrough")
	line := d.log.WaitFor(t, "INGESTQ_API_TOKEN is the token the CLI sends")
	if !strings.Contains(line, "INGESTQ_ADMIN_TOKEN") {
		t.Errorf("the warning %q does not name INGESTQ_ADMIN_TOKEN", line)
	}
	hold := func(base, token string) int {
		t.Helper()
		code, _, _ := requestWith(t.Context(), t, "PUT", base+"/api/v1/holds/queues/ingest", token)
		return code
	}
	if code := hold(d.url, readers); code != http.StatusUnauthorized && code != http.StatusForbidden {
		t.Fatalf("a queue hold with the CLI's token answered %d: serve took INGESTQ_API_TOKEN as an admin token", code)
	}
	d.stop()
	a := serveEnv(t, map[string]string{"INGESTQ_ADMIN_TOKEN": admins}, zktest.Shared(t).Addr, e.root, "--pipeline", "passthrough")
	if code := hold(a.url, admins); code != http.StatusOK {
		t.Fatalf("a queue hold with INGESTQ_ADMIN_TOKEN answered %d, want 200", code)
	}
}
