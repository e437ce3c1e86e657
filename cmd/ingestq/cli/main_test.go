package cli_test

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"

	"github.com/ingestq/ingestq/cmd/ingestq/cli"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(holdDataDirEnv); dir != "" {
		holdDataDir(dir) // a child of TestDataDirLockGoesWithItsProcess
		return
	}
	if spec := os.Getenv(inventoryServiceEnv); spec != "" {
		serveInventory(spec) // a child of TestObjectFromAHungInventoryFails
		return
	}
	goleak.VerifyTestMain(zktest.WithShared(m))
}

// run runs the CLI in-process against the shared ZooKeeper, under root, with
// an empty environment.
func run(t *testing.T, root string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runEnv(t, nil, append([]string{"--zk", zktest.Shared(t).Addr, "--zk-root", root}, args...)...)
}

// noNATS is where a test's CLI looks for events unless it names a NATS:
// where nothing listens. The default, 127.0.0.1:4222, may be a developer's
// own daemon, whose stream and subscribers a test has no business with.
const noNATS = "nats://127.0.0.1:1"

// runEnv runs the CLI with args and the environment env; a command that
// names no NATS (--nats, or INGESTQ_NATS in env) gets noNATS, but serve,
// which embeds its own.
func runEnv(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	namesNATS := env[cli.EnvNATS] != "" || slices.ContainsFunc(args, func(a string) bool {
		return a == "--nats" || strings.HasPrefix(a, "--nats=") || a == "serve"
	})
	if !namesNATS {
		args = append([]string{"--nats", noNATS}, args...)
	}
	var out, errb bytes.Buffer
	code = cli.Run(t.Context(), args, &out, &errb, func(k string) string { return env[k] })
	stdout, stderr = out.String(), errb.String()
	t.Logf("ingestq %s → exit %d\nstdout:\n%sstderr:\n%s", strings.Join(args, " "), code, stdout, stderr)
	if strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "panic") {
		t.Fatalf("a Go stack trace on stderr")
	}
	return stdout, stderr, code
}

// wantCode fails the test unless the exit code is want.
func wantCode(t *testing.T, code, want int) {
	t.Helper()
	if code != want {
		t.Fatalf("exit code %d, want %d", code, want)
	}
}

// wantErrLine checks that stderr is exactly one "ingestq: …" line holding
// every part.
func wantErrLine(t *testing.T, stderr string, parts ...string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "ingestq: ") || !strings.HasSuffix(stderr, "\n") {
		t.Fatalf("stderr %q: want one line starting with \"ingestq: \"", stderr)
	}
	for _, p := range parts {
		if !strings.Contains(lines[0], p) {
			t.Errorf("stderr %q does not name %q", lines[0], p)
		}
	}
}

// env is a test's queue: its root, a connection and the queue on it.
type env struct {
	t    *testing.T
	root string
	conn *zk.Conn
	q    *queue.Queue
}

func newEnv(t *testing.T) *env {
	t.Helper()
	root := zktest.Root(t)
	conn := zktest.Connect(t)
	q, err := queue.New(conn, root)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Init(t.Context()); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, root: root, conn: conn, q: q}
}

// publishDemo publishes the built-in demo profile, as a daemon does.
func (e *env) publishDemo() {
	e.t.Helper()
	set, err := profile.NewSet(profile.Default())
	e.ok(err)
	e.ok(profile.Publish(e.t.Context(), e.q, set))
}

func (e *env) run(args ...string) (string, string, int) {
	e.t.Helper()
	return run(e.t, e.root, args...)
}

func (e *env) ok(err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) batch(uuid, profile string) string {
	e.t.Helper()
	b, err := e.q.CreateBatch(e.t.Context(), queue.SubmissionOf(map[string]any{"batchID": uuid, "profile_name": profile, "submitter": "tester"}))
	e.ok(err)
	return b.ID
}

func (e *env) job(bid string, priority int, profile string) string {
	e.t.Helper()
	b, err := e.q.LoadBatch(e.t.Context(), bid)
	e.ok(err)
	j, err := e.q.CreateJob(e.t.Context(), b, queue.JobSpec{
		Priority: priority, SpaceNeeded: 1234,
		Config:      queue.JobConfig{Profile: profile, PayloadURL: "https://example.org/obj.zip"},
		Identifiers: &queue.Identifiers{PrimaryID: "ark:/99999/fk4test", LocalIDs: []string{"loc-1"}},
		Metadata:    &queue.Metadata{Who: "Doe, Jane", What: "A test object", When: "2024"},
	})
	e.ok(err)
	return j.ID
}

// moveJob takes a job through states, as a daemon would.
func (e *env) moveJob(jid string, message string, states ...queue.State) {
	e.t.Helper()
	for _, s := range states {
		j, err := e.q.LockJob(e.t.Context(), jid)
		e.ok(err)
		e.ok(e.q.SetJobStatus(e.t.Context(), j, s, queue.JobChange{Message: message, Release: true}))
	}
}

func (e *env) moveBatch(bid string, states ...queue.State) {
	e.t.Helper()
	for _, s := range states {
		b, err := e.q.LockBatch(e.t.Context(), bid)
		e.ok(err)
		e.ok(e.q.SetBatchStatus(e.t.Context(), b, s, queue.BatchChange{Release: true}))
	}
}

func (e *env) jobState(jid string) queue.State {
	e.t.Helper()
	j, err := e.q.LoadJob(e.t.Context(), jid)
	e.ok(err)
	return j.State()
}

func (e *env) batchState(bid string) queue.State {
	e.t.Helper()
	b, err := e.q.LoadBatch(e.t.Context(), bid)
	e.ok(err)
	return b.State()
}

// fixture is two batches: b1 (profile demo) with a Pending job p1, a
// priority-2 Pending job p2 and a job failed after Estimating; b2 (profile
// other) with one Pending job.
type fixture struct {
	*env
	b1, b2             string
	p1, p2, failed, o1 string
}

func newFixture(t *testing.T) *fixture {
	e := newEnv(t)
	f := &fixture{env: e}
	f.b1 = e.batch("uuid-b1", "demo")
	f.b2 = e.batch("uuid-b2", "other")
	f.p1 = e.job(f.b1, 5, "demo")
	f.p2 = e.job(f.b1, 2, "demo")
	f.failed = e.job(f.b1, 5, "demo")
	f.o1 = e.job(f.b2, 5, "other")
	e.moveJob(f.failed, "", queue.Estimating, queue.Provisioning)
	e.moveJob(f.failed, "download timed out", queue.Failed)
	return f
}
