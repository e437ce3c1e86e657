//go:build linux

package main_test

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// bigRig is one ZooKeeper, a web server for manifests and files, and one
// `ingestq serve` process: with --pipeline rehearse (the real payload
// reading, job making and reports, every job step a no-op) or ingest (the
// whole pipeline, on local storage and the embedded inventory).
type bigRig struct {
	pipeline string
	t        testing.TB
	zk       string
	root     string
	q        *queue.Queue
	web      *files
	nats     string
	daemon   *daemon
	peaks    *folderPeaks
}

func newBigRig(t testing.TB, window int, pipeline string) *bigRig {
	srv := zktest.OwnServer(t)
	r := &bigRig{pipeline: pipeline, t: t, zk: srv.Addr, root: zktest.Root(t), web: newFiles(t), nats: startNATS(t, -1, t.TempDir()).ClientURL()}
	var err error
	if r.q, err = queue.New(zktest.Connect(t, srv.Addr), r.root); err != nil {
		t.Fatal(err)
	}
	if err := r.q.Init(t.Context()); err != nil {
		t.Fatal(err)
	}
	r.peaks = watchFolderPeaks(t, srv.Addr, r.q)
	r.daemon = startDaemon(t, daemonConfig{Host: "big", ZK: r.zk, Root: r.root, NATS: r.nats,
		Extra: []string{"--pipeline", pipeline, "--batch-window", strconv.Itoa(window), "--zk-session-timeout", "10s"}})
	return r
}

// manifest puts a single-file batch manifest of n objects on the web server,
// and for the ingest pipeline their files (a rehearsal downloads nothing).
func (r *bigRig) manifest(tag string, n int) string {
	var m strings.Builder
	m.WriteString(batchHeader("mrt-single-file-batch-manifest"))
	for i := range n {
		path := fmt.Sprintf("/%s/%d.txt", tag, i)
		data := fmt.Appendf(nil, "object %d of batch %s\n", i, tag)
		if r.pipeline == "ingest" {
			r.web.put(path, data)
		}
		fmt.Fprintf(&m, "%s%s | md5 | %s | %d | | file.txt | | %s-%d | | |\n", r.web.srv.URL, path, md5hex(data), len(data), tag, i)
	}
	m.WriteString("#%eof\n")
	return r.web.put("/"+tag+"/batch.checkm", []byte(m.String()))
}

// cli runs an ingestq command against the rig's queue and returns its
// stdout; a non-zero exit fails the test unless it is want.
func (r *bigRig) cli(want int, args ...string) string {
	r.t.Helper()
	cmd := exec.Command(ingestqBin, append([]string{"--zk", r.zk, "--zk-root", r.root, "--nats", r.nats}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if code := cmd.ProcessState.ExitCode(); code != want {
		r.t.Fatalf("ingestq %s: exit %d (%v), want %d\nstderr: %s", strings.Join(args, " "), code, err, want, tail(stderr.String(), 20))
	}
	return string(out)
}

// folderPeaks records the most refs any job state folder, /jobs, or a
// batch's bucket was listed with, through a watcher of its own (as a
// foreign reader would list them).
type folderPeaks struct {
	mu  sync.Mutex
	max map[string]int
	w   *zkwatch.Watcher
	q   *queue.Queue
}

func watchFolderPeaks(t testing.TB, addr string, q *queue.Queue) *folderPeaks {
	s, err := zkwatch.Dial(t.Context(), zkwatch.Config{Servers: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	p := &folderPeaks{max: map[string]int{}, q: q}
	p.w = zkwatch.NewWatcher(s, zkwatch.WatcherConfig{Rescan: -1}, func(c zkwatch.Change) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.max[strings.TrimPrefix(c.Path, q.Root())] = max(p.max[strings.TrimPrefix(c.Path, q.Root())], c.Count)
	})
	t.Cleanup(p.w.Close)
	p.w.Watch(q.Path("/jobs"))
	for _, s := range queue.JobMachine.States {
		p.w.Watch(q.Path("/jobs/states/" + s.Folder()))
	}
	return p
}

func (p *folderPeaks) watchBatch(bid string) {
	for _, b := range queue.Buckets {
		p.w.Watch(p.q.Path("/batches/" + bid + "/states/" + b))
	}
}

// highest is the folder listed with the most refs, and how many.
func (p *folderPeaks) highest() (string, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	folder, most := "", 0
	for f, n := range p.max {
		if n > most {
			folder, most = f, n
		}
	}
	return folder, most
}

// procMiB reads a size field of /proc/PID/status in MiB: VmRSS, the
// resident set now, or VmHWM, its peak so far.
func procMiB(pid int, field string) (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			return float64(kb) / 1024, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// run submits a single-file batch manifest of n objects with `ingestq
// submit --wait` and returns its bid and how long it took.
func (r *bigRig) run(tag string, n int) (string, time.Duration) {
	url := r.manifest(tag, n)
	start := time.Now()
	out := r.cli(0, "submit", "--profile", "demo", "--type", "manifest", "--wait", url)
	took := time.Since(start)
	bid := strings.SplitN(out, "\n", 2)[0]
	if want := fmt.Sprintf("successful jobs: %d", n); !strings.Contains(out, want) {
		r.t.Fatalf("submit --wait of %d objects:\n%s\nwant %q", n, tail(out, 20), want)
	}
	return bid, took
}

// A single-file batch manifest of more objects than the window, rehearsed
// by a real daemon: it completes, and `submit --wait` reports every
// object; no folder is ever listed with more than the window's worth of
// refs (and a little for the archiving that trails completion); `show`
// counts the archived jobs, `ls batches` counts them, and `check` passes.
func TestBigBatchRehearsed(t *testing.T) {
	t.Parallel()
	const objects, window = 1500, 300
	r := newBigRig(t, window, "rehearse")
	url := r.manifest("big", objects)
	sub := exec.Command(ingestqBin, "--zk", r.zk, "--zk-root", r.root, "--nats", r.nats, "submit", "--profile", "demo", "--type", "manifest", "--wait", url)
	stdout, err := sub.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() {
		t.Fatal("submit printed no bid")
	}
	bid := lines.Text()
	r.peaks.watchBatch(bid)
	var rest strings.Builder
	for lines.Scan() {
		rest.WriteString(lines.Text() + "\n")
	}
	if err := sub.Wait(); err != nil {
		t.Fatalf("submit --wait: %v\n%s", err, rest.String())
	}
	if want := fmt.Sprintf("successful jobs: %d", objects); !strings.Contains(rest.String(), want) {
		t.Errorf("submit --wait:\n%s\nwant %q", tail(rest.String(), 10), want)
	}
	if folder, n := r.peaks.highest(); n > window+2*window/5 {
		t.Errorf("%s was listed with %d refs; the window is %d", folder, n, window)
	}
	show := r.cli(0, "show", bid, "-o", "json")
	if !strings.Contains(show, `"archived_jobs":`) {
		t.Errorf("show %s names no archived jobs:\n%s", bid, tail(show, 20))
	}
	if ls := r.cli(0, "ls", "batches"); !strings.Contains(ls, "archived") {
		t.Errorf("ls batches does not count archived jobs:\n%s", ls)
	}
	r.cli(0, "check")
}

// BenchmarkBigBatch runs one single-file batch manifest of
// INGESTQ_BIG_OBJECTS objects (default 100,000) beside a small batch of
// 1,000 through the same daemon, rehearsed (or through the whole pipeline
// with INGESTQ_BIG_PIPELINE=ingest), and reports both rates, their ratio,
// the daemon's peak RSS and the most refs any folder was listed with. Run
// without the race detector:
//
//	INGESTQ_TEST_NORACE=1 go test -run '^$' -bench BigBatch -benchtime 1x -timeout 3h ./cmd/ingestq/
//	INGESTQ_TEST_NORACE=1 INGESTQ_BIG_PIPELINE=ingest INGESTQ_BIG_OBJECTS=10000 go test … (the same)
func BenchmarkBigBatch(b *testing.B) {
	objects := 100_000
	if n, err := strconv.Atoi(os.Getenv("INGESTQ_BIG_OBJECTS")); err == nil && n > 0 {
		objects = n
	}
	pipeline := cmp.Or(os.Getenv("INGESTQ_BIG_PIPELINE"), "rehearse")
	if testing.Short() {
		objects = 6000
	}
	const small = 1000
	r := newBigRig(b, 5000, pipeline)
	idle, err := procMiB(r.daemon.cmd.Process.Pid, "VmRSS")
	if err != nil {
		b.Fatal(err)
	}
	var bid string
	for b.Loop() {
		var took time.Duration
		_, smallTook := r.run(fmt.Sprintf("small%d", time.Now().UnixNano()), small)
		bid, took = r.run(fmt.Sprintf("big%d", time.Now().UnixNano()), objects)
		smallRate, bigRate := small/smallTook.Seconds(), float64(objects)/took.Seconds()
		b.ReportMetric(smallRate, "small-objects/s")
		b.ReportMetric(bigRate, "big-objects/s")
		b.ReportMetric(100*bigRate/smallRate, "pct-of-small")
		b.Logf("batch %s: %d objects in %v; a batch of %d in %v", bid, objects, took.Round(time.Second), small, smallTook.Round(time.Millisecond))
	}
	rss, err := procMiB(r.daemon.cmd.Process.Pid, "VmHWM")
	if err != nil {
		b.Fatal(err)
	}
	folder, most := r.peaks.highest()
	b.ReportMetric(idle, "idle-RSS-MiB") // after the loop: b.Loop resets the metrics
	b.ReportMetric(rss, "peak-RSS-MiB")
	b.ReportMetric(float64(most), "most-refs-listed")
	b.Logf("most refs listed: %d in %s", most, folder)
	if m := regexp.MustCompile(`http=(http://\S+)`).FindStringSubmatch(r.daemon.logText()); m != nil {
		if path, err := saveHeapProfile(m[1]); err == nil {
			b.Logf("heap profile: go tool pprof -top -sample_index=inuse_space %s", path)
		} else {
			b.Logf("no heap profile: %v", err)
		}
	}
	for _, args := range [][]string{{"ls", "batches"}, {"ls", "jobs"}, {"check"}, {"show", bid}, {"show", bid, "-o", "json"}} {
		start := time.Now()
		out := r.cli(0, args...)
		b.Logf("ingestq %s: %v, %d lines", strings.Join(args, " "), time.Since(start).Round(time.Millisecond), strings.Count(out, "\n"))
	}
}

// saveHeapProfile keeps a daemon's heap profile in the system's temporary
// folder, for go tool pprof after the run.
func saveHeapProfile(base string) (string, error) {
	resp, err := http.Get(base + "/debug/pprof/heap")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	path := filepath.Join(os.TempDir(), fmt.Sprintf("ingestq-bigbatch-heap-%d.pb.gz", time.Now().Unix()))
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}
