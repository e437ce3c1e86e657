package main_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/handlers/storage/ocfl"
	"github.com/ingestq/ingestq/handlers/storage/place"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// files is a web server of test files. One path can be made to stall: it
// sends half its bytes and then holds the connection until released.
type files struct {
	srv     *httptest.Server
	mu      sync.Mutex
	data    map[string][]byte
	gets    map[string][]string // path → the Range header of each GET
	stall   string
	stalled chan struct{} // closed when the stalling path has sent its half
	release chan struct{}
}

func newFiles(t testing.TB) *files {
	f := &files{data: map[string][]byte{}, gets: map[string][]string{}, stalled: make(chan struct{}), release: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	t.Cleanup(f.unstall)
	return f
}

func (f *files) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	data, ok := f.data[r.URL.Path]
	if r.Method == http.MethodGet {
		f.gets[r.URL.Path] = append(f.gets[r.URL.Path], r.Header.Get("Range"))
	}
	stall := r.URL.Path == f.stall && r.Method == http.MethodGet
	if stall {
		f.stall = "" // once
	}
	f.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	if !stall {
		http.ServeContent(w, r, r.URL.Path, time.Time{}, bytes.NewReader(data))
		return
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(data)))
	_, _ = w.Write(data[:len(data)/2])
	w.(http.Flusher).Flush()
	close(f.stalled)
	select {
	case <-f.release:
	case <-r.Context().Done():
	}
}

func (f *files) unstall() {
	select {
	case <-f.release:
	default:
		close(f.release)
	}
}

func (f *files) put(path string, data []byte) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.data[path] = data
	return f.srv.URL + path
}

func (f *files) ranges(path string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.gets[path]...)
}

func md5hex(b []byte) string {
	s := md5.Sum(b)
	return hex.EncodeToString(s[:])
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// objectManifest lists files (name → URL, data) as an mrt-ingest-manifest.
func objectManifest(rows map[string][2]any) []byte {
	var b strings.Builder
	b.WriteString("#%checkm_0.7\n#%profile | http://uc3.cdlib.org/registry/ingest/manifest/mrt-ingest-manifest\n")
	b.WriteString("#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize | nfo:fileLastModified | nfo:fileName\n")
	for name, r := range rows {
		data := r[1].([]byte)
		fmt.Fprintf(&b, "%s | md5 | %s | %d | | %s\n", r[0], md5hex(data), len(data), name)
	}
	b.WriteString("#%eof\n")
	return []byte(b.String())
}

// ingestRig is a queue, an external NATS and the shared data folder of
// ingest daemons that a test kills and restarts.
type ingestRig struct {
	t        testing.TB
	zk, root string
	nats     string
	data     string
	profiles string
	q        *queue.Queue
}

func newIngestRig(t testing.TB, profileYAML string) *ingestRig {
	ns := startNATS(t, -1, t.TempDir())
	r := &ingestRig{t: t, zk: zktest.Shared(t).Addr, root: zktest.Root(t), nats: ns.ClientURL(), data: t.TempDir()}
	r.q = openQueue(t, r.zk, r.root)
	if profileYAML != "" {
		r.profiles = t.TempDir()
		if err := os.WriteFile(filepath.Join(r.profiles, "demo.yml"), []byte(profileYAML), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func (r *ingestRig) daemon(host string) *daemon {
	c := daemonConfig{Host: host, ZK: r.zk, Root: r.root, NATS: r.nats, Ingest: true, DataDir: r.data,
		// A killed daemon's locks last as long as its session: keep it short.
		Extra: []string{"--downloads-per-job", "8", "--fetch-timeout", "5m", "--zk-session-timeout", "4s"}}
	if r.profiles != "" {
		c.Extra = append(c.Extra, "--profiles", r.profiles)
	}
	return startDaemon(r.t, c)
}

func (r *ingestRig) submit(url string) string {
	b, err := r.q.CreateBatch(r.t.Context(), queue.SubmissionOf(map[string]any{"profile_name": "demo", "submitter": "test", "payload_url": url, "type": "auto"}))
	if err != nil {
		r.t.Fatal(err)
	}
	return b.ID
}

// onlyJob waits for the batch's one job and returns its id.
func (r *ingestRig) onlyJob(bid string) string {
	var jid string
	poll(r.t, 30*time.Second, "the batch's job", func() (bool, string, error) {
		buckets, err := r.q.BatchJobs(r.t.Context(), bid)
		for _, jids := range buckets {
			if len(jids) > 0 {
				jid = jids[0]
			}
		}
		return jid != "", fmt.Sprint(buckets), err
	})
	return jid
}

func (r *ingestRig) assertCompleted(bid, jid string) *queue.Job {
	waitBatchDone(r.t, r.q, bid, 90*time.Second)
	j, err := r.q.LoadJob(r.t.Context(), jid)
	if err != nil || j.State() != queue.Completed {
		r.t.Fatalf("job %s: %v %v", jid, j, err)
	}
	assertCheckClean(r.t, r.q)
	return j
}

// The daemon SIGKILLed while a job downloads, and restarted at once under
// the same name: it fetches none of the files already verified again, and
// resumes the cut one with a Range request from where the killed daemon was.
func TestRestartDuringDownloading(t *testing.T) {
	t.Parallel()
	r := newIngestRig(t, "")
	web := newFiles(t)
	rows := map[string][2]any{}
	for i := range 5 {
		name := fmt.Sprintf("done-%d.bin", i)
		data := bytes.Repeat([]byte{byte('a' + i)}, 200_000)
		rows[name] = [2]any{web.put("/"+name, data), data}
	}
	slow := bytes.Repeat([]byte("slow"), 500_000)
	rows["slow.bin"] = [2]any{web.put("/slow.bin", slow), slow}
	web.stall = "/slow.bin"

	d1 := r.daemon("d1")
	bid := r.submit(web.put("/obj.checkm", objectManifest(rows)))
	jid := r.onlyJob(bid)
	select {
	case <-web.stalled:
	case <-time.After(60 * time.Second):
		t.Fatalf("slow.bin was never requested; daemon log:\n%s", tail(d1.logText(), 40))
	}
	// The stall is the last file; wait until the others are verified and
	// in place (a download lands under its name only once verified).
	producer := filepath.Join(r.data, "work", jid, "producer")
	poll(t, 30*time.Second, "the five other files verified", func() (bool, string, error) {
		n := 0
		for i := range 5 {
			if _, err := os.Stat(filepath.Join(producer, fmt.Sprintf("done-%d.bin", i))); err == nil {
				n++
			}
		}
		return n == 5, fmt.Sprintf("%d of 5", n), nil
	})
	d1.kill()
	web.unstall()

	// Restarted under the same --host at once, as systemd does: it waits for
	// the killed one's host node to go with its session, then works.
	r.daemon("d1")
	j := r.assertCompleted(bid, jid)
	for i := range 5 {
		if got := web.ranges(fmt.Sprintf("/done-%d.bin", i)); len(got) != 1 {
			t.Errorf("done-%d.bin fetched %d times, want once", i, len(got))
		}
	}
	if got := web.ranges("/slow.bin"); len(got) != 2 || !strings.HasPrefix(got[1], "bytes=") || got[1] == "bytes=0-" {
		t.Errorf("slow.bin requests with Range %q, want a second one resuming past 0", got)
	} else {
		t.Logf("slow.bin resumed with Range %q", got[1])
	}
	pl, err := place.NewLocal(handlers.DefaultStorage(r.data))
	if err != nil {
		t.Fatal(err)
	}
	st, err := ocfl.New(t.Context(), pl)
	if err != nil {
		t.Fatal(err)
	}
	v, err := st.Latest(context.Background(), j.Identifiers.PrimaryID)
	if err != nil || v.Number != 1 || len(v.Files) != 10 {
		t.Fatalf("stored %+v (%v), want version 1 with 6 files and 4 system files", v, err)
	}
}

// The daemon SIGKILLed in Processing right after it minted the object's
// identifier: the restarted daemon uses that identifier and mints nothing.
func TestRestartAfterMinting(t *testing.T) {
	t.Parallel()
	r := newIngestRig(t, "")
	web := newFiles(t)
	rows := map[string][2]any{}
	for i := range 3 {
		// Large enough that hashing them keeps Processing busy after the mint.
		data := bytes.Repeat([]byte{byte(i), 1, 2, 3, 5, 8, 13, 21}, 2<<20)
		rows[fmt.Sprintf("big-%d.bin", i)] = [2]any{web.put(fmt.Sprintf("/big-%d.bin", i), data), data}
	}
	d1 := r.daemon("d1")
	bid := r.submit(web.put("/obj.checkm", objectManifest(rows)))
	jid := r.onlyJob(bid)

	conn := connOf(r.q)
	record := r.root + "/ingestq/minted/" + jid
	for {
		ok, _, ch, err := conn.ExistsW(record)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		select {
		case <-ch:
		case <-time.After(60 * time.Second):
			t.Fatalf("no identifier minted for %s; daemon log:\n%s", jid, tail(d1.logText(), 40))
		}
	}
	d1.kill()
	minted, _, err := conn.Get(record)
	if err != nil {
		t.Fatal(err)
	}
	if j, err := r.q.LoadJob(t.Context(), jid); err == nil {
		t.Logf("killed with the job in %s, %s minted", j.State(), minted)
	}

	r.daemon("d2")
	j := r.assertCompleted(bid, jid)
	if j.Identifiers == nil || j.Identifiers.PrimaryID != string(minted) {
		t.Errorf("identifiers %+v, want the one minted before the kill, %s", j.Identifiers, minted)
	}
	counter, _, err := conn.Get(r.root + "/ingestq/minter/99999-fk4")
	if err != nil || string(counter) != "1" {
		t.Errorf("minter counter %q (%v), want 1: one identifier minted in all", counter, err)
	}
}

// The daemon SIGKILLed in Storing after the storage service stored the
// version but before it answered: the restarted daemon finds that version
// in storage (same content) and stores nothing again; one version.
func TestRestartDuringStoring(t *testing.T) {
	t.Parallel()
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	real := storage.NewServer(st, nil)
	stored, release := make(chan struct{}), make(chan struct{})
	var posts atomic.Int32
	var once sync.Once
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost {
			real.ServeHTTP(w, req)
			return
		}
		posts.Add(1)
		first := false
		once.Do(func() { first = true })
		if !first {
			real.ServeHTTP(w, req)
			return
		}
		real.ServeHTTP(httptest.NewRecorder(), req) // stored, but the answer never leaves
		close(stored)
		select {
		case <-release:
		case <-req.Context().Done():
		}
	}))
	t.Cleanup(svc.Close)
	t.Cleanup(func() { close(release) })

	r := newIngestRig(t, "name: demo\nnaan: \"99999\"\nshoulder: fk4\nstorage: "+svc.URL+"\n")
	web := newFiles(t)
	data := []byte("stored once\n")
	d1 := r.daemon("d1")
	bid := r.submit(web.put("/obj.checkm", objectManifest(map[string][2]any{"a.txt": {web.put("/a.txt", data), data}})))
	jid := r.onlyJob(bid)
	select {
	case <-stored:
	case <-time.After(60 * time.Second):
		t.Fatalf("nothing stored; daemon log:\n%s", tail(d1.logText(), 40))
	}
	d1.kill()

	r.daemon("d2")
	j := r.assertCompleted(bid, jid)
	v, err := st.Latest(context.Background(), j.Identifiers.PrimaryID)
	if err != nil || v.Number != 1 {
		t.Fatalf("latest stored version %d (%v), want 1", v.Number, err)
	}
	if n := posts.Load(); n != 1 {
		t.Errorf("%d storage requests, want 1: the restarted daemon finds the version stored by the cut one", n)
	}
}
