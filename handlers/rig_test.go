package handlers_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/fetch"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/internal/queuetest"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(serviceEnv); spec != "" {
		serveService(spec) // a child of a hung-service test
	}
	goleak.VerifyTestMain(zktest.WithShared(m))
}

// rig is one test's queue, bus, content server and ingest daemon.
type rig struct {
	t       testing.TB
	root    string
	data    string
	bus     *events.Bus
	q       *queue.Queue // an operator's session
	daemonQ *queue.Queue // the daemon's: its ZooKeeper requests are counted
	qs      *zkwatch.Session
	log     *slog.Logger
	content *content
	p       *handlers.Pipeline
	prof    *profile.Profile
	zk      string // a ZooKeeper of the test's own (newRigOn); "" for the shared one
	stop    func() // stops the daemon start started last

	mu      sync.Mutex
	batches map[string]chan events.Event // bid → its batch events
	reached map[string]events.Event      // bid → the event waitBatch returned on
	jobs    map[string][]events.Event    // jid → its job events
}

type rigOption func(*handlers.Config, *reactor.Config)

func newRig(t testing.TB, prof *profile.Profile, opts ...rigOption) *rig {
	t.Helper()
	return newRigOn(t, "", prof, opts...)
}

// newRigOn is newRig on the ZooKeeper at addr ("" for the shared one).
func newRigOn(t testing.TB, addr string, prof *profile.Profile, opts ...rigOption) *rig {
	t.Helper()
	level := slog.LevelInfo
	if _, bench := t.(*testing.B); bench {
		level = slog.LevelWarn // a benchmark's output is its numbers
	}
	log := slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: level}))
	bus, err := events.Open(context.Background(), events.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Host: "test", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bus.Close() })
	if prof == nil {
		prof = profile.Default()
	}
	r := &rig{t: t, root: zktest.Root(t), data: t.TempDir(), bus: bus, log: log, content: newContent(t), prof: prof, zk: addr,
		batches: map[string]chan events.Event{}, reached: map[string]events.Event{}, jobs: map[string][]events.Event{}}
	r.qs = r.session()
	r.q = r.queue(r.qs)
	// One subscription keeps the publisher's order: a job's last event is
	// heard before its batch's report.
	if _, err := bus.Subscribe("ingestq.>", func(e events.Event) {
		switch e.Kind {
		case events.KindBatch:
			r.onBatch(e)
		case events.KindJob, events.KindProgress:
			r.onJob(e)
		}
	}); err != nil {
		t.Fatal(err)
	}
	r.start(opts...)
	return r
}

func (r *rig) session() *zkwatch.Session {
	if r.zk == "" {
		return queuetest.Session(r.t, r.log)
	}
	s, err := zkwatch.Dial(r.t.Context(), zkwatch.Config{Servers: []string{r.zk}, SessionTimeout: zktest.SessionTimeout, Logger: r.log})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(s.Close)
	return s
}

func (r *rig) queue(s *zkwatch.Session) *queue.Queue {
	return queuetest.Queue(r.t, s, r.root, r.log)
}

// start runs the ingest pipeline in a reactor until the test ends, or
// until r.stop stops it.
func (r *rig) start(opts ...rigOption) {
	s := r.session()
	q := r.queue(s)
	r.daemonQ = q
	set, err := profile.NewSet(r.prof)
	if err != nil {
		r.t.Fatal(err)
	}
	// One host name for both, as a daemon has: the pipeline records it as
	// the holder of a job's files, the reactor works the jobs it holds.
	hc := handlers.Config{Queue: q, Bus: r.bus, Profiles: set, DataDir: r.data, Logger: r.log, Host: "test",
		Fetch: fetch.Config{Attempts: 2, MinWait: time.Millisecond, MaxWait: 5 * time.Millisecond, Timeout: 5 * time.Second,
			Allow: fetch.Loopback}, // the test's content server
		// MaxFill 1: only the margin holds a job back, so the tests pass on a
		// disk past the default 80 % (as CI's was).
		MaxFill: 1, ProvisionWait: 50 * time.Millisecond}
	rc := reactor.Config{Queue: q, Session: s, Bus: r.bus, Host: "test", Backoff: 5 * time.Millisecond,
		Attempts: 2, Grace: 5 * time.Second, Logger: r.log}
	for _, o := range opts {
		o(&hc, &rc)
	}
	p, err := handlers.New(r.t.Context(), hc)
	if err != nil {
		r.t.Fatal(err)
	}
	r.p = p
	// Every object the pipeline stored must be valid OCFL to an independent
	// reader, in every target (registered first, so it runs after the
	// daemon has stopped).
	r.t.Cleanup(func() {
		if !r.t.Failed() {
			for _, target := range p.Storage() {
				validateTarget(r.t, target)
			}
		}
	})
	jobs := p.Handlers()
	for state, before := range rc.Jobs { // the options' hooks (beforeStep, failOnceAfter)
		step := jobs[state]
		if after, ok := before.(afterStep); ok {
			jobs[state] = after.around(step)
			continue
		}
		jobs[state] = reactor.JobHandlerFunc(func(ctx context.Context, s *reactor.Step) (reactor.Result, error) {
			if _, err := before.Handle(ctx, s); err != nil {
				return reactor.Result{}, err
			}
			return step.Handle(ctx, s)
		})
	}
	rc.Jobs, rc.Batches, rc.Reporter = jobs, p, p
	d, err := reactor.New(rc)
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	r.stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			r.t.Errorf("reactor: %v", err)
		}
		_ = p.Close()
	})
	r.t.Cleanup(r.stop)
}

// withStorage sets the daemon's storage targets, the primary first.
func withStorage(targets ...string) rigOption {
	return func(hc *handlers.Config, _ *reactor.Config) { hc.Storage = targets }
}

// withInventory sets the daemon's inventory URL.
func withInventory(url string) rigOption {
	return func(hc *handlers.Config, _ *reactor.Config) { hc.Inventory = url }
}

// withLogs copies the daemon's log into logs, for a test to wait on a line.
func withLogs(t testing.TB, logs *logtest.Buffer) rigOption {
	log := slog.New(slog.NewTextHandler(io.MultiWriter(logs, tWriter{t}), &slog.HandlerOptions{Level: slog.LevelInfo}))
	return func(hc *handlers.Config, rc *reactor.Config) { hc.Logger, rc.Logger = log, log }
}

// withAttempts gives every step n tries, the first retry after wait (then
// doubling): for faults that last longer than the rig's two quick tries.
func withAttempts(n int, wait time.Duration) rigOption {
	return func(_ *handlers.Config, rc *reactor.Config) { rc.Attempts, rc.Backoff = n, wait }
}

// beforeStep runs fn on each job of the state just before the pipeline's
// step does, in the daemon's worker: a test changes what the step finds.
func beforeStep(state queue.State, fn func(*queue.Job)) rigOption {
	return func(_ *handlers.Config, rc *reactor.Config) {
		if rc.Jobs == nil {
			rc.Jobs = map[queue.State]reactor.JobHandler{}
		}
		rc.Jobs[state] = reactor.JobHandlerFunc(func(_ context.Context, s *reactor.Step) (reactor.Result, error) {
			fn(s.Job)
			return reactor.Result{}, nil
		})
	}
}

// failOnceAfter makes each job's first run of each state's step end in a
// retryable error once the step has done its work, as if its daemon had
// died before the transition: the step is run again, finding its own work
// done. runs counts the runs of each job's steps.
func failOnceAfter(runs *stepRuns, states ...queue.State) rigOption {
	return func(_ *handlers.Config, rc *reactor.Config) {
		if rc.Jobs == nil {
			rc.Jobs = map[queue.State]reactor.JobHandler{}
		}
		for _, state := range states {
			rc.Jobs[state] = afterStep{state: state, runs: runs}
		}
	}
}

// stepRuns counts runs of steps by state and job.
type stepRuns struct {
	mu sync.Mutex
	n  map[string]int // "state jid" → runs
}

// add counts a run and returns how many there have been.
func (c *stepRuns) add(state queue.State, jid string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[string(state)+" "+jid]++
	return c.n[string(state)+" "+jid]
}

// of is how many runs of state's step job jid had.
func (c *stepRuns) of(state queue.State, jid string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[string(state)+" "+jid]
}

// afterStep is failOnceAfter's hook: the rig puts it around the
// pipeline's step instead of before it.
type afterStep struct {
	state queue.State
	runs  *stepRuns
}

func (a afterStep) Handle(context.Context, *reactor.Step) (reactor.Result, error) {
	return reactor.Result{}, nil // never called: the rig calls around
}

func (a afterStep) around(step reactor.JobHandler) reactor.JobHandler {
	return reactor.JobHandlerFunc(func(ctx context.Context, s *reactor.Step) (reactor.Result, error) {
		res, err := step.Handle(ctx, s)
		if err == nil && a.runs.add(a.state, s.Job.ID) == 1 {
			return reactor.Result{}, fmt.Errorf("test: %s of job %s done, then its daemon died before the transition", a.state, s.Job.ID)
		}
		return res, err
	})
}

func (r *rig) onBatch(e events.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch, ok := r.batches[e.BatchID]
	if !ok {
		ch = make(chan events.Event, 64)
		r.batches[e.BatchID] = ch
	}
	select {
	case ch <- e:
	default:
	}
}

func (r *rig) onJob(e events.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.jobs[e.JobID] = append(r.jobs[e.JobID], e)
}

// jobEvents is what the rig heard of a job, in order.
func (r *rig) jobEvents(jid string) []events.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]events.Event(nil), r.jobs[jid]...)
}

// submit creates a batch for the rig's profile.
func (r *rig) submit(payload string, extra ...string) *queue.Batch {
	r.t.Helper()
	sub := map[string]any{"profile_name": r.prof.Name, "submitter": "test", "payload_url": payload, "type": "auto", "submission_mode": "add"}
	for i := 0; i+1 < len(extra); i += 2 {
		sub[extra[i]] = extra[i+1]
	}
	b, err := r.q.CreateBatch(r.t.Context(), queue.SubmissionOf(sub))
	if err != nil {
		r.t.Fatal(err)
	}
	return b
}

// waitBatch waits for the batch's event of reaching one of the states.
func (r *rig) waitBatch(bid string, states ...queue.State) *queue.Batch {
	r.t.Helper()
	r.mu.Lock()
	ch, ok := r.batches[bid]
	if !ok {
		ch = make(chan events.Event, 64)
		r.batches[bid] = ch
	}
	r.mu.Unlock()
	timeout := time.After(5 * time.Minute) // generous: a loaded CI machine is slow, and only a bug waits this long
	for {
		select {
		case e := <-ch:
			for _, s := range states {
				if e.To == string(s) {
					var b *queue.Batch
					r.read(func() (err error) { b, err = r.q.LoadBatch(r.t.Context(), bid); return err })
					r.mu.Lock()
					r.reached[bid] = e
					r.mu.Unlock()
					return b
				}
			}
		case <-timeout:
			r.dump()
			r.t.Fatalf("batch %s did not reach %v in 5 min", bid, states)
		}
	}
}

// jobsOf loads a batch's jobs, by object key.
func (r *rig) jobsOf(bid string) map[string]*queue.Job {
	r.t.Helper()
	var buckets map[string][]string
	r.read(func() (err error) { buckets, err = r.q.BatchJobs(r.t.Context(), bid); return err })
	out := map[string]*queue.Job{}
	for _, jids := range buckets {
		for _, jid := range jids {
			var j *queue.Job
			r.read(func() (err error) { j, err = r.q.LoadJob(r.t.Context(), jid); return err })
			out[j.Config.Map()["object_key"].(string)] = j
		}
	}
	return out
}

// read runs the operator's read f, again after the session is back when
// ZooKeeper was out of reach: a loaded machine that stalls past the
// session timeout costs the daemon a reconnect, and must not fail the test
// that watches it recover.
func (r *rig) read(f func() error) {
	r.t.Helper()
	for try := 0; ; try++ {
		err := f()
		if err == nil {
			return
		}
		if try < 5 && queue.Unreachable(err) {
			ctx, cancel := context.WithTimeout(r.t.Context(), time.Minute)
			back := r.qs.WaitState(ctx, zk.StateHasSession)
			cancel()
			if back == nil {
				continue
			}
		}
		r.t.Fatal(err)
	}
}

func (r *rig) dump() {
	entries, err := r.q.Tree(r.t.Context(), "")
	if err != nil {
		r.t.Logf("tree: %v", err)
		return
	}
	for _, e := range entries {
		r.t.Logf("%s %s", e.Path, e.Value)
	}
}

// content is a web server of test files whose behaviour per path a test
// can change: gone (404), failing (503), or lying (other bytes).
type content struct {
	srv   *httptest.Server
	mu    sync.Mutex
	files map[string][]byte
	gets  map[string]int
	mode  map[string]int // http status to answer instead of the file
}

func newContent(t testing.TB) *content {
	c := &content{files: map[string][]byte{}, gets: map[string]int{}, mode: map[string]int{}}
	c.srv = httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *content) serve(w http.ResponseWriter, req *http.Request) {
	c.mu.Lock()
	data, ok := c.files[req.URL.Path]
	code := c.mode[req.URL.Path]
	if req.Method == http.MethodGet {
		c.gets[req.URL.Path]++
	}
	c.mu.Unlock()
	switch {
	case code != 0:
		http.Error(w, http.StatusText(code), code)
	case !ok:
		http.NotFound(w, req)
	default:
		http.ServeContent(w, req, req.URL.Path, time.Time{}, bytes.NewReader(data))
	}
}

// put serves data at path and returns its URL.
func (c *content) put(path string, data []byte) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.files[path] = data
	return c.srv.URL + path
}

func (c *content) setMode(path string, code int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mode[path] = code
}

func (c *content) getCount(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gets[path]
}

// row is one line of a manifest being built.
type row struct {
	url, alg, digest, name string
	size                   int64
	primary, local         string
	who, what, when        string
}

// fileRow is a manifest row for data at url, with its md5 and size.
func fileRow(url, name string, data []byte) row {
	s := md5.Sum(data)
	return row{url: url, alg: "md5", digest: hex.EncodeToString(s[:]), name: name, size: int64(len(data))}
}

// manifest writes a checkm manifest of a profile.
func manifest(prof string, rows ...row) []byte {
	var b strings.Builder
	b.WriteString("#%checkm_0.7\n#%profile | http://uc3.cdlib.org/registry/ingest/manifest/" + prof + "\n")
	b.WriteString("#%prefix | mrt: | http://merritt.cdlib.org/terms#\n#%prefix | nfo: | http://www.semanticdesktop.org/ontologies/2007/03/22/nfo#\n")
	b.WriteString("#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize | nfo:fileLastModified | nfo:fileName | mrt:primaryIdentifier | mrt:localIdentifier | mrt:creator | mrt:title | mrt:date\n")
	for _, r := range rows {
		size := ""
		if r.size >= 0 {
			size = fmt.Sprint(r.size)
		}
		fmt.Fprintf(&b, "%s | %s | %s | %s | | %s | %s | %s | %s | %s | %s\n", r.url, r.alg, r.digest, size, r.name, r.primary, r.local, r.who, r.what, r.when)
	}
	b.WriteString("#%eof\n")
	return []byte(b.String())
}

func sha256hex(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// tWriter sends log lines to t.Log.
type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// readDir lists a folder under elems joined.
func readDir(elems ...string) ([]os.DirEntry, error) { return os.ReadDir(filepath.Join(elems...)) }

// versionContent is the content version n of ark wrote in the default OCFL
// root, by file name (relative to the version's content folder), with the
// SHA-256 of each.
func (r *rig) versionContent(ark string, n int) map[string]string {
	r.t.Helper()
	out := map[string]string{}
	root := handlers.DefaultStorage(r.data)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if !strings.Contains(rel, fmt.Sprintf("/v%d/content/", n)) || !r.objectHolds(root, rel, ark) {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		out[rel[strings.Index(rel, "/content/")+len("/content/"):]] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return out
}

// objectHolds tells whether the file at rel (under root) is in ark's object:
// its object root's inventory names ark.
func (r *rig) objectHolds(root, rel, ark string) bool {
	obj := rel[:strings.Index(rel, "/v")]
	data, err := os.ReadFile(filepath.Join(root, obj, "inventory.json"))
	var inv struct {
		ID string `json:"id"`
	}
	return err == nil && json.Unmarshal(data, &inv) == nil && inv.ID == ark
}
