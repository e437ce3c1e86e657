package handlers_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/internal/childproc"
	"github.com/ingestq/ingestq/internal/freeport"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// serviceEnv makes this test binary a storage or inventory service (the
// project's servers): "storage|inventory ADDR PATH [upload|answer]". With
// upload, the process freezes itself (SIGSTOP) once, 1 MiB into the first
// POST's body; with answer, once, in the middle of the first POST's answer
// (whose rest it never sends).
const serviceEnv = "INGESTQ_TEST_SERVICE"

// serveService runs the service serviceEnv names until the process ends.
func serveService(spec string) {
	var kind, addr, path, stop string
	fmt.Sscan(spec, &kind, &addr, &path, &stop)
	var h http.Handler
	var err error
	switch kind {
	case "storage":
		var st *storage.Local
		if st, err = storage.NewLocal(path); err == nil {
			h = storage.NewServer(st, nil)
		}
	case "inventory":
		var inv *inventory.Local
		if inv, err = inventory.OpenLocal(path); err == nil {
			h = inventory.NewServer(inv, nil)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	freeze := sync.OnceFunc(func() { _ = syscall.Kill(os.Getpid(), syscall.SIGSTOP) })
	var posted atomic.Bool
	next := h
	h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first := r.Method == http.MethodPost && !posted.Swap(true)
		switch {
		case stop == "upload" && first:
			r.Body = &freezingBody{ReadCloser: r.Body, left: 1 << 20, freeze: freeze}
		case stop == "answer" && first:
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			body := rec.Body.Bytes()
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
			w.WriteHeader(rec.Code)
			_, _ = w.Write(body[:len(body)/2])
			w.(http.Flusher).Flush()
			freeze()
			// The rest is never sent: SIGSTOP to itself stops the process
			// a moment late, in which a write could slip out.
			<-r.Context().Done()
			return
		}
		next.ServeHTTP(w, r)
	})
	fmt.Fprintln(os.Stderr, http.ListenAndServe(addr, h))
	os.Exit(1)
}

// freezingBody calls freeze once left bytes have been read.
type freezingBody struct {
	io.ReadCloser
	left   int
	freeze func()
}

func (b *freezingBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		b.freeze()
		return b.ReadCloser.Read(p)
	}
	n, err := b.ReadCloser.Read(p[:min(len(p), b.left)])
	b.left -= n
	return n, err
}

// startService starts this test binary as a storage or inventory service
// (serviceEnv) on a free port, and has the test's end stop it.
func startService(t *testing.T, kind, stop string) (string, *childproc.Proc) {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "data")
	if kind == "inventory" {
		path += ".db"
	}
	p := &childproc.Proc{Name: kind + " service " + addr, LogPath: filepath.Join(dir, "service.log")}
	t.Cleanup(func() { _ = p.Kill() })
	url := "http://" + addr
	if err := p.StartSelf(serviceEnv+"="+strings.Join([]string{kind, addr, path, stop}, " "), url+"/objects/none"); err != nil {
		t.Fatal(err)
	}
	return url, p
}

// withFetchTimeout sets the HTTP client's timeout (--fetch-timeout).
func withFetchTimeout(d time.Duration) rigOption {
	return func(hc *handlers.Config, _ *reactor.Config) { hc.Fetch.Timeout = d }
}

// A storage service that hangs is a back end out, as a hung S3 store is:
// frozen before it answers, frozen 1 MiB into a 16 MiB upload (it stops
// reading the body), or frozen in the middle of its answer's body. Storing
// waits for it, its attempts unspent (3 waits with 2 attempts), its message
// naming the service; ingestq_backend_out says so; thawed, the job
// completes.
func TestHungHTTPStorageWaitsForIt(t *testing.T) {
	for _, stop := range []string{"before", "upload", "answer"} {
		t.Run(stop, func(t *testing.T) {
			t.Parallel()
			url, proc := startService(t, "storage", stop)
			obs := watchBackEnds(t)
			opts := []rigOption{withStorage(url), withAttempts(2, 10*time.Millisecond), withFetchTimeout(time.Second), obs.option()}
			if stop == "before" {
				freeze := freezer(t, proc.Freeze)
				opts = append(opts, beforeStep(queue.Storing, func(*queue.Job) { freeze() }))
			}
			r := newRig(t, nil, opts...)
			files := object{"a.txt": []byte("alpha\n"), "big.bin": bytes.Repeat([]byte("0123456789abcdef"), 1<<20)}
			b := r.submitObject("/obj.checkm", files)
			obs.storingWaits(t, r, b.ID, url, "stalled: no byte moved for 1s")
			completesThawed(t, r, b.ID, proc.Thaw)
			r.checkStored(r.jobsOf(b.ID)["manifest"], files)
		})
	}
}

// An inventory service frozen as the job reaches Recording: Recording
// waits for it, its attempts unspent; thawed, the job completes.
func TestHungHTTPInventoryWaitsForIt(t *testing.T) {
	t.Parallel()
	url, proc := startService(t, "inventory", "")
	obs := waitsSeen{states: make(chan queue.State, 100), stored: freezer(t, proc.Freeze)}
	r := newRig(t, nil, withInventory(url), withAttempts(2, 10*time.Millisecond), withFetchTimeout(time.Second),
		func(_ *handlers.Config, rc *reactor.Config) { rc.Observer = obs })
	b := r.submitObject("/obj.checkm", object{"a.txt": []byte("alpha\n")})
	obs.waited(t, queue.Recording, 3, "the inventory service")
	checkWaiting(t, r.jobsOf(b.ID)["manifest"], queue.Recording, "the inventory is unavailable", "stalled: no byte moved for 1s")
	completesThawed(t, r, b.ID, proc.Thaw)
}
