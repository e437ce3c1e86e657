package access_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/access"
	"github.com/ingestq/ingestq/handlers/fetch"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/internal/queuetest"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(zktest.WithShared(m)) }

// rig is one test's queue, bus, ingest daemon working the access queues,
// and the HTTP server of its packages folder.
type rig struct {
	t    testing.TB
	root string
	data string
	bus  *events.Bus
	q    *queue.Queue
	log  *slog.Logger
	p    *handlers.Pipeline
	as   *access.Assembler
	ops  *ops.Service
	web  *httptest.Server
	mux  *http.ServeMux

	mu     sync.Mutex
	heard  map[string]chan events.Event // batch or access request id → its events
	files  map[string][]byte            // what the content server serves, by path
	source func(storage.Reader) storage.Reader
	// sourced counts the assembler's asks for an object's storage: one
	// for each try of a request.
	sourced atomic.Int64
}

type rigConfig struct {
	storage   []string       // storage targets; default the OCFL root in the data folder
	to        string         // where packages go; default the folder
	workers   map[string]int // access workers per queue
	threshold int64          // of the large queue
	source    func(storage.Reader) storage.Reader
	profiles  []*profile.Profile               // beside the default one, "demo"
	now       func() time.Time                 // the assembler's clock (expiry)
	sweep     time.Duration                    // between sweeps; default the reactor's
	free      func(dir string) (uint64, error) // the room left in the packages folder; default the disk's
}

func newRig(t testing.TB, c rigConfig) *rig {
	t.Helper()
	log := slog.New(slog.NewTextHandler(logtest.NewT(t), &slog.HandlerOptions{Level: slog.LevelInfo}))
	bus, err := events.Open(context.Background(), events.Config{DataDir: t.TempDir(), Host: "test", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bus.Close() })
	r := &rig{t: t, root: zktest.Root(t), data: t.TempDir(), bus: bus, log: log, mux: http.NewServeMux(),
		heard: map[string]chan events.Event{}, files: map[string][]byte{}, source: c.source}
	r.web = httptest.NewServer(r.mux)
	t.Cleanup(r.web.Close)
	r.mux.HandleFunc("GET /content/", r.serveContent)
	r.q = r.queue(r.session())
	if _, err := bus.Subscribe("ingestq.>", r.hear); err != nil {
		t.Fatal(err)
	}
	r.start(c)
	r.ops = &ops.Service{Q: r.q, Publish: bus.Publish, Inventory: r.p.Inventory(), AccessThreshold: c.threshold}
	return r
}

func (r *rig) session() *zkwatch.Session { return queuetest.Session(r.t, r.log) }

func (r *rig) queue(s *zkwatch.Session) *queue.Queue {
	return queuetest.Queue(r.t, s, r.root, r.log)
}

// start runs the ingest pipeline and the access queues in a reactor
// until the test ends.
func (r *rig) start(c rigConfig) {
	s := r.session()
	q := r.queue(s)
	set, err := profile.NewSet(append([]*profile.Profile{profile.Default()}, c.profiles...)...)
	if err != nil {
		r.t.Fatal(err)
	}
	// MaxFill 1: only the margin holds a job back, so the tests pass on a disk
	// past the default 80 % (as CI's was).
	p, err := handlers.New(r.t.Context(), handlers.Config{Queue: q, Bus: r.bus, Profiles: set, DataDir: r.data, Logger: r.log, Storage: c.storage,
		MaxFill: 1, Fetch: fetch.Config{Attempts: 2, MinWait: time.Millisecond, MaxWait: 5 * time.Millisecond, Timeout: 5 * time.Second,
			Allow: fetch.Loopback}}) // the test's content server
	if err != nil {
		r.t.Fatal(err)
	}
	r.p = p
	source := func(ctx context.Context, profile string) (storage.Reader, error) {
		r.sourced.Add(1)
		src, err := p.ReaderFor(ctx, profile)
		if err != nil || r.source == nil {
			return src, err
		}
		return r.source(src), nil
	}
	r.as, err = access.New(r.t.Context(), access.Config{Queue: q, Source: source, Dir: filepath.Join(r.data, "access"), To: c.to,
		Advertise: r.web.URL, Host: "test", Now: c.now, FreeSpace: c.free, Logger: r.log})
	if err != nil {
		r.t.Fatal(err)
	}
	r.mux.Handle("GET "+access.Prefix, r.as.Handler())
	d, err := reactor.New(reactor.Config{Queue: q, Session: s, Bus: r.bus, Host: "test", Backoff: 5 * time.Millisecond,
		Attempts: 2, Grace: 5 * time.Second, Logger: r.log, Jobs: p.Handlers(), Batches: p, Reporter: p,
		Access: r.as, AccessWorkers: c.workers, AccessSweep: c.sweep})
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	r.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			r.t.Errorf("reactor: %v", err)
		}
		_ = p.Close()
	})
}

func (r *rig) serveContent(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	data, ok := r.files[req.URL.Path]
	r.mu.Unlock()
	if !ok {
		http.NotFound(w, req)
		return
	}
	http.ServeContent(w, req, req.URL.Path, time.Time{}, bytes.NewReader(data))
}

// hear files every batch and access event by its id.
func (r *rig) hear(e events.Event) {
	id := e.BatchID
	if e.Kind == events.KindAccess {
		id = e.AccessID
	} else if e.Kind != events.KindBatch {
		return
	}
	select {
	case r.events(id) <- e:
	default:
	}
}

func (r *rig) events(id string) chan events.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch, ok := r.heard[id]
	if !ok {
		ch = make(chan events.Event, 64)
		r.heard[id] = ch
	}
	return ch
}

// waitFor waits for the event of id (a batch or an access request)
// reaching one of the states.
func (r *rig) waitFor(id string, states ...queue.State) events.Event {
	r.t.Helper()
	timeout := time.After(3 * time.Minute) // only a bug waits this long
	for {
		select {
		case e := <-r.events(id):
			for _, s := range states {
				if e.To == string(s) {
					return e
				}
			}
		case <-timeout:
			r.t.Fatalf("%s did not reach %v in 3 min", id, states)
		}
	}
}

// deposit ingests files (name → bytes) as a zip, an update of local id
// when it names an object already stored, and returns the object's ARK.
func (r *rig) deposit(localID string, files map[string][]byte) string {
	r.t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for name, data := range files {
		w, err := zw.Create(name)
		if err == nil {
			_, err = w.Write(data)
		}
		if err != nil {
			r.t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		r.t.Fatal(err)
	}
	path := "/content/" + localID + "-" + sum(b.Bytes())[:8] + ".zip"
	r.mu.Lock()
	r.files[path] = b.Bytes()
	r.mu.Unlock()
	batch, err := r.q.CreateBatch(r.t.Context(), queue.SubmissionOf(map[string]any{"profile_name": "demo", "submitter": "test",
		"payload_url": r.web.URL + path, "type": "container", "submission_mode": "add", "local_id": localID}))
	if err != nil {
		r.t.Fatal(err)
	}
	if e := r.waitFor(batch.ID, queue.Completed, queue.Failed); e.To != string(queue.Completed) {
		r.t.Fatalf("deposit of %s: batch %s %s: %s", localID, batch.ID, e.To, e.Message)
	}
	ark, ok, err := r.p.Inventory().LookupLocalID(r.t.Context(), "demo", localID)
	if err != nil || !ok {
		r.t.Fatalf("local id %s: %v %v", localID, ok, err)
	}
	return ark
}

// request queues an access request and waits for its end.
func (r *rig) request(req ops.AccessRequest) (ops.AccessView, events.Event) {
	r.t.Helper()
	v, err := r.ops.RequestAccess(r.t.Context(), req)
	if err != nil {
		r.t.Fatalf("request %+v: %v", req, err)
	}
	e := r.waitFor(v.Ref, queue.Completed, queue.Failed)
	v, err = r.ops.ShowAccess(r.t.Context(), v.Ref)
	if err != nil {
		r.t.Fatal(err)
	}
	return v, e
}

// stored is what storage holds of ark: each version's files, name →
// sha256.
func (r *rig) stored(ark string) []map[string]string {
	r.t.Helper()
	src, err := r.p.ReaderFor(r.t.Context(), "demo")
	if err != nil {
		r.t.Fatal(err)
	}
	o, err := src.Read(r.t.Context(), ark)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []map[string]string
	for _, v := range o.Versions() {
		m := map[string]string{}
		for _, f := range v.Files {
			m[f.Name] = f.SHA256
		}
		out = append(out, m)
	}
	return out
}

// getText fetches url and returns its status and body.
func getText(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// get is getText's status alone.
func get(t *testing.T, url string) int {
	t.Helper()
	code, _ := getText(t, url)
	return code
}

// fetch downloads a package from its URL (the folder's server, or a
// presigned S3 URL: no credentials either way) and returns its entries,
// name → sha256, and its own sha256.
func (r *rig) fetch(url, format string) (map[string]string, string) {
	r.t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		r.t.Fatalf("GET %s: %s", url, resp.Status)
	}
	f, err := os.CreateTemp(r.t.TempDir(), "package-*")
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		r.t.Fatal(err)
	}
	entries, err := readPackage(f, format)
	if err != nil {
		r.t.Fatalf("package %s: %v", url, err)
	}
	whole, err := fileSum(f.Name())
	if err != nil {
		r.t.Fatal(err)
	}
	return entries, whole
}

// readPackage lists a package's entries with the sha256 of each.
func readPackage(f *os.File, format string) (map[string]string, error) {
	out := map[string]string{}
	add := func(name string, rd io.Reader) error {
		h := sha256.New()
		if _, err := io.Copy(h, rd); err != nil {
			return err
		}
		out[name] = hex.EncodeToString(h.Sum(nil))
		return nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	if format == queue.FormatZip {
		st, err := f.Stat()
		if err != nil {
			return nil, err
		}
		zr, err := zip.NewReader(f, st.Size())
		if err != nil {
			return nil, err
		}
		for _, zf := range zr.File {
			rd, err := zf.Open()
			if err == nil {
				err = add(zf.Name, rd)
				rd.Close()
			}
			if err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if err := add(h.Name, tr); err != nil {
			return nil, err
		}
	}
}

func fileSum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
