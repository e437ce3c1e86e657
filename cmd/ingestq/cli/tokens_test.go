package cli_test

import (
	"net/http"
	"os"
	"path/filepath"
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
	status := func(token string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), "GET", d.url+"/api/v1/batches", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	want := func(token string, code int, when string) {
		t.Helper()
		if got := status(token); got != code {
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
