package handlers_test

import (
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// refusedURL is a URL on a port where nothing listens: every request to
// it is refused.
func refusedURL(t *testing.T, path string) string { return "http://" + zktest.ClosedAddr(t) + path }

// namesOnce checks that msg names the URL once (as its host and path, with
// any password left out), says one of said, and not the Go HTTP client's
// own words around the cause.
func namesOnce(t *testing.T, msg, rawURL string, said ...string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	if where := u.Host + u.Path; strings.Count(msg, where) != 1 {
		t.Errorf("message %q names %s %d times, want once", msg, where, strings.Count(msg, where))
	}
	if p, ok := u.User.Password(); ok && strings.Contains(msg, p) {
		t.Errorf("message %q gives the URL's password", msg)
	}
	if len(said) > 0 && !slices.ContainsFunc(said, func(w string) bool { return strings.Contains(msg, w) }) {
		t.Errorf("message %q says none of %q", msg, said)
	}
	for _, noise := range []string{`Get "`, `Post "`, "dial tcp", "attempt(s)"} {
		if strings.Contains(msg, noise) {
			t.Errorf("message %q says %q: the client's words, not plain ones", msg, noise)
		}
	}
}

// A callback whose URL is dead fails the job in Notify, once the reactor's
// attempts are spent (a refused connection may be a passing outage), with a
// message that names the URL once and says what happened in plain words.
func TestRefusedCallbackNamedOnce(t *testing.T) {
	t.Parallel()
	prof := profile.Default()
	prof.Callback = refusedURL(t, "/callback")
	r := newRig(t, prof)
	hello := []byte("hello\n")
	b := r.submit(r.content.put("/obj.checkm", manifest("mrt-ingest-manifest", fileRow(r.content.put("/f.txt", hello), "f.txt", hello))))
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Failed {
		t.Fatalf("batch %s, want Failed on its callback", b.State())
	}
	msg := r.jobsOf(b.ID)["manifest"].Status.Message
	if !strings.HasPrefix(msg, string(queue.Notify)+" failed after 2 attempts: callback ") {
		t.Errorf("message %q, want it to say Notify's callback failed", msg)
	}
	namesOnce(t, msg, prof.Callback, "connection refused")
}
