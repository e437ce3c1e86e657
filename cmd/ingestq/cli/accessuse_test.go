package cli_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/cmd/ingestq/cli"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// access request's bad flags and arguments are usage errors (exit 2), found
// before anything is read or queued, as submit's are; the message names the
// flag.
func TestAccessRequestUsageErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ark := "ark:/99999/fk4x"
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"notanark"}, []string{`ARK "notanark"`, "want an ARK"}},
		{[]string{ark, "--format", "rar"}, []string{`--format "rar"`, "zip or tar.gz"}},
		{[]string{ark, "--version", "-1"}, []string{"--version -1", "1 or more"}},
		// 0 given is no version, as the API's "version": 0, not every version.
		{[]string{ark, "--version", "0"}, []string{"--version 0", "1 or more", "leave --version out"}},
		{[]string{ark, "--file", ""}, []string{`--file "": empty: want a file`}},
		{[]string{ark, "--file", "a", "--file", "a"}, []string{`--file "a": named twice`}},
		{[]string{ark, "--threshold", "big"}, []string{"--threshold", `"big"`}},
		{[]string{}, []string{"missing ARK"}},
		{[]string{ark, "--bogus"}, []string{"--bogus"}},
	} {
		_, stderr, code := e.run(append([]string{"access", "request", "--api", "http://" + closedAddr(t) + "/api/v1"}, c.args...)...)
		wantCode(t, code, 2)
		wantErrLine(t, stderr, c.want...)
	}
	all, _, err := e.q.AccessRequests(t.Context())
	e.ok(err)
	if len(all) != 0 {
		t.Errorf("usage errors queued %d requests", len(all))
	}
}

// access show names the hold of the request's queue, in text and in JSON
// (null when it is not held), and access ls notes it. A request waited for
// on a held queue says so on stderr; its stderr has plain progress lines
// and no log line, and its stdout is the result alone: one JSON document.
func TestAccessHoldShownAndWaitOutputClean(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	data, nats := t.TempDir(), closedAddr(t)
	d := serve(t, zktest.Shared(t).Addr, e.root, "--data-dir", data, "--nats-listen", nats)
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "note.txt", time.Time{}, strings.NewReader("a note\n"))
	}))
	t.Cleanup(web.Close)
	_, _, code := e.run("--nats", "nats://"+nats, "submit", "--profile", "demo", "--wait", web.URL+"/note.txt")
	wantCode(t, code, 0)
	ark := onlyARK(e)
	_, _, code = e.run("hold", "queue", "access-small")
	wantCode(t, code, 0)

	// The request, waited for in the background while its queue is held.
	stderr := &logtest.Buffer{}
	var stdout bytes.Buffer
	exited := make(chan int, 1)
	go func() {
		exited <- cli.Run(t.Context(), []string{"--zk", zktest.Shared(t).Addr, "--zk-root", e.root, "access", "request", ark,
			"--wait", "-o", "json", "--data-dir", data, "--api", d.url + "/api/v1"}, &stdout, stderr, func(string) string { return "" })
	}()
	waited := false
	t.Cleanup(func() {
		if !waited {
			<-exited
		}
	})
	stderr.WaitFor(t, "note: queue accessSmall is held since", "ingestq release queue access-small")
	ref := regexp.MustCompile(`^(small/qid\d{10}): Pending, estimated [\d.]+ \w+$`).FindStringSubmatch(stderr.Lines("Pending")[0])
	if ref == nil {
		t.Fatalf("no Pending line with the estimate:\n%s", stderr.String())
	}

	out, _, code := e.run("access", "show", ref[1])
	wantCode(t, code, 0)
	if !regexp.MustCompile(`(?m)^held: +queue accessSmall is held since .*: it takes no new request until released \(ingestq release queue access-small\)$`).MatchString(out) {
		t.Errorf("access show does not name the hold:\n%s", out)
	}
	out, _, code = e.run("access", "show", ref[1], "-o", "json")
	wantCode(t, code, 0)
	var shown struct {
		ops.AccessView
		Held *queue.Hold `json:"held"`
	}
	e.ok(json.Unmarshal([]byte(out), &shown))
	if shown.State != queue.Pending || shown.Held == nil || shown.Held.Kind != "queue" || shown.Held.Name != queue.QueueAccessSmall || shown.Held.Since.IsZero() {
		t.Errorf("access show -o json: %+v, held %+v", shown.AccessView, shown.Held)
	}
	_, errOut, code := e.run("access", "ls")
	wantCode(t, code, 0)
	if !strings.Contains(errOut, "note: queue accessSmall is held since") {
		t.Errorf("access ls does not note the hold: %q", errOut)
	}

	_, _, code = e.run("release", "queue", "access-small")
	wantCode(t, code, 0)
	waited = true
	wantCode(t, <-exited, 0)
	for _, line := range strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n") {
		if !strings.HasPrefix(line, ref[1]+": ") && !strings.HasPrefix(line, "note: ") {
			t.Errorf("stderr line %q is no progress line", line)
		}
	}
	if !strings.HasSuffix(stderr.String(), ref[1]+": Completed\n") {
		t.Errorf("stderr does not end with the request Completed:\n%s", stderr.String())
	}
	dec := json.NewDecoder(&stdout)
	e.ok(dec.Decode(&shown))
	if _, err := dec.Token(); err != io.EOF {
		t.Errorf("stdout holds more than one JSON document: %v", err)
	}
	if shown.Ref != ref[1] || shown.State != queue.Completed || shown.Token.URL == "" || shown.Held != nil {
		t.Errorf("request --wait -o json: %+v, held %+v", shown.AccessView, shown.Held)
	}
}
