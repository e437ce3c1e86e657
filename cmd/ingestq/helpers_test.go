//go:build linux

package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/internal/natstest"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// ingestqBin is the daemon under test, built once by TestMain with -race.
var (
	ingestqBin string
	buildTook  time.Duration
	buildHow   = "with -race"      // or without, under INGESTQ_TEST_NORACE
	buildFlags = []string{"-race"} // go build's flags for buildHow
)

// TestMain builds cmd/ingestq with the race detector (a data race in the
// daemon then prints "WARNING: DATA RACE", which every test looks for in its
// daemons' logs), then runs the tests beside a shared ZooKeeper server and
// checks that they left no goroutine running.
//
// goleak.VerifyTestMain ends with os.Exit, so nothing runs after it: the
// binary's folder is named after this process, and each run removes the
// folders of runs whose process is gone.
//
// INGESTQ_TEST_NORACE=1 builds without -race (to compare timings);
// INGESTQ_TEST_LOGS=1 prints the tail of every daemon's log, not only on
// failure.
func TestMain(m *testing.M) {
	dir, err := binDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, "daemon tests:", err)
		os.Exit(1)
	}
	ingestqBin = filepath.Join(dir, "ingestq")
	start := time.Now()
	if os.Getenv("INGESTQ_TEST_NORACE") != "" { // to compare timings only
		buildFlags, buildHow = nil, "without -race"
	}
	build := exec.Command("go", append(append([]string{"build"}, buildFlags...), "-o", ingestqBin, "github.com/ingestq/ingestq/cmd/ingestq")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "daemon tests: go build", buildHow+":", err)
		os.Exit(1)
	}
	buildTook = time.Since(start)
	goleak.VerifyTestMain(zktest.WithShared(m))
}

// binDir makes <tmp>/ingestq-daemontest-<uid>/<pid> and removes the folders
// of earlier runs whose process no longer exists.
func binDir() (string, error) {
	base := filepath.Join(os.TempDir(), fmt.Sprintf("ingestq-daemontest-%d", os.Getuid()))
	if err := os.MkdirAll(base, 0o700); err != nil {
		return "", err
	}
	entries, _ := os.ReadDir(base)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			_ = os.RemoveAll(filepath.Join(base, e.Name()))
		}
	}
	dir := filepath.Join(base, strconv.Itoa(os.Getpid()))
	return dir, os.MkdirAll(dir, 0o700)
}

// ---- NATS ----------------------------------------------------------------

// startNATS runs a JetStream nats-server in the test process on 127.0.0.1
// (port -1: a free one). t.Cleanup shuts it down (a no-op if the test did).
func startNATS(t testing.TB, port int, storeDir string) *server.Server {
	t.Helper()
	return natstest.Run(t, &server.Options{
		ServerName: "test-" + strconv.Itoa(port), Host: "127.0.0.1", Port: port,
		JetStream: true, StoreDir: storeDir, NoSigs: true, NoLog: true,
	})
}

func natsPort(ns *server.Server) int { return ns.Addr().(*net.TCPAddr).Port }

// recorder keeps every event seen on ingestq.> by a core NATS subscriber,
// as an outside service would see them.
type recorder struct {
	t  testing.TB
	nc *nats.Conn

	mu      sync.Mutex
	evs     []events.Event
	changed chan struct{} // closed and replaced on every event
}

// record subscribes to every event on the server at url (opts: its TLS, its
// credentials); it returns once the server has the subscription, so nothing
// published afterwards is missed.
func record(t testing.TB, url string, opts ...nats.Option) *recorder {
	t.Helper()
	nc, err := nats.Connect(url, append([]nats.Option{nats.MaxReconnects(-1)}, opts...)...)
	if err != nil {
		t.Fatalf("connect to NATS %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	r := &recorder{t: t, nc: nc, changed: make(chan struct{})}
	sub, err := nc.Subscribe(events.SubjectAll, func(m *nats.Msg) {
		var e events.Event
		if err := json.Unmarshal(m.Data, &e); err != nil {
			return
		}
		r.mu.Lock()
		r.evs = append(r.evs, e)
		close(r.changed)
		r.changed = make(chan struct{})
		r.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = sub.SetPendingLimits(-1, -1) // never drop as a slow consumer
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return r
}

// snapshot returns a copy of the events so far.
func (r *recorder) snapshot() []events.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.evs)
}

// waitFor waits until cond holds over the events so far (it is called with
// every new event), failing the test after timeout.
func (r *recorder) waitFor(timeout time.Duration, what string, cond func([]events.Event) bool) {
	r.t.Helper()
	r.waitForDiag(timeout, what, cond, nil)
}

// waitForDiag is waitFor that adds diag's word to the failure.
func (r *recorder) waitForDiag(timeout time.Duration, what string, cond func([]events.Event) bool, diag func() string) {
	r.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		ok, ch, n := cond(r.evs), r.changed, len(r.evs)
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			more := ""
			if diag != nil {
				more = "\n" + diag()
			}
			r.t.Fatalf("timed out after %v waiting for %s (%d events seen)%s", timeout, what, n, more)
		}
	}
}

// replay reads the batch's recorded events back from the stream.
func replay(t testing.TB, url, bid string, opts ...nats.Option) []events.Event {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("connect to NATS %s: %v", url, err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []events.Event
	err = events.Replay(ctx, nc, "", events.Filter{BatchID: bid}, func(e events.Event) error {
		out = append(out, e)
		return nil
	})
	if err != nil {
		t.Fatalf("replay batch %s: %v", bid, err)
	}
	return out
}

// countCompleted counts job.completed events of batch bid.
func countCompleted(evs []events.Event, bid string) int {
	n := 0
	for _, e := range evs {
		if e.Kind == events.KindJob && e.BatchID == bid && e.To == string(queue.Completed) {
			n++
		}
	}
	return n
}

// batchReported tells whether the batch's Completed or Failed event is in evs.
func batchReported(evs []events.Event, bid string) bool {
	for _, e := range evs {
		if e.Kind == events.KindBatch && e.BatchID == bid && (e.To == string(queue.Completed) || e.To == string(queue.Failed)) {
			return true
		}
	}
	return false
}

// waitReport waits for the batch's report event; on a timeout it says
// where the batch's unfinished jobs are and who holds them.
func waitReport(t testing.TB, rec *recorder, q *queue.Queue, bid string, timeout time.Duration) {
	t.Helper()
	rec.waitForDiag(timeout, "the report event of batch "+bid, func(evs []events.Event) bool { return batchReported(evs, bid) },
		func() string { return describeBatch(q, bid) })
}

// describeBatch tells the batch's state and, for each job not done yet,
// its state and the session holding its lock.
func describeBatch(q *queue.Queue, bid string) string {
	ctx := context.Background() // for a failure message, after the test's context may have ended
	var sb strings.Builder
	b, err := q.LoadBatch(ctx, bid)
	if err != nil {
		return fmt.Sprintf("batch %s: %v", bid, err)
	}
	fmt.Fprintf(&sb, "batch %s is %s (%q)", bid, b.State(), b.Status.Message)
	buckets, err := q.BatchJobs(ctx, bid)
	if err != nil {
		return sb.String() + fmt.Sprintf("; jobs: %v", err)
	}
	open := buckets["batch-processing"]
	fmt.Fprintf(&sb, "; %d jobs not done (this test's own session is 0x%x)", len(open), connOf(q).SessionID())
	for i, jid := range open {
		if i == 20 {
			sb.WriteString("\n  …")
			break
		}
		j, err := q.LoadJob(ctx, jid)
		if err != nil {
			fmt.Fprintf(&sb, "\n  %s: %v", jid, err)
			continue
		}
		owner := "none"
		if ok, st, err := connOf(q).Exists(q.Path("/jobs/" + jid + "/lock")); err == nil && ok {
			owner = fmt.Sprintf("session 0x%x", st.EphemeralOwner)
		}
		fmt.Fprintf(&sb, "\n  %s: %s (%q), lock held by %s", jid, j.State(), j.Status.Message, owner)
	}
	return sb.String()
}

func perHost(evs []events.Event) map[string]int {
	m := map[string]int{}
	for _, e := range evs {
		m[e.Host]++
	}
	return m
}

// ---- the daemon ----------------------------------------------------------

type daemonConfig struct {
	Host  string
	ZK    string // --zk
	Root  string // --zk-root
	NATS  string // --nats
	Grace time.Duration
	Delay time.Duration // --passthrough-delay
	Extra []string      // more flags
	// Ingest runs the ingest pipeline (default: pass-through) with its
	// data in DataDir (default: a fresh folder), which a restarted daemon
	// can share.
	Ingest  bool
	DataDir string
	// Env, when set, is the daemon's whole environment, as systemd's
	// EnvironmentFile gives it: the command line is then only serve,
	// --host, --pipeline, --max-fill and Extra, and every other setting
	// comes from Env.
	Env []string
	// Bin is the ingestq binary to run (default: this build's, ingestqBin).
	Bin string
}

// daemon is one `ingestq serve` child process.
type daemon struct {
	t    testing.TB
	name string
	cmd  *exec.Cmd
	log  string // stdout and stderr
	// dataDir is its --data-dir, which a daemon started again can reuse.
	dataDir string
	// metricsToken is the bearer token its /metrics asks (--metrics-auth
	// token); none by default.
	metricsToken string

	done     chan struct{} // closed when the process has exited
	exitedAt time.Time
	state    *os.ProcessState
}

// startDaemon starts `ingestq serve` in its own process group and waits
// until its reactor runs. t.Cleanup SIGKILLs the group if it still runs,
// fails the test on a data race or a panic in its log, and prints the log's
// tail when the test failed.
func startDaemon(t testing.TB, c daemonConfig) *daemon {
	t.Helper()
	d := launchDaemon(t, c)
	d.waitLog(30*time.Second, "reactor: running")
	return d
}

// launchDaemon is startDaemon without the wait: daemons launched one after
// the other start at the same instant.
func launchDaemon(t testing.TB, c daemonConfig) *daemon {
	t.Helper()
	if c.Grace == 0 {
		c.Grace = 5 * time.Second
	}
	dir := t.TempDir()
	d := &daemon{t: t, name: c.Host, log: filepath.Join(dir, c.Host+".log"), done: make(chan struct{})}
	logf, err := os.Create(d.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	if c.DataDir == "" {
		c.DataDir = filepath.Join(dir, "data")
	}
	d.dataDir = c.DataDir
	pipeline := "passthrough"
	if c.Ingest {
		pipeline = "ingest"
	}
	args := []string{"serve", "--zk", c.ZK, "--zk-root", c.Root, "--data-dir", c.DataDir, "--pipeline", pipeline,
		"--host", c.Host, "--nats", c.NATS, "--grace", c.Grace.String(), "--rescan", "2s", "--backoff", "20ms",
		"--log-level", "info", "--passthrough-delay", c.Delay.String(), "--http", "127.0.0.1:0"}
	env := os.Environ()
	if c.Env != nil {
		args, env = []string{"serve", "--host", c.Host, "--pipeline", pipeline}, c.Env
	}
	// Only --space-margin holds a job back: the tests pass on a disk past the
	// default --max-fill 0.8 (as CI's was). A flag, which the upgrade test's
	// previous release knows too.
	args = append(args, "--max-fill", "1")
	args = append(args, c.Extra...)
	bin, built := ingestqBin, fmt.Sprintf("built %s in %v", buildHow, buildTook.Round(time.Millisecond))
	if c.Bin != "" {
		bin, built = c.Bin, "another build"
	}
	d.cmd = exec.Command(bin, args...)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	// The tests serve payloads on this host; a variable, not --fetch-allow, which
	// the upgrade test's previous release does not know.
	d.cmd.Env = append(env, "GORACE=halt_on_error=0", "INGESTQ_FETCH_ALLOW=127.0.0.0/8")
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", c.Host, err)
	}
	t.Logf("%s: pid %d: %s %s (%s)", c.Host, d.cmd.Process.Pid, bin, strings.Join(args, " "), built)
	go func() {
		_ = d.cmd.Wait()
		d.exitedAt = time.Now()
		d.state = d.cmd.ProcessState
		close(d.done)
	}()
	t.Cleanup(d.cleanup)
	return d
}

func (d *daemon) cleanup() {
	if !d.exited() && d.t.Failed() {
		// A Go program dumps every goroutine's stack on SIGQUIT: what was
		// the daemon doing when the test gave up on it?
		_ = syscall.Kill(d.cmd.Process.Pid, syscall.SIGQUIT)
		d.wait(5 * time.Second)
	}
	if !d.exited() {
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		<-d.done
	}
	out := d.logText()
	known, unknown := races(out)
	for _, r := range unknown {
		d.t.Errorf("%s: a data race in its log:\n%s", d.name, r)
	}
	if len(known) > 0 {
		d.t.Logf("%s: %d report(s) of go-zookeeper's own lastZxid race (upstream, not ingestq's), e.g.:\n%s",
			d.name, len(known), excerpt(known[0], 12))
	}
	for _, bad := range []string{"panic:", "fatal error:"} {
		if i := strings.Index(out, bad); i >= 0 {
			d.t.Errorf("%s: %q in its log:\n%s", d.name, bad, excerpt(out[i:], 60))
		}
	}
	if d.t.Failed() || os.Getenv("INGESTQ_TEST_LOGS") != "" {
		d.t.Logf("%s: %s; last lines of its log:\n%s", d.name, d.status(), tail(out, 60))
	}
	if d.t.Failed() {
		var notable []string
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, " ERR ") || strings.Contains(l, "reactor: ") && strings.Contains(l, " WRN ") &&
				!strings.Contains(l, "listing failed") {
				notable = append(notable, l)
			}
		}
		keep := filepath.Join(os.TempDir(), fmt.Sprintf("ingestq-daemontest-%d-logs", os.Getuid()),
			fmt.Sprintf("%s-%s-%d.log", sanitize(d.t.Name()), d.name, d.cmd.Process.Pid))
		if os.MkdirAll(filepath.Dir(keep), 0o700) == nil && os.WriteFile(keep, []byte(out), 0o600) == nil {
			d.t.Logf("%s: whole log kept in %s", d.name, keep)
		}
		d.t.Logf("%s: its ERR lines and reactor warnings (%d):\n%s", d.name, len(notable), tail(strings.Join(notable, "\n"), 40))
	}
}

// raceExit is the exit code of a -race binary that reported a race.
const raceExit = 66

// races splits the race detector's reports in a log into the one known
// race inside go-zookeeper v1.0.4 (Conn.lastZxid, written by recvLoop and
// read by sendSetWatches on every reconnect that re-sends watches: open
// upstream as go-zookeeper/zk#35 and samuel/go-zookeeper#260; this build's
// connections order the two, zkwatch/watchesfirst.go, but the previous
// release the upgrade test runs does not) and every other race.
func races(log string) (known, unknown []string) {
	parts := strings.Split(log, "WARNING: DATA RACE")
	for _, p := range parts[1:] {
		report, _, _ := strings.Cut(p, "==================")
		report = "WARNING: DATA RACE" + report
		if topFrame(report, "Write at") == "github.com/go-zookeeper/zk.(*Conn).recvLoop" &&
			topFrame(report, "Previous read at") == "github.com/go-zookeeper/zk.(*Conn).sendSetWatches" {
			known = append(known, report)
		} else {
			unknown = append(unknown, report)
		}
	}
	return known, unknown
}

var frameRE = regexp.MustCompile(`(?m)^\s*(\S+)\(\)$`)

// topFrame is the first function of the stack that follows heading in a
// race report.
func topFrame(report, heading string) string {
	i := strings.Index(report, heading)
	if i < 0 {
		return ""
	}
	m := frameRE.FindStringSubmatch(report[i:])
	if m == nil {
		return ""
	}
	return m[1]
}

func (d *daemon) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

func (d *daemon) status() string {
	if !d.exited() {
		return "still running"
	}
	return d.state.String()
}

func (d *daemon) signal(sig syscall.Signal) {
	d.t.Helper()
	if err := syscall.Kill(d.cmd.Process.Pid, sig); err != nil {
		d.t.Fatalf("%s: kill %v: %v", d.name, sig, err)
	}
}

// kill SIGKILLs the daemon's process group and waits for the exit.
func (d *daemon) kill() {
	d.t.Helper()
	if err := syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		d.t.Fatalf("%s: SIGKILL: %v", d.name, err)
	}
	<-d.done
}

// wait waits up to timeout for the process to exit; false if it did not.
func (d *daemon) wait(timeout time.Duration) bool {
	select {
	case <-d.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// stop SIGTERMs the daemon and waits for a clean exit (code 0).
func (d *daemon) stop(timeout time.Duration) {
	d.t.Helper()
	d.signal(syscall.SIGTERM)
	if !d.wait(timeout) {
		d.t.Fatalf("%s: still running %v after SIGTERM", d.name, timeout)
	}
	code := d.state.ExitCode()
	if known, unknown := races(d.logText()); code == raceExit && len(known) > 0 && len(unknown) == 0 {
		code = 0 // only go-zookeeper's known race (logged by cleanup)
	}
	if code != 0 {
		d.t.Errorf("%s: exit %s after SIGTERM, want 0", d.name, d.state)
	}
}

func (d *daemon) logText() string {
	b, _ := os.ReadFile(d.log)
	return string(b)
}

// waitLog polls the log until it holds s.
func (d *daemon) waitLog(timeout time.Duration, s string) {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(d.logText(), s) {
		if d.exited() {
			d.t.Fatalf("%s exited (%s) before logging %q:\n%s", d.name, d.state, s, tail(d.logText(), 40))
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("%s: no %q in its log after %v:\n%s", d.name, s, timeout, tail(d.logText(), 40))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitLogAfter polls the log until s is on the first line holding first,
// or after it.
func (d *daemon) waitLogAfter(timeout time.Duration, first, s string) {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		text := d.logText()
		if i := strings.Index(text, first); i >= 0 && strings.Contains(text[strings.LastIndex(text[:i], "\n")+1:], s) {
			return
		}
		if d.exited() {
			d.t.Fatalf("%s exited (%s) before logging %q after %q:\n%s", d.name, d.state, s, first, tail(text, 40))
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("%s: no %q after %q in its log after %v:\n%s", d.name, s, first, timeout, tail(text, 40))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logLines returns the log's lines that contain s.
func (d *daemon) logLines(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(d.logText()))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			out = append(out, sc.Text())
		}
	}
	return out
}

// waitEventsTaken waits until the daemon has no event waiting for the
// stream (its ingestq_events_waiting is 0).
func (d *daemon) waitEventsTaken(timeout time.Duration) {
	d.t.Helper()
	poll(d.t, timeout, d.name+"'s events taken by the stream", func() (bool, string, error) {
		n, err := eventsWaiting(d)
		return err == nil && n == 0, strconv.Itoa(n) + " waiting", err
	})
}

var stoppedRE = regexp.MustCompile(`ingestq: stopped.*events_published=(\d+).*events_lost=(\d+)`)

// stopped parses the daemon's last "ingestq: stopped" line.
func (d *daemon) stopped() (published, lost int) {
	d.t.Helper()
	m := stoppedRE.FindAllStringSubmatch(d.logText(), -1)
	if len(m) == 0 {
		d.t.Fatalf("%s: no \"ingestq: stopped … events_published=… events_lost=…\" line in its log:\n%s", d.name, tail(d.logText(), 30))
	}
	last := m[len(m)-1]
	published, _ = strconv.Atoi(last[1])
	lost, _ = strconv.Atoi(last[2])
	return published, lost
}

// assertNoLoss fails unless the stopped daemon lost no event: its
// "stopped" line says events_lost=0, and neither the bus's loss warning nor
// its closing count (logged after that line) appears.
func (d *daemon) assertNoLoss() (published int) {
	d.t.Helper()
	published, lost := d.stopped()
	if lost != 0 {
		d.t.Errorf("%s: events_lost=%d with NATS up all along", d.name, lost)
	}
	for _, s := range []string{"events: events not recorded", "events: closing with unacknowledged events"} {
		if l := d.logLines(s); len(l) > 0 {
			d.t.Errorf("%s lost events with NATS up all along: %s", d.name, strings.TrimSpace(l[0]))
		}
	}
	return published
}

func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '_'
	}, name)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func excerpt(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

// ---- ZooKeeper -----------------------------------------------------------

// openQueue is the test's own session on the queue under root.
func openQueue(t testing.TB, addr, root string) *queue.Queue {
	t.Helper()
	conn := zktest.Connect(t, addr)
	q, err := queue.New(conn, root)
	if err != nil {
		t.Fatal(err)
	}
	testConns.Store(q, conn)
	t.Cleanup(func() { testConns.Delete(q) })
	if err := q.Init(t.Context()); err != nil {
		t.Fatal(err)
	}
	return q
}

// testConns keeps each test queue's own session: the tests play foreign
// writers and readers on it, as another program would.
var testConns sync.Map // *queue.Queue → *zk.Conn

func connOf(q *queue.Queue) *zk.Conn {
	c, _ := testConns.Load(q)
	return c.(*zk.Conn)
}

func createBatch(t testing.TB, q *queue.Queue, n int) string {
	t.Helper()
	b, err := q.CreateBatch(t.Context(), queue.SubmissionOf(map[string]any{"profile_name": "demo", "payload_url": fmt.Sprintf("passthrough:%d", n)}))
	if err != nil {
		t.Fatal(err)
	}
	return b.ID
}

// poll calls check every 100 ms until it reports done, failing the test
// after timeout with check's last word. Errors (ZooKeeper away) are retried.
func poll(t testing.TB, timeout time.Duration, what string, check func() (done bool, status string, err error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		done, status, err := check()
		if err == nil && done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %s (err %v)", timeout, what, status, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitBatchDone polls ZooKeeper until the batch is Completed or Failed.
func waitBatchDone(t testing.TB, q *queue.Queue, bid string, timeout time.Duration) {
	t.Helper()
	poll(t, timeout, "batch "+bid+" to finish in ZooKeeper", func() (bool, string, error) {
		b, err := q.LoadBatch(t.Context(), bid)
		if err != nil {
			return false, "", err
		}
		buckets, err := q.BatchJobs(t.Context(), bid)
		if err != nil {
			return false, "", err
		}
		counts := map[string]int{}
		for k, v := range buckets {
			counts[k] = len(v)
		}
		return b.State() == queue.Completed || b.State() == queue.Failed,
			fmt.Sprintf("batch %s, jobs by bucket %v", b.State(), counts), nil
	})
}

// assertBatchCompleted checks ZooKeeper's outcome: the batch Completed with
// a report naming its n jobs, each job Completed once in its folders, and
// Check clean. It returns the batch's job ids.
func assertBatchCompleted(t testing.TB, q *queue.Queue, bid string, n int) []string {
	t.Helper()
	b, err := q.LoadBatch(t.Context(), bid)
	if err != nil {
		t.Fatal(err)
	}
	if b.State() != queue.Completed {
		t.Errorf("batch %s is %s (%q), want Completed", bid, b.State(), b.Status.Message)
	}
	buckets, err := q.BatchJobs(t.Context(), bid)
	if err != nil {
		t.Fatal(err)
	}
	jids := buckets["batch-completed"]
	for k, v := range buckets {
		if k != "batch-completed" && len(v) > 0 {
			t.Errorf("batch %s: %d jobs in %s, want 0", bid, len(v), k)
		}
	}
	if len(jids) != n {
		t.Errorf("batch %s: %d jobs in batch-completed, want %d", bid, len(jids), n)
	}
	if b.Report == nil {
		t.Errorf("batch %s has no status-report", bid)
	} else {
		got := slices.Sorted(slices.Values(b.Report.SuccessfulJobs))
		if want := slices.Sorted(slices.Values(jids)); !slices.Equal(slices.Compact(got), want) || len(got) != n {
			t.Errorf("batch %s: status-report lists %d successful jobs (%d distinct), want the %d of batch-completed",
				bid, len(got), len(slices.Compact(slices.Clone(got))), len(want))
		}
		if len(b.Report.FailedJobs) != 0 {
			t.Errorf("batch %s: status-report lists failed jobs %v", bid, b.Report.FailedJobs)
		}
	}
	for _, jid := range jids {
		j, err := q.LoadJob(t.Context(), jid)
		if err != nil {
			t.Errorf("job %s: %v", jid, err)
			continue
		}
		if j.State() != queue.Completed || j.Status.RetryCount != 0 || j.Locked {
			t.Errorf("job %s: status %s, retry_count %d, locked %v; want Completed, 0, unlocked",
				jid, j.State(), j.Status.RetryCount, j.Locked)
		}
	}
	assertCheckClean(t, q)
	return jids
}

func assertCheckClean(t testing.TB, q *queue.Queue) {
	t.Helper()
	v, _, err := q.CheckAll(t.Context(), queue.CheckOptions{}) // the job invariant and the batches' (one job per object…)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if len(v) > 0 {
		t.Errorf("Check: %d violations, first ones: %v", len(v), v[:min(len(v), 10)])
	}
}

// completedRefs counts /jobs/states/completed.
func completedRefs(t testing.TB, q *queue.Queue) int {
	t.Helper()
	refs, problems, err := q.Refs(t.Context(), queue.Completed)
	if err != nil || len(problems) > 0 {
		t.Fatalf("Refs(Completed): %v %v", err, problems)
	}
	return len(refs)
}

// locks lists the lock nodes of every job and batch, with the session that
// owns each (its ephemeralOwner).
func locks(q *queue.Queue) (map[string]int64, error) {
	conn := connOf(q)
	out := map[string]int64{}
	for _, dir := range []string{"/jobs", "/batches"} {
		kids, _, err := conn.Children(q.Path(dir))
		if err != nil {
			return nil, err
		}
		for _, k := range kids {
			if k == "states" {
				continue
			}
			p := path.Join(q.Path(dir), k, "lock")
			ok, st, err := conn.Exists(p)
			if err != nil {
				return nil, err
			}
			if ok {
				out[p] = st.EphemeralOwner
			}
		}
	}
	return out, nil
}

// ---- event accounting ----------------------------------------------------

// pipeline is the job states in order; a job event into pipeline[i] must
// come from pipeline[i-1].
var pipeline = []queue.State{queue.Pending, queue.Estimating, queue.Provisioning, queue.Downloading,
	queue.Processing, queue.Storing, queue.Recording, queue.Notify, queue.Completed}

type jobState struct {
	jid string
	to  queue.State
}

// tally counts a batch's job events per (job, state entered).
type tally struct {
	count   map[jobState]int
	byJob   map[jobState]events.Event // one event per (job, state)
	all     map[jobState][]events.Event
	dups    []jobState // entered more than once
	missing []jobState // no event
	wrong   []string   // events that do not fit the pipeline or the batch
}

func tallyJobs(evs []events.Event, bid string, jids []string) *tally {
	tl := &tally{count: map[jobState]int{}, byJob: map[jobState]events.Event{}, all: map[jobState][]events.Event{}}
	known := map[string]bool{}
	for _, j := range jids {
		known[j] = true
	}
	for _, e := range evs {
		if e.Kind != events.KindJob || e.BatchID != bid {
			continue
		}
		i := slices.Index(pipeline, queue.State(e.To))
		switch {
		case !known[e.JobID]:
			tl.wrong = append(tl.wrong, fmt.Sprintf("%s %s→%s: not a job of batch %s", e.JobID, e.From, e.To, bid))
			continue
		case i < 1 || e.From != string(pipeline[i-1]) && e.RecoveredBy == "": // a recovered move's origin is not known
			tl.wrong = append(tl.wrong, fmt.Sprintf("%s %s→%s (host %s): not a pipeline step", e.JobID, e.From, e.To, e.Host))
			continue
		}
		k := jobState{e.JobID, queue.State(e.To)}
		tl.count[k]++
		tl.byJob[k] = e
		tl.all[k] = append(tl.all[k], e)
	}
	for _, jid := range jids {
		for _, s := range pipeline[1:] {
			k := jobState{jid, s}
			switch n := tl.count[k]; {
			case n == 0:
				tl.missing = append(tl.missing, k)
			case n > 1:
				tl.dups = append(tl.dups, k)
			}
		}
	}
	return tl
}

// batchEvents counts a batch's events per state entered.
func batchEvents(evs []events.Event, bid string) map[string]int {
	m := map[string]int{}
	for _, e := range evs {
		if e.Kind == events.KindBatch && e.BatchID == bid {
			m[e.To]++
		}
	}
	return m
}

// assertExactlyOnce fails unless every job of the batch entered each
// pipeline state in exactly one event, and the batch went Processing,
// Reporting, Completed in one event each.
func assertExactlyOnce(t testing.TB, evs []events.Event, bid string, jids []string) {
	t.Helper()
	tl := tallyJobs(evs, bid, jids)
	if len(tl.wrong) > 0 || len(tl.dups) > 0 || len(tl.missing) > 0 {
		t.Errorf("job events of batch %s: %d off-pipeline %v, %d duplicated %v, %d missing %v%s",
			bid, len(tl.wrong), first(tl.wrong), len(tl.dups), first(tl.dups), len(tl.missing), first(tl.missing), tl.describeDups())
	}
	want := map[string]int{"Processing": 1, "Reporting": 1, "Completed": 1}
	if got := batchEvents(evs, bid); !mapsEqual(got, want) {
		t.Errorf("batch %s events per state %v, want %v", bid, got, want)
	}
}

func first[T any](s []T) []T { return s[:min(len(s), 5)] }

// describeDups shows the events of the first duplicated (job, state)s.
func (tl *tally) describeDups() string {
	var sb strings.Builder
	for _, k := range first(tl.dups) {
		for _, e := range tl.all[k] {
			fmt.Fprintf(&sb, "\n  %s %s→%s by %s at %s (event %s)", e.JobID, e.From, e.To, e.Host,
				e.Time.Local().Format("15:04:05.000000"), e.ID)
		}
	}
	return sb.String()
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// sessionsOf returns the distinct owners of the given locks.
func sessionsOf(l map[string]int64) map[int64]bool {
	out := map[int64]bool{}
	for _, o := range l {
		out[o] = true
	}
	return out
}
