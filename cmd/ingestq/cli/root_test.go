package cli_test

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/cmd/ingestq/cli"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	// No ZooKeeper is reachable at this address: a usage error must be
	// found before connecting.
	zk := []string{"--zk", "127.0.0.1:1", "--connect-timeout", "50ms"}
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"frobnicate"}, []string{`unknown command "frobnicate"`}},
		{nil, []string{"missing command"}},
		{[]string{"show"}, []string{"missing JID|BID|UUID"}},
		{[]string{"show", "a", "b"}, []string{`unexpected argument "b"`}},
		{[]string{"ls"}, []string{"batches, jobs"}},
		{[]string{"ls", "things"}, []string{`"things"`}},
		{[]string{"hold"}, []string{"batch, collection, job, queue"}},
		{[]string{"release", "job"}, []string{"missing JID"}},
		{[]string{"ls", "jobs", "--bogus"}, []string{"--bogus"}},
		{[]string{"ls", "jobs", "--state", "sleeping"}, []string{"sleeping", "Pending"}},
		{[]string{"tree", "-o", "yaml"}, []string{"yaml", "text or json"}},
		{[]string{"tree", "--log-level", "loud"}, []string{"loud"}},
		{[]string{"tree", "--zk-root", "ingestq/"}, []string{"ingestq/", "absolute"}},
		{[]string{"tree", "--zk", "127.0.0.1:99999"}, []string{"127.0.0.1:99999", "from 1 to 65535"}},
		{[]string{"ls", "jobs", "--state", "completed", "--state", "failed"}, []string{"--state", "given twice", `"completed"`}},
	}
	for _, c := range cases {
		_, stderr, code := runEnv(t, nil, slices.Concat(zk, c.args)...)
		wantCode(t, code, 2)
		wantErrLine(t, stderr, c.want...)
	}
}

func TestMainUnknownCommand(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	code := cli.Main(t.Context(), []string{"--zk", zktest.Shared(t).Addr, "frobnicate"}, &out, &errb)
	wantCode(t, code, 2)
	wantErrLine(t, errb.String(), "frobnicate")
	if out.Len() != 0 {
		t.Errorf("stdout %q", out.String())
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	out, stderr, code := runEnv(t, nil, "--help")
	wantCode(t, code, 0)
	for _, cmd := range []string{"tree", "ls", "show", "check", "hold", "release", "requeue", "fail", "delete", "report", "cleanup"} {
		if !strings.Contains(out, "\n  "+cmd+" ") {
			t.Errorf("help lacks %s", cmd)
		}
	}
	if stderr != "" || strings.Contains(out, "connect-timeout") {
		t.Errorf("stderr %q; or the hidden flag shows", stderr)
	}
}

func TestNoZooKeeper(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	// Refused at once: the command says so without waiting its connect
	// timeout (10 minutes here: a wait would end the test by its deadline).
	_, stderr, code := runEnv(t, map[string]string{"INGESTQ_CONNECT_TIMEOUT": "10m"}, "--zk", addr, "ls", "jobs")
	wantCode(t, code, 1)
	wantErrLine(t, stderr, "cannot reach ZooKeeper at "+addr, "connection refused", "--zk")

	_, stderr, code = runEnv(t, map[string]string{"INGESTQ_CONNECT_TIMEOUT": "soon"}, "--zk", addr, "ls", "jobs")
	wantCode(t, code, 2)
	wantErrLine(t, stderr, "INGESTQ_CONNECT_TIMEOUT", "soon")
}

func TestEnvironment(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bid := e.batch("uuid-env", "demo")
	addr := zktest.Shared(t).Addr
	env := map[string]string{"INGESTQ_ZK": addr, "INGESTQ_ZK_ROOT": e.root}
	out, _, code := runEnv(t, env, "ls", "batches")
	wantCode(t, code, 0)
	if !strings.Contains(out, bid+"  Pending  uuid-env") {
		t.Errorf("INGESTQ_ZK_ROOT not honoured:\n%s", out)
	}

	// A flag wins over the environment.
	other := newEnv(t)
	out, _, code = runEnv(t, env, "--zk-root", other.root, "ls", "batches")
	wantCode(t, code, 0)
	if strings.Contains(out, "uuid-env") {
		t.Errorf("--zk-root did not win over INGESTQ_ZK_ROOT:\n%s", out)
	}
	_, stderr, code := runEnv(t, map[string]string{"INGESTQ_ZK": "127.0.0.1:1", "INGESTQ_ZK_ROOT": e.root},
		"--zk", addr, "--log-level", "debug", "ls", "batches")
	wantCode(t, code, 0)
	if !strings.Contains(stderr, "DBG") {
		t.Errorf("--log-level debug shows no debug lines: %q", stderr)
	}

	// INGESTQ_LOG_LEVEL=error silences the warnings of a listing.
	_, err := e.conn.Set(e.root+"/batches/"+bid+"/status", []byte("garbage"), -1)
	e.ok(err)
	_, stderr, code = runEnv(t, env, "ls", "batches")
	wantCode(t, code, 0)
	if !strings.Contains(stderr, "WRN") || !strings.Contains(stderr, "/batches/"+bid+"/status") {
		t.Errorf("no warning for the corrupt batch: %q", stderr)
	}
	env["INGESTQ_LOG_LEVEL"] = "error"
	_, stderr, code = runEnv(t, env, "ls", "batches")
	wantCode(t, code, 0)
	if stderr != "" {
		t.Errorf("INGESTQ_LOG_LEVEL=error, stderr %q", stderr)
	}
}

// A read on a root where no queue is (a mistyped --zk-root) says so, exits
// 1 and creates nothing; so does an admin action, and so does a submission
// refused (no daemon published its profile there), which exits 2. An
// accepted submission starts a queue.
func TestFreshRoot(t *testing.T) {
	t.Parallel()
	root := zktest.Root(t)
	conn := zktest.Connect(t)
	for _, args := range [][]string{{"check"}, {"tree"}, {"ls", "batches"}, {"show", "jid0000000001"},
		{"hold", "queue"}, {"requeue", "jid0000000001"}, {"cleanup"}} {
		out, stderr, code := run(t, root, args...)
		wantCode(t, code, 1)
		wantErrLine(t, stderr, "no ingestq queue under "+root, "--zk-root")
		if out != "" {
			t.Errorf("%v printed %q", args, out)
		}
	}
	_, stderr, code := run(t, root, "submit", "--profile", "demo", "https://example.org/batch.checkm")
	wantCode(t, code, 2)
	wantErrLine(t, stderr, `unknown profile "demo"`)
	if ok, _, err := conn.Exists(root); err != nil || ok {
		t.Fatalf("%s exists after reads and a refused submission only (%v)", root, err)
	}
	out, _, code := run(t, root, "submit", "--profile", "demo", "passthrough:1")
	wantCode(t, code, 0)
	if ok, _, err := conn.Exists(root + "/batches/" + strings.TrimSpace(out)); err != nil || !ok {
		t.Fatalf("the accepted submission's batch %q is not under %s (%v)", out, root, err)
	}
}

// ZooKeeper's own connect string form host:port/root names the root.
func TestChrootInConnectString(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bid := e.batch("uuid-chroot", "demo")
	out, _, code := runEnv(t, nil, "--zk", zktest.Shared(t).Addr+e.root, "ls", "batches")
	wantCode(t, code, 0)
	if !strings.Contains(out, bid) {
		t.Errorf("--zk host:port%s did not read that root:\n%s", e.root, out)
	}
	_, stderr, code := runEnv(t, nil, "--zk", zktest.Shared(t).Addr+e.root, "--zk-root", "/other", "ls", "batches")
	wantCode(t, code, 2)
	wantErrLine(t, stderr, e.root, "/other")
}

// An error whose cause spans several lines (PostgreSQL's driver) keeps the
// cause on the one error line: "connection refused" is what the user needs.
// A read (object) makes no database file where none is.
func TestErrorCauseOnOneLine(t *testing.T) {
	t.Parallel()
	_, stderr, code := runEnv(t, nil, slices.Concat(nowhere, []string{"object", "--inventory", "postgres://127.0.0.1:1/x", "ark:/99999/fk4x"})...)
	wantCode(t, code, 1)
	wantErrLine(t, stderr, "postgres://127.0.0.1:1/x", "connection refused")
	missing := filepath.Join(t.TempDir(), "inventory.db")
	_, stderr, code = runEnv(t, nil, slices.Concat(nowhere, []string{"object", "--inventory", missing, "ark:/99999/fk4x"})...)
	wantCode(t, code, 1)
	wantErrLine(t, stderr, missing, "does not exist")
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("object made %s", missing)
	}
}
