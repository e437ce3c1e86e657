package cli_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/cmd/ingestq/cli"
	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/internal/queuetest"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// daemon is a test's queue with a bus (an embedded NATS listening on a
// random port) and, once started, a reactor with pass-through handlers.
type daemon struct {
	*env
	bus *events.Bus
	log *slog.Logger
}

func newDaemon(t *testing.T, opts ...func(*events.Config)) *daemon {
	t.Helper()
	log := slog.New(slog.NewTextHandler(logtest.NewT(t), &slog.HandlerOptions{Level: slog.LevelWarn}))
	e := newEnv(t)
	cfg := events.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Host: "test", Logger: log}
	for _, o := range opts {
		o(&cfg)
	}
	bus, err := events.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bus.Close() })
	return &daemon{env: e, bus: bus, log: log}
}

// start runs a reactor on the daemon's queue and bus until the test ends.
func (d *daemon) start() {
	t := d.t
	s := queuetest.Session(t, d.log)
	q, err := queue.New(s.Conn, d.root, queue.WithLogger(d.log))
	if err != nil {
		t.Fatal(err)
	}
	pt := reactor.PassThrough{}
	r, err := reactor.New(reactor.Config{Queue: q, Session: s, Bus: d.bus, Host: "test",
		Jobs: pt.Handlers(), Batches: pt, Reporter: pt, Backoff: 10 * time.Millisecond, Grace: 5 * time.Second, Logger: d.log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

// cli runs the CLI against the daemon's queue and NATS.
func (d *daemon) cli(args ...string) (string, string, int) {
	d.t.Helper()
	return d.run(append([]string{"--nats", d.bus.ClientURL()}, args...)...)
}

// flush waits until every event published so far is recorded.
func (d *daemon) flush() {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.bus.Flush(ctx); err != nil {
		d.t.Fatal(err)
	}
}

// closedAddr is a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	return zktest.ClosedAddr(t)
}

func (e *env) onlyBatch() *queue.Batch {
	e.t.Helper()
	batches, problems, err := e.q.ListBatches(e.t.Context())
	e.ok(err)
	if len(batches) != 1 || len(problems) != 0 {
		e.t.Fatalf("%d batches (%v), want 1", len(batches), problems)
	}
	return batches[0]
}

func TestSubmit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	out, stderr, code := e.run("submit", "--profile", "demo", "passthrough:3")
	wantCode(t, code, 0)
	b := e.onlyBatch()
	if out != b.ID+"\n" || stderr != "" {
		t.Fatalf("stdout %q, stderr %q; want the bid %s", out, stderr, b.ID)
	}
	// No $USER in the test's environment: the account's name is the submitter.
	me, err := user.Current()
	e.ok(err)
	want := map[string]any{"profile_name": "demo", "submitter": me.Username, "payload_url": "passthrough:3",
		"type": "auto", "submission_mode": "add", "batchID": b.UUID()}
	if len(b.Submission.Map()) != len(want) {
		t.Errorf("submission %v, want %v", b.Submission, want)
	}
	for k, v := range want {
		if b.Submission.Map()[k] != v {
			t.Errorf("submission %s = %v, want %v", k, b.Submission.Map()[k], v)
		}
	}
	if b.State() != queue.Pending || b.UUID() == "" {
		t.Errorf("batch %s, uuid %q", b.State(), b.UUID())
	}

	// -o json: the bid and the uuid; $USER is the default submitter; a
	// URL is taken as it is. A real payload needs a published profile.
	e.publishDemo()
	var got struct {
		BatchID string `json:"batch_id"`
		UUID    string `json:"uuid"`
	}
	out, _, code = runEnv(t, map[string]string{"USER": "jdoe"}, "--zk", zktest.Shared(t).Addr, "--zk-root", e.root,
		"submit", "-o", "json", "--profile", "demo", "--type", "manifest", "--priority", "3", "https://example.org/m.checkm")
	wantCode(t, code, 0)
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.BatchID == "" || got.UUID == "" {
		t.Fatalf("-o json: %q (%v)", out, err)
	}
	b2, err := e.q.FindBatch(t.Context(), got.UUID)
	e.ok(err)
	if b2.ID != got.BatchID || b2.Submission.Map()["submitter"] != "jdoe" || b2.Submission.Map()["type"] != "manifest" ||
		b2.Submission.Map()["payload_url"] != "https://example.org/m.checkm" || b2.Submission.Map()["priority"] != float64(3) {
		t.Errorf("batch %s: submission %v", b2.ID, b2.Submission)
	}
}

func TestSubmitUsageErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	missing, folder := filepath.Join(t.TempDir(), "nope.zip"), t.TempDir()
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"submit", "--profile", "demo", "--type", "tarball", "passthrough:1"}, []string{`"tarball"`, "file, container, manifest"}},
		{[]string{"submit", "--profile", "demo", missing}, []string{missing, "no such"}},
		{[]string{"submit", "--profile", "demo", "relative/nope.zip"}, []string{"relative/nope.zip", "no such"}},
		{[]string{"submit", "--profile", "demo", folder}, []string{folder, "is a folder", "a zip of the folder"}},
		{[]string{"submit", "passthrough:1"}, []string{"--profile"}},
		{[]string{"submit", "--profile", "demo"}, []string{"missing URL|PATH"}},
		{[]string{"submit", "--profile", "demo", "--priority", "100", "passthrough:1"}, []string{"--priority", "100"}},
		{[]string{"submit", "--profile", "demo", "--set", "novalue", "passthrough:1"}, []string{"novalue", "key=value"}},
	}
	for _, c := range cases {
		_, stderr, code := e.run(c.args...)
		wantCode(t, code, 2)
		wantErrLine(t, stderr, c.want...)
	}
	batches, _, err := e.q.ListBatches(t.Context())
	e.ok(err)
	if len(batches) != 0 {
		t.Fatalf("a usage error created %d batches", len(batches))
	}
}

// A local path is made absolute. Not parallel: it changes the working
// directory.
func TestSubmitLocalPath(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	e.ok(os.WriteFile(filepath.Join(dir, "payload.zip"), []byte("zip"), 0o600))
	t.Chdir(dir)
	e.publishDemo()
	// The demo profile takes no local files: refused before any batch.
	_, stderr, code := e.run("submit", "--profile", "demo", "--type", "container", "payload.zip")
	wantCode(t, code, 2)
	wantErrLine(t, stderr, "payload.zip is a local file", "profile demo does not allow local files", "allow_local_files")
	// Nor any scheme but http and https.
	_, stderr, code = e.run("submit", "--profile", "demo", "ftp://example.org/m.checkm")
	wantCode(t, code, 2)
	wantErrLine(t, stderr, `scheme "ftp"`, "profile demo", "allowed: http, https")
	if batches, _, err := e.q.ListBatches(t.Context()); err != nil || len(batches) != 0 {
		t.Fatalf("refused submissions created %d batches (%v)", len(batches), err)
	}
	local := *profile.Default()
	local.Name, local.AllowLocalFiles = "local", true
	set, err := profile.NewSet(profile.Default(), &local)
	e.ok(err)
	e.ok(profile.Publish(e.t.Context(), e.q, set))
	_, _, code = e.run("submit", "--profile", "local", "--type", "container", "payload.zip")
	wantCode(t, code, 0)
	u, _ := e.onlyBatch().Submission.Map()["payload_url"].(string)
	got, ok := strings.CutPrefix(u, "file://")
	if !ok || !filepath.IsAbs(got) {
		t.Fatalf("payload_url %q is not a file: URL of an absolute path", u)
	}
	gotReal, err := filepath.EvalSymlinks(got)
	e.ok(err)
	wantReal, err := filepath.EvalSymlinks(filepath.Join(dir, "payload.zip"))
	e.ok(err)
	if gotReal != wantReal {
		t.Fatalf("payload_url %q, want %q", got, filepath.Join(dir, "payload.zip"))
	}
}

// A profile no daemon has published is refused before any batch exists,
// naming the profiles that are.
func TestSubmitUnknownProfile(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publishDemo()
	_, stderr, code := e.run("submit", "--profile", "nosuch", "https://example.org/m.checkm")
	wantCode(t, code, 2)
	if !strings.Contains(stderr, `unknown profile "nosuch"`) || !strings.Contains(stderr, "(published: demo;") {
		t.Errorf("stderr %q does not name the profile and the published ones", stderr)
	}
	batches, _, err := e.q.ListBatches(t.Context())
	e.ok(err)
	if len(batches) != 0 {
		t.Fatalf("a refused submission created %d batches", len(batches))
	}
	_, _, code = e.run("submit", "--profile", "demo", "https://example.org/m.checkm")
	wantCode(t, code, 0)
}

func TestSubmitWait(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.start()
	out, stderr, code := d.cli("submit", "--profile", "demo", "--wait", "passthrough:50")
	wantCode(t, code, 0)
	b := d.onlyBatch()
	if b.State() != queue.Completed || b.Report == nil || len(b.Report.SuccessfulJobs) != 50 {
		t.Fatalf("batch %s, report %+v", b.State(), b.Report)
	}
	lines := strings.Split(out, "\n")
	if lines[0] != b.ID || !strings.Contains(out, b.ID+" (uuid "+b.UUID()+") Completed") ||
		!strings.Contains(out, "successful jobs: 50\n") || !strings.Contains(out, "failed jobs:     0\n") {
		t.Errorf("report:\n%s", out)
	}
	if !strings.Contains(stderr, "50/50 jobs finished (50 completed, 0 failed)\n") || strings.Contains(stderr, "\r") {
		t.Errorf("progress (not a terminal) does not end at 50/50 in plain lines:\n%s", stderr)
	}
	if n := strings.Count(stderr, "\n"); n > 12 {
		t.Errorf("%d progress lines, want a line per 10%% at most:\n%s", n, stderr)
	}
}

func TestSubmitWaitFailed(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.start()
	out, stderr, code := d.cli("submit", "--profile", "demo", "--wait",
		"--set", "fail_at=Processing", "--set", "fail_job=3", "passthrough:5")
	wantCode(t, code, 1)
	b := d.onlyBatch()
	if b.State() != queue.Failed || b.Report == nil || len(b.Report.FailedJobs) != 1 || len(b.Report.SuccessfulJobs) != 4 {
		t.Fatalf("batch %s, report %+v", b.State(), b.Report)
	}
	failed := b.Report.FailedJobs[0]
	if !strings.Contains(out, b.ID+" (uuid "+b.UUID()+") Failed") || !strings.Contains(out, "successful jobs: 4\n") ||
		!strings.Contains(out, "    "+failed+"  (no ARK)  Processing: pass-through failure asked for in Processing\n") {
		t.Errorf("report does not name the failed job %s and its message:\n%s", failed, out)
	}
	last := stderr[strings.LastIndex(strings.TrimSuffix(stderr, "\n"), "\n")+1:]
	if last != "ingestq: batch "+b.ID+" Failed: 1 of 5 jobs failed\n" || !strings.Contains(stderr, "5/5 jobs finished (4 completed, 1 failed)\n") {
		t.Errorf("stderr:\n%s", stderr)
	}

	// -o json: the report alone on stdout.
	d.ok(d.q.DeleteBatch(t.Context(), b.ID))
	out, _, code = d.cli("submit", "-o", "json", "--profile", "demo", "--wait",
		"--set", "fail_at=Storing", "passthrough:2")
	wantCode(t, code, 1)
	var rep struct {
		BatchID        string   `json:"batch_id"`
		UUID           string   `json:"uuid"`
		Status         string   `json:"status"`
		SuccessfulJobs []string `json:"successful_jobs"`
		FailedJobs     []struct {
			JID      string   `json:"jid"`
			LocalIDs []string `json:"local_id"` // the object to fix; [] for a pass-through job
			Message  string   `json:"message"`
		} `json:"failed_jobs"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	b = d.onlyBatch()
	if rep.BatchID != b.ID || rep.UUID != b.UUID() || rep.Status != "Failed" || len(rep.SuccessfulJobs) != 1 ||
		len(rep.FailedJobs) != 1 || rep.FailedJobs[0].JID != b.Report.FailedJobs[0] || rep.FailedJobs[0].LocalIDs == nil ||
		!strings.Contains(rep.FailedJobs[0].Message, "pass-through failure asked for in Storing") {
		t.Errorf("-o json report %+v", rep)
	}
}

func TestSubmitWaitNoNATS(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	url := "nats://" + closedAddr(t)
	_, stderr, code := e.run("--nats", url, "submit", "--profile", "demo", "--wait", "passthrough:1")
	wantCode(t, code, 1)
	wantErrLine(t, stderr, url, "not reachable", "--wait")
	batches, _, err := e.q.ListBatches(t.Context())
	e.ok(err)
	if len(batches) != 0 {
		t.Fatalf("a batch was created although --wait cannot follow it")
	}
}

// Ctrl-C stops the waiting, not the batch: one line says where it stands,
// and the exit code is 130, not a failed batch's 1.
func TestSubmitWaitInterrupted(t *testing.T) {
	t.Parallel()
	d := newDaemon(t) // no reactor: the batch stays Pending
	out, errb, code := d.waitUntil(t, "printed no batch id", func(out, _ string) bool { return strings.HasSuffix(out, "\n") })
	wantCode(t, code, 130)
	b := d.onlyBatch()
	wantErrLine(t, errb, "stopped waiting", b.ID, "Pending", "0/? jobs finished (0 completed, 0 failed)", "keeps running in the daemon")
	if out != b.ID+"\n" {
		t.Errorf("stdout %q", out)
	}
}

// A batch a daemon sends to Held (its collection is held) is told on a
// note line, as every note is. Before, it was a line without "note:".
func TestSubmitWaitNotesAHeldBatch(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	_, err := d.q.HoldCollection(t.Context(), "demo")
	d.ok(err)
	d.start()
	_, errb, code := d.waitUntil(t, "told nothing of the batch Held", func(_, errb string) bool { return strings.Contains(errb, "is Held") })
	wantCode(t, code, 130)
	b := d.onlyBatch()
	if want := "note: batch " + b.ID + " is Held (its collection is held): waiting until it is released\n"; !strings.Contains(errb, want) {
		t.Errorf("stderr %q: want the line %q", errb, want)
	}
}

// waitUntil runs submit --wait of three objects until its stdout and
// stderr satisfy until (else it fails the test: never), then stops it as
// Ctrl-C does, and returns what it wrote and its exit code.
func (d *daemon) waitUntil(t *testing.T, never string, until func(stdout, stderr string) bool) (string, string, int) {
	t.Helper()
	c := runBackground(t, "--zk", zktest.Shared(t).Addr, "--zk-root", d.root, "--nats", d.bus.ClientURL(),
		"submit", "--profile", "demo", "--wait", "passthrough:3")
	c.waitFor(t, never, until)
	c.cancel()
	return c.exit(t)
}

// background is a CLI command run while the test goes on.
type background struct {
	command   string         // for messages
	out, errb logtest.Buffer // what it has written so far
	done      chan int       // its exit code, once it ends
	cancel    func()         // stops it as Ctrl-C does
}

// runBackground starts the CLI with args; the test's end stops it.
func runBackground(t *testing.T, args ...string) *background {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := &background{command: "ingestq " + strings.Join(args, " "), done: make(chan int, 1), cancel: cancel}
	go func() { c.done <- cli.Run(ctx, args, &c.out, &c.errb, func(string) string { return "" }) }()
	return c
}

// waitFor waits until the command's stdout and stderr satisfy until, else
// fails the test (never says what it did not do).
func (c *background) waitFor(t *testing.T, never string, until func(stdout, stderr string) bool) {
	t.Helper()
	deadline := time.After(time.Minute)           // only stops a hung test
	poll := time.NewTicker(10 * time.Millisecond) // no event says what was written: poll it
	defer poll.Stop()
	for !until(c.out.String(), c.errb.String()) {
		select {
		case <-poll.C:
		case code := <-c.done:
			t.Fatalf("%s ended (exit %d): %s", c.command, code, c.errb.String())
		case <-deadline:
			t.Fatalf("%s %s: %s", c.command, never, c.errb.String())
		}
	}
}

// exit waits until the command ends, and returns what it wrote and its
// exit code.
func (c *background) exit(t *testing.T) (stdout, stderr string, code int) {
	t.Helper()
	select {
	case code = <-c.done:
	case <-time.After(time.Minute): // only stops a hung test
		t.Fatalf("%s did not end: %s", c.command, c.errb.String())
	}
	return c.out.String(), c.errb.String(), code
}

// Without events (the CLI listens on another NATS than the daemon's), the
// waiting ends all the same, from ZooKeeper, once no news came for a while.
func TestSubmitWaitWithoutEvents(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.start()
	elsewhere := newDaemon(t) // a bus no daemon publishes on
	out, stderr, code := d.run("--nats", elsewhere.bus.ClientURL(), "submit", "--profile", "demo", "--wait", "passthrough:3")
	wantCode(t, code, 0)
	if !strings.Contains(out, "successful jobs: 3\n") || !strings.Contains(stderr, "3/3 jobs finished (3 completed, 0 failed)\n") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", out, stderr)
	}
}
