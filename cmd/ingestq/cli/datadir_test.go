package cli_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/ingestq/ingestq/cmd/ingestq/cli"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// holdDataDirEnv makes the test binary a child that holds a data folder:
// it takes the lock, says so on stdout, and waits to be killed.
const holdDataDirEnv = "INGESTQ_TEST_HOLD_DATADIR"

func holdDataDir(dir string) {
	if _, err := cli.LockDataDir(dir, "--host child"); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent kills it
	os.Exit(0)
}

// A second daemon on a data folder a running one holds is refused at once,
// naming the folder and the daemon that holds it; the first runs on.
func TestServeRefusesADataDirInUse(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	data := t.TempDir()
	serve(t, zktest.Shared(t).Addr, e.root, "--data-dir", data, "--pipeline", "passthrough", "--host", "first")
	stderr, code := serveRefused(t, nil, "--zk", zktest.Shared(t).Addr, "--zk-root", e.root, "serve", "--data-dir", data,
		"--pipeline", "passthrough", "--host", "second", "--nats-listen", "off", "--http", "off")
	wantCode(t, code, 1)
	wantErrLine(t, stderr, "--data-dir "+data+" is in use by another daemon", "pid "+strconv.Itoa(os.Getpid()),
		"--host first", filepath.Join(data, "serve.lock"), "give this one another --data-dir")
}

// The lock goes with the process that holds it, however it ends: a
// daemon killed with SIGKILL leaves its folder free for the next.
func TestDataDirLockGoesWithItsProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), holdDataDirEnv+"="+dir)
	stdin, err := child.StdinPipe() // held open: the child waits on it
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	var wait sync.Once
	reap := func() { wait.Do(func() { _ = child.Wait() }) }
	defer func() { _ = child.Process.Kill(); reap() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("the child said %q (%v), want locked", line, err)
	}
	_, err = cli.LockDataDir(dir, "--host parent")
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("pid %d, --host child", child.Process.Pid)) {
		t.Fatalf("locking a folder the child holds: %v, want it refused naming the child", err)
	}
	if err := child.Process.Kill(); err != nil { // SIGKILL: nothing of the child's runs
		t.Fatal(err)
	}
	reap()
	release, err := cli.LockDataDir(dir, "--host parent")
	if err != nil {
		t.Fatalf("the folder of a killed daemon: %v", err)
	}
	release()
	if text, _ := os.ReadFile(filepath.Join(dir, "serve.lock")); !strings.Contains(string(text), "--host parent") {
		t.Errorf("the lock file says %q, want the new holder", text)
	}
}

// INGESTQ_NATS, exported for the CLI as the README says, tells serve
// nothing when its embedded server's address is given: serve embeds NATS
// there, the CLI finds the events there. Without --nats-listen, serve
// joins INGESTQ_NATS, and when that fails the error says the variable is
// why and what to do. The daemon's log lines carry a full timestamp.
func TestServeLeavesINGESTQ_NATSToTheCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	natsAddr := closedAddr(t)
	env := map[string]string{"INGESTQ_NATS": "nats://" + natsAddr}
	log := &logtest.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan int, 1)
	go func() {
		exited <- cli.Run(ctx, []string{"--zk", zktest.Shared(t).Addr, "--zk-root", e.root, "serve", "--data-dir", t.TempDir(),
			"--pipeline", "passthrough", "--http", "off", "--nats-listen", natsAddr}, log, log, func(k string) string { return env[k] })
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-exited; code != 0 {
			t.Errorf("serve exited %d; its log:\n%s", code, log.String())
		}
	})
	line := log.WaitFor(t, "reactor: running")
	wantTimestamp(t, line)
	log.WaitFor(t, "INGESTQ_NATS is where the CLI finds events", "--nats-listen or --nats-cluster is given")
	// The embedded server listens where INGESTQ_NATS tells the CLI to look.
	nc, err := nats.Connect(env["INGESTQ_NATS"])
	if err != nil {
		t.Fatalf("NATS at INGESTQ_NATS (%s), where serve was to embed it: %v", env["INGESTQ_NATS"], err)
	}
	nc.Close()

	// Without --nats-listen (or INGESTQ_NATS_LISTEN), INGESTQ_NATS is what
	// serve joins; a NATS not there is named, with the variable. (Another
	// --host: the first daemon's name would be refused before.)
	stderr, code := serveRefused(t, map[string]string{"INGESTQ_NATS": "nats://" + closedAddr(t)}, "--zk", zktest.Shared(t).Addr,
		"--zk-root", e.root, "serve", "--data-dir", t.TempDir(), "--pipeline", "passthrough", "--http", "off", "--host", "second")
	wantCode(t, code, 1)
	if !strings.Contains(stderr, "INGESTQ_NATS is set") || !strings.Contains(stderr, "give --nats-listen ADDR, or unset INGESTQ_NATS for serve") {
		t.Errorf("serve joining an absent INGESTQ_NATS: %q, want the variable named and what to do", stderr)
	}
}

// A file of API tokens that holds none is refused: it would leave the
// API's reads open. One that group or others may read is warned of.
func TestServeAPITokenFile(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty-tokens")
	if err := os.WriteFile(empty, []byte("# tokens\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stderr, code := serveRefused(t, nil, "--zk", zktest.Shared(t).Addr, "--zk-root", e.root, "serve", "--data-dir", t.TempDir(),
		"--pipeline", "passthrough", "--nats-listen", "off", "--http", "127.0.0.1:0", "--api-tokens", empty)
	wantCode(t, code, 2)
	wantErrLine(t, stderr, "--api-tokens "+empty+" holds no token", "open to anyone", "ROLE TOKEN")

	// The file's token exported for the CLI's commands too: serve's refusal
	// of it given twice names the variable that gave it again.
	const mine = "s3cr3t-read-token-0123456789"
	file := filepath.Join(dir, "tokens")
	if err := os.WriteFile(file, []byte("read "+mine+" reader\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stderr, code = serveRefused(t, map[string]string{"INGESTQ_ADMIN_TOKEN": mine}, "--zk", zktest.Shared(t).Addr, "--zk-root", e.root,
		"serve", "--data-dir", t.TempDir(), "--pipeline", "passthrough", "--nats-listen", "off", "--http", "127.0.0.1:0", "--api-tokens", file)
	wantCode(t, code, 2)
	wantErrLine(t, stderr, file+", line 1: token given twice", "INGESTQ_ADMIN_TOKEN gives it again")

	open := filepath.Join(dir, "open-tokens")
	if err := os.WriteFile(open, []byte("read s3cr3t-read-token-0123456789 reader\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o644); err != nil { // as the umask may not give it
		t.Fatal(err)
	}
	d := serve(t, zktest.Shared(t).Addr, e.root, "--api-tokens", open)
	line := d.log.WaitFor(t, "--api-tokens: the token file is open to group or others")
	if !strings.Contains(line, "mode=0644") || !strings.Contains(line, open) || !strings.Contains(line, "WRN") {
		t.Errorf("the warning %q does not name the file, its mode 0644, as a warning", line)
	}
}

// serveRefused runs a serve that is to be refused, and returns its stderr
// and exit code. One that starts serving instead fails the test, and is
// stopped: a regression does not hang the test.
func serveRefused(t *testing.T, env map[string]string, args ...string) (string, int) {
	t.Helper()
	log := newWatchedLog("ingestq: serving")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exited := make(chan int, 1)
	go func() { exited <- cli.Run(ctx, args, log, log, func(k string) string { return env[k] }) }()
	select {
	case code := <-exited:
		t.Logf("ingestq %s → exit %d\n%s", strings.Join(args, " "), code, log.String())
		return log.String(), code
	case <-log.seen:
		cancel()
		<-exited
		t.Fatalf("ingestq %s serves, where it was to be refused; its log:\n%s", strings.Join(args, " "), log.String())
		return "", 0
	}
}

// watchedLog is a log that closes seen at the first write holding text
// (the daemon's "ingestq: serving"): a test can wait for it or for the
// command's exit, whichever comes first.
type watchedLog struct {
	logtest.Buffer
	text string
	once sync.Once
	seen chan struct{}
}

func newWatchedLog(text string) *watchedLog {
	return &watchedLog{text: text, seen: make(chan struct{})}
}

func (w *watchedLog) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.text) {
		w.once.Do(func() { close(w.seen) })
	}
	return w.Buffer.Write(p)
}

// wantTimestamp checks that a log line starts with an RFC 3339 time to the
// millisecond, with its zone.
func wantTimestamp(t *testing.T, line string) {
	t.Helper()
	if !logTime.MatchString(line) {
		t.Errorf("log line %q does not start with a time like 2006-01-02T15:04:05.000+01:00", line)
	}
}

// logTime is the start of a log line: RFC 3339 to the millisecond, with
// the zone.
var logTime = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}(Z|[+-]\d{2}:\d{2}) `)
