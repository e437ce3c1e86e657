package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/cmd/ingestq/cli"
	"github.com/ingestq/ingestq/handlers/storage/ocfl/ocfltest"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// ingestq audit against a real daemon (serve with the ingest pipeline,
// its local OCFL root and its API: the route serve wires its auditor to):
// the demo's three objects deposited, then audited intact, with a version
// folder deleted (found), and with a file's bytes changed at the same size
// (found by --fixity alone); -o json, one ARK, a bad --limit and a missing
// admin token.
func TestAuditAgainstADaemon(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	data, nats := t.TempDir(), closedAddr(t)
	const admin = "admin-token-0123456789abcdef"
	d := serveEnv(t, map[string]string{"INGESTQ_ADMIN_TOKEN": admin}, zktest.Shared(t).Addr, e.root,
		"--data-dir", data, "--nats-listen", nats)
	web := demoWeb(t)
	_, _, code := e.run("--nats", "nats://"+nats, "--nats-token", admin, "submit", "--profile", "demo", "--wait", web.URL+"/batch.checkm")
	wantCode(t, code, 1) // the sample's wrong digest fails one job, so the batch
	var arks []string
	for _, jid := range e.onlyBatch().Report.SuccessfulJobs {
		j, err := e.q.LoadJob(t.Context(), jid)
		e.ok(err)
		arks = append(arks, j.Identifiers.PrimaryID)
	}
	if len(arks) != 3 {
		t.Fatalf("stored %v, want the demo's three objects", arks)
	}
	slices.Sort(arks)
	object := func(ark string) string {
		return filepath.Join(data, "ocfl", filepath.FromSlash(ocfltest.ObjectRoot(ark)))
	}
	auditWith := func(token string, args ...string) (string, string, int) {
		t.Helper()
		return runEnv(t, map[string]string{"INGESTQ_API_TOKEN": token},
			append([]string{"--zk", zktest.Shared(t).Addr, "--zk-root", e.root, "audit", "--api", d.url + "/api/v1"}, args...)...)
	}
	auditCmd := func(args ...string) (string, string, int) { t.Helper(); return auditWith(admin, args...) }

	// The route is an admin's: without the token, the error says which,
	// once, and where an admin token comes from.
	_, stderr, code := auditWith("")
	wantCode(t, code, 1)
	wantErrLine(t, stderr, "401", "this needs a bearer token with the admin role (Authorization: Bearer TOKEN)",
		"an admin token is serve's INGESTQ_ADMIN_TOKEN, or an admin line of its --api-tokens", "INGESTQ_API_TOKEN, which is not set")
	saysOnceWhatItNeeds(t, stderr)

	// Intact: exit 0, and the summary counts what was read.
	out, stderr, code := auditCmd("--fixity")
	wantCode(t, code, 0)
	if !regexp.MustCompile(`(?m)^audited 3 objects, 3 versions, \d+ files; \d+\.\d KiB read; 0 findings; \S+$`).MatchString(out) || stderr != "" {
		t.Errorf("an intact repository's audit --fixity: want only its summary with the counts")
	}
	if strings.ContainsAny(out, "\r\x1b") {
		t.Errorf("a progress line drawn on stdout that is not a terminal: %q", out)
	}

	// With --record, the evidence: a fixity check event of each version.
	out, _, code = auditCmd("--fixity", "--record")
	wantCode(t, code, 0)
	if !regexp.MustCompile(`(?m)^audited 3 objects, 3 versions, \d+ files; \d+\.\d KiB read; 0 findings; 3 fixity check events recorded; \S+$`).MatchString(out) {
		t.Errorf("audit --fixity --record: want the 3 events counted in the summary:\n%s", out)
	}

	// A version folder deleted, and a file's bytes changed at the same size.
	lost, changed := arks[0], arks[1]
	e.ok(os.RemoveAll(filepath.Join(object(lost), "v1")))
	content := filepath.Join(object(changed), "v1", "content")
	var file string // object-relative, as the inventory records it
	e.ok(filepath.WalkDir(content, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && file == "" && strings.HasPrefix(filepath.ToSlash(path), filepath.ToSlash(content)+"/producer/") {
			file, err = filepath.Rel(content, path)
		}
		return err
	}))
	if file == "" {
		t.Fatalf("no producer file in %s", content)
	}
	flipBytes(t, filepath.Join(content, file))
	file = filepath.ToSlash(file)

	out, stderr, code = auditCmd()
	wantCode(t, code, 1)
	found := findingLines(out)
	if len(found) == 0 || stderr != "" {
		t.Fatalf("audit found nothing of the deleted version folder")
	}
	for _, l := range found {
		if !strings.HasPrefix(l, "file-missing: ") || !strings.Contains(l, lost) || !strings.Contains(l, "version 1") ||
			!strings.Contains(l, `of file "`) || !strings.Contains(l, "storage target "+filepath.Join(data, "ocfl")) {
			t.Errorf("finding %q: want the file missing, naming %s, version 1, its file and target", l, lost)
		}
	}
	if !regexp.MustCompile(`(?m)^audited 3 objects, 3 versions, \d+ files; 0 B read; ` + fmt.Sprint(len(found)) + ` findings?` + `; `).MatchString(out) {
		t.Errorf("the summary does not count the objects and %d findings", len(found))
	}

	out, _, code = auditCmd("--fixity")
	wantCode(t, code, 1)
	var fixity []string
	for _, l := range findingLines(out) {
		if strings.Contains(l, changed) {
			fixity = append(fixity, l)
		}
	}
	if len(fixity) != 1 || !strings.HasPrefix(fixity[0], "fixity-failed: ") || !strings.Contains(fixity[0], `file "`+file+`" of version 1`) ||
		!strings.Contains(fixity[0], "storage target "+filepath.Join(data, "ocfl")) {
		t.Errorf("audit --fixity: %q, want one fixity-failed line naming %s, version 1, %s and its target", fixity, changed, file)
	}

	// The damaged object's check recorded, and shown as its last.
	out, _, code = auditCmd("--fixity", "--record", changed)
	wantCode(t, code, 1)
	if !strings.Contains(out, "; 1 finding; 1 fixity check event recorded; ") {
		t.Errorf("audit --fixity --record %s: want its finding and its event counted:\n%s", changed, out)
	}
	out, _, code = runEnv(t, map[string]string{"INGESTQ_API_TOKEN": admin}, "--zk", zktest.Shared(t).Addr, "--zk-root", e.root,
		"object", changed, "--api", d.url+"/api/v1")
	wantCode(t, code, 0)
	last := regexp.MustCompile(`(?m)^  last fixity check: \S+ \S+, failure \(1 of 1 check\), by ingestq .+ on \S+:\n    failure audit with fixity at storage target ` +
		regexp.QuoteMeta(filepath.Join(data, "ocfl")) + `: \d+ of \d+ recorded files of version 1 read back and hashed \(\d+ bytes\); 1 failed: ` +
		regexp.QuoteMeta(fmt.Sprintf("%q (fixity-failed)", file)) + `\n  PREMIS events \(\d+\):\n`)
	if !last.MatchString(out) || len(regexp.MustCompile(`fixity check +success audit with fixity`).FindAllString(out, -1)) != 1 {
		t.Errorf("object %s: want its last fixity check, the failure naming %s, and the earlier success among its events:\n%s", changed, file, out)
	}

	// One ARK: that object alone.
	out, _, code = auditCmd(changed)
	wantCode(t, code, 0)
	if !strings.Contains(out, "audited 1 object, 1 version, ") {
		t.Errorf("audit %s: want that object alone, intact without --fixity", changed)
	}
	out, _, code = auditCmd("--fixity", changed, changed)
	wantCode(t, code, 1)
	if got := findingLines(out); len(got) != 1 || !strings.Contains(got[0], changed) || !strings.Contains(out, "audited 1 object, ") {
		t.Errorf("audit --fixity %s: want its one finding alone", changed)
	}

	// An ARK the inventory lacks (a typo) is an error naming it, not an
	// object audited with a finding ("audited 1 object", not-recorded).
	const typo = "ark:/99999/nope"
	out, stderr, code = auditCmd(arks[2], typo)
	wantCode(t, code, 1)
	if got := findingLines(out); len(got) != 0 || !strings.Contains(out, "audited 1 object, 1 version, ") || !strings.Contains(out, "; 0 findings; ") {
		t.Errorf("audit %s %s: want %s alone audited, intact, and no finding:\n%s", arks[2], typo, arks[2], out)
	}
	wantErrLine(t, stderr, "no object "+typo+" in the inventory")

	// A part of the walk, and the rest of it.
	out, _, code = auditCmd("--limit", "1")
	wantCode(t, code, 1)
	if !strings.Contains(out, "audited 1 object, ") || !strings.Contains(out, "more objects follow: ingestq audit --after "+lost+" --limit 1\n") {
		t.Errorf("audit --limit 1: want %s alone, and the --after that goes on", lost)
	}
	out, _, code = auditCmd("--after", lost)
	wantCode(t, code, 0)
	if !strings.Contains(out, "audited 2 objects, ") {
		t.Errorf("audit --after %s: want the two objects after it, intact without --fixity", lost)
	}

	// -o json: the API's lines, each one JSON object, a summary last.
	out, _, code = auditCmd("-o", "json", "--fixity")
	wantCode(t, code, 1)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	kinds := map[string]int{}
	var sum struct {
		Type              string
		Objects, Findings int
		BytesRead         int64 `json:"bytes_read"`
		Kind, ARK, File   string
		Version           int
		Last              string
	}
	for _, l := range lines {
		sum.Type = ""
		if err := json.Unmarshal([]byte(l), &sum); err != nil {
			t.Fatalf("-o json line %q: %v", l, err)
		}
		kinds[sum.Type]++
	}
	if sum.Type != "summary" || sum.Objects != 3 || sum.Findings != kinds["finding"] || kinds["finding"] != len(found)+1 || sum.BytesRead == 0 || sum.Last != arks[2] {
		t.Errorf("-o json: %v lines, last %+v; want %d findings and the summary last", kinds, sum, len(found)+1)
	}

	auditCutOrStopped(t, e, lines, arks[0])

	// Bad usage: exit 2, before the daemon is asked.
	for _, args := range [][]string{{"--limit", "0"}, {"--limit", "x"}, {"demo-poems"}, {lost, "--after", lost}, {"--after", "fk4"}, {"--record"}} {
		_, stderr, code := auditWith("", args...)
		wantCode(t, code, 2)
		if strings.Contains(stderr, "401") {
			t.Errorf("audit %v asked the daemon", args)
		}
	}
}

// A daemon with no token (the By hand path's) refuses the audit, an
// admin's, to everyone: the error says which token to give it.
func TestAuditNeedsAnAdminToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	d := serve(t, zktest.Shared(t).Addr, e.root, "--pipeline", "passthrough")
	_, stderr, code := e.run("audit", "--api", d.url+"/api/v1")
	wantCode(t, code, 1)
	wantErrLine(t, stderr, "401", "this needs a token with the admin role, and this daemon has none configured",
		"an admin token is serve's INGESTQ_ADMIN_TOKEN, or an admin line of its --api-tokens", "INGESTQ_API_TOKEN, which is not set")
	saysOnceWhatItNeeds(t, stderr)
}

// saysOnceWhatItNeeds fails a refusal that says "this needs" more than
// once: the API's words say what the route needs, the CLI's only where
// such a token comes from.
func saysOnceWhatItNeeds(t *testing.T, stderr string) {
	t.Helper()
	if n := strings.Count(stderr, "this needs"); n != 1 {
		t.Errorf("the refusal says \"this needs\" %d times, want once: %s", n, stderr)
	}
}

// auditCutOrStopped checks an audit whose answer ends before its summary:
// lines are a real answer of the daemon (-o json), whose findings are of
// two objects, the first (done) with several; they are served again here,
// without the summary, for the answer to end where the daemon's cannot be
// made to. Cut, it fails naming the --after that takes it up (none in the
// first object's findings); stopped (Ctrl-C) while the answer waits, it
// shows its counts so far, and the same.
func auditCutOrStopped(t *testing.T, e *env, lines []string, done string) {
	t.Helper()
	replay := func(n int, hold bool) string { // the first n lines
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/x-ndjson")
			for _, l := range lines[:n] {
				_, _ = io.WriteString(w, l+"\n")
			}
			w.(http.Flusher).Flush()
			if hold {
				<-r.Context().Done()
			}
		}))
		t.Cleanup(srv.Close)
		return srv.URL + "/api/v1"
	}
	args := func(api string) []string {
		return []string{"--zk", zktest.Shared(t).Addr, "--zk-root", e.root, "audit", "--api", api}
	}
	out, stderr, code := runEnv(t, nil, args(replay(len(lines)-1, false))...)
	wantCode(t, code, 1)
	wantErrLine(t, stderr, "cut before its summary", "ingestq audit --after "+done+" takes it up")
	if !strings.Contains(out, "\ncut after 0 objects, 0 versions, 0 files; 0 B read; "+fmt.Sprint(len(lines)-1)+" findings; ") {
		t.Errorf("cut: stdout does not end with the counts so far:\n%s", out)
	}
	_, stderr, code = runEnv(t, nil, args(replay(2, false))...) // in the first object's findings
	wantCode(t, code, 1)
	wantErrLine(t, stderr, "cut before its summary", "no object was audited in full: run the audit again")

	stopped := runBackground(t, args(replay(len(lines)-1, true))...)
	stopped.out.WaitFor(t, "fixity-failed: ") // the last finding: the answer now waits
	stopped.cancel()
	out, stderr, code = stopped.exit(t)
	wantCode(t, code, 130)
	if !strings.Contains(out, "\nstopped after 0 objects, 0 versions, 0 files; 0 B read; "+fmt.Sprint(len(lines)-1)+" findings; ") {
		t.Errorf("stopped: stdout does not end with the counts so far:\n%s", out)
	}
	wantErrLine(t, stderr, "audit stopped", "ingestq audit --after "+done+" takes it up")

	// On a terminal the progress line stays below the findings, and the
	// counts so far take its place.
	if auditTerminal == nil {
		return
	}
	tty, screen := auditTerminal(t)
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	var errb logtest.Buffer
	exited := make(chan int, 1)
	go func() {
		exited <- cli.Run(ctx, args(replay(len(lines)-1, true)), tty, &errb, func(string) string { return "" })
	}()
	// waitScreen waits until the terminal's last line starts with what
	// (a terminal tells no event: its screen is read again); exit is the
	// exit code the command may end with meanwhile (0: none).
	waitScreen := func(what string, exit int) []string {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
			shown := screen()
			if last := shown[len(shown)-1]; strings.HasPrefix(last, what) || last == "" && len(shown) > 1 && strings.HasPrefix(shown[len(shown)-2], what) {
				return shown
			}
			select {
			case code := <-exited:
				if exit == 0 {
					t.Fatalf("audit exited %d before the terminal showed %q:\n%s", code, what, strings.Join(shown, "\n"))
				}
				wantCode(t, code, exit)
				exit, exited = 0, nil
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("the terminal never showed %q last:\n%s", what, strings.Join(shown, "\n"))
			}
		}
	}
	waitScreen("auditing: 0 objects, 0 versions, 0 files; 0 B read; "+fmt.Sprint(len(lines)-1)+" findings; ", 0)
	stop()
	shown := waitScreen("stopped after 0 objects", 130)
	if exited != nil {
		wantCode(t, <-exited, 130)
	}
	// wantScreen wants the findings each on a line of its own, no progress
	// line left, and last the counts so far, ended how.
	wantScreen := func(shown []string, how string) {
		t.Helper()
		t.Logf("the terminal shows:\n%s", strings.Join(shown, "\n"))
		kinds, found := regexp.MustCompile(`(file-missing|fixity-failed): `), 0
		for _, l := range shown {
			if m := kinds.FindAllStringIndex(l, -1); len(m) > 0 {
				found += len(m)
				if len(m) > 1 || m[0][0] != 0 {
					t.Errorf("line %q: a finding sharing its line", l)
				}
			}
			if strings.Contains(l, "auditing:") {
				t.Errorf("line %q: the progress line left on the screen", l)
			}
		}
		if found != len(lines)-1 || !strings.HasPrefix(shown[len(shown)-2], how+" after 0 objects") || shown[len(shown)-1] != "" {
			t.Errorf("the terminal: want the %d findings, each on its own line, then the counts so far (%s)", len(lines)-1, how)
		}
	}
	wantScreen(shown, "stopped")

	// Cut, the counts so far take the progress line's place too.
	tty, screen = auditTerminal(t)
	exited = make(chan int, 1)
	go func() {
		exited <- cli.Run(t.Context(), args(replay(len(lines)-1, false)), tty, &errb, func(string) string { return "" })
	}()
	shown = waitScreen("cut after 0 objects", 1)
	if exited != nil {
		wantCode(t, <-exited, 1)
	}
	wantScreen(shown, "cut")
}

// Ctrl-C before the answer's first line (its headers wait for it: a
// daemon's first object can take seconds) stops the audit as it does
// later, exit 130 with how to go on, not an API that "does not answer".
func TestAuditStoppedBeforeItsAnswer(t *testing.T) {
	t.Parallel()
	asked := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(asked)
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	c := runBackground(t, "--zk", zktest.Shared(t).Addr, "--zk-root", "/ingestq-test-none", "audit", "--api", srv.URL+"/api/v1",
		"--after", "ark:/99999/fk4a")
	<-asked
	c.cancel()
	out, stderr, code := c.exit(t)
	wantCode(t, code, 130)
	wantErrLine(t, stderr, "audit stopped; no object was audited in full: ingestq audit --after ark:/99999/fk4a takes it up")
	if strings.Contains(stderr, "does not answer") || !strings.HasPrefix(out, "stopped after 0 objects, ") {
		t.Errorf("stopped before the answer: stdout %q, stderr %q; want the counts so far, and no API that does not answer", out, stderr)
	}
}

// auditTerminal opens a pseudo-terminal where the tests can
// (audit_linux_test.go): the command's output, and what a terminal shows.
var auditTerminal func(t *testing.T) (tty *os.File, screen func() []string)

// flipBytes changes every byte of a file, keeping its size.
func flipBytes(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range data {
		data[i] ^= 0xff
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// findingLines are an audit's finding lines (text output): those before
// its summary.
func findingLines(out string) []string {
	var found []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "audited ") {
			break
		}
		if l != "" {
			found = append(found, l)
		}
	}
	return found
}
