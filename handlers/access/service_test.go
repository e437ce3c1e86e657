package access_test

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/internal/storagetest"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
)

// A profile whose one storage target is ingestq's storage service is
// served from it: every version, one version and some files, in each
// format, byte for byte.
func TestPackagesFromAStorageService(t *testing.T) {
	t.Parallel()
	s := storagetest.Start(t, nil)
	r := newRig(t, rigConfig{storage: []string{s.URL}})
	checkPackages(t, r, "/access/")
}

// With an OCFL root among its targets, a profile is read from the root,
// even after a service listed before it (decision 521): the service's
// damaged copy is never read.
func TestAccessReadsAnOCFLRootBeforeAService(t *testing.T) {
	t.Parallel()
	s := storagetest.Start(t, nil)
	r := newRig(t, rigConfig{storage: []string{s.URL, filepath.Join(t.TempDir(), "ocfl")}})
	ark := r.deposit("obj-1", v1Files)
	a := producer(r.stored(ark)[0], "a.txt")
	if err := os.WriteFile(s.File(ark, 1, a), []byte("ALPHA\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	v, _ := r.request(ops.AccessRequest{ARK: ark})
	if v.State != queue.Completed {
		t.Fatalf("request: %s %q, want Completed from the OCFL root", v.State, v.Message)
	}
	got, _ := r.fetch(v.Token.URL, queue.FormatZip)
	if top := packageTop(ark); got[top+"/v1/"+a] != sum(v1Files["a.txt"]) {
		t.Errorf("package holds %v, want %s with the deposited bytes", got, a)
	}
}

// A service that answers a file with other bytes (at the same size) fails
// the request at once, naming the file: no package, no retry.
func TestALyingStorageServiceFailsTheRequest(t *testing.T) {
	t.Parallel()
	s := storagetest.Start(t, nil)
	r := newRig(t, rigConfig{storage: []string{s.URL}})
	ark := r.deposit("obj-1", v1Files)
	a := producer(r.stored(ark)[0], "a.txt")
	if err := os.WriteFile(s.File(ark, 1, a), []byte("ALPHA\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{queue.FormatZip, queue.FormatTarGz} {
		before := r.sourced.Load()
		v, _ := r.request(ops.AccessRequest{ARK: ark, Format: format})
		want := fmt.Sprintf("stored file %q of %s version 1 reads as 6 bytes with sha256 %s; recorded: 6 bytes with sha256 %s",
			a, ark, sum([]byte("ALPHA\n")), sum(v1Files["a.txt"]))
		if v.State != queue.Failed || !strings.Contains(v.Message, want) || v.Token.TokenStatus != queue.TokenFailed || v.Token.Package != nil {
			t.Errorf("%s: %s %q, token %+v; want Failed saying %q, no package", format, v.State, v.Message, v.Token, want)
		}
		if tries := r.sourced.Load() - before; tries != 1 {
			t.Errorf("%s: %d tries, want 1: no retry reads other bytes", format, tries)
		}
	}
}

// A service that answers versions=all with the latest version alone (one
// older than ingestq's) serves that version and its files; a request for
// every version or an older one fails at once, naming the service and
// why. One that has no content call either fails the latest's files at
// once, naming the file and the service.
func TestALatestOnlyStorageService(t *testing.T) {
	t.Parallel()
	latestOnly := func(content bool) func(http.Handler) http.Handler {
		return func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				switch {
				case strings.HasPrefix(req.URL.Path, "/objects/"):
					req.URL.RawQuery = "" // as a service that knows no versions=all
				case strings.HasPrefix(req.URL.Path, "/content/") && !content:
					http.NotFound(w, req) // as a service that knows no content call
					return
				}
				h.ServeHTTP(w, req)
			})
		}
	}
	t.Run("with content", func(t *testing.T) {
		t.Parallel()
		s := storagetest.Start(t, latestOnly(true))
		r := newRig(t, rigConfig{storage: []string{s.URL}})
		ark := r.deposit("obj-1", v1Files)
		r.deposit("obj-1", v2Files)
		latest := r.stored(ark)[0] // the latest alone: version 2's files
		d := producer(latest, "d.txt")
		top := packageTop(ark)
		version2 := map[string]string{}
		for name, sum := range latest {
			version2[top+"_v2/"+name] = sum
		}
		if version2[top+"_v2/"+d] != sum(v2Files["d.txt"]) || len(version2) != 8 {
			t.Fatalf("the service gives %v as the latest version, want version 2's 4 files and 4 system files", latest)
		}
		for _, c := range []struct {
			req  ops.AccessRequest
			want map[string]string // nil: Failed
		}{
			{ops.AccessRequest{ARK: ark, Version: 2}, version2},
			{ops.AccessRequest{ARK: ark, Files: []string{d}, Format: queue.FormatTarGz}, map[string]string{top + "/" + d: sum(v2Files["d.txt"])}},
			{ops.AccessRequest{ARK: ark}, nil},
			{ops.AccessRequest{ARK: ark, Version: 1, Format: queue.FormatTarGz}, nil},
		} {
			before := r.sourced.Load()
			v, _ := r.request(c.req)
			if tries := r.sourced.Load() - before; tries != 1 {
				t.Errorf("%+v: %d tries, want 1", c.req, tries)
			}
			if c.want == nil {
				asked := "every version"
				if c.req.Version > 0 {
					asked = fmt.Sprintf("version %d", c.req.Version)
				}
				want := fmt.Sprintf("object %s: %s asked, and only its latest, version 2, can be read: storage: versions of %s from %s/objects/%s?versions=all: "+
					"the storage service serves only each object's latest version: it answered version 2 alone", ark, asked, ark, s.URL, strings.ReplaceAll(ark, "/", "%2F"))
				if v.State != queue.Failed || !strings.Contains(v.Message, want) || v.Token.TokenStatus != queue.TokenFailed {
					t.Errorf("%+v: %s %q, want Failed saying %q", c.req, v.State, v.Message, want)
				}
				continue
			}
			if v.State != queue.Completed {
				t.Errorf("%+v: %s %q, want Completed", c.req, v.State, v.Message)
				continue
			}
			if got, _ := r.fetch(v.Token.URL, v.Token.Format); !maps.Equal(got, c.want) {
				t.Errorf("%+v: package holds %v, want %v", c.req, got, c.want)
			}
		}
	})
	t.Run("without content", func(t *testing.T) {
		t.Parallel()
		s := storagetest.Start(t, latestOnly(false))
		r := newRig(t, rigConfig{storage: []string{s.URL}})
		ark := r.deposit("obj-1", v1Files)
		a := producer(r.stored(ark)[0], "a.txt")
		before := r.sourced.Load()
		v, _ := r.request(ops.AccessRequest{ARK: ark, Files: []string{a}})
		want := fmt.Sprintf(`open stored file %q of version 1: storage: file %q of version 1 of %s from %s/content/`, a, a, ark, s.URL)
		if v.State != queue.Failed || !strings.Contains(v.Message, want) ||
			!strings.Contains(v.Message, s.URL+" serves each object's latest version alone, and may be older than") {
			t.Errorf("%s %q, want Failed saying %q and why", v.State, v.Message, want)
		}
		if tries := r.sourced.Load() - before; tries != 1 {
			t.Errorf("%d tries, want 1", tries)
		}
	})
}

// A service that cuts the connection mid-file, or stalls there, is asked
// again by the access queue's retry: once, and the package is made; every
// time, and the request fails after its tries, naming the file. (A stall
// is found by the back end's idle limit, the rig's 5 s.)
func TestAStorageServiceCutMidFile(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		faults int64
		stall  bool
	}{{"cut once", 1, false}, {"cut always", 1 << 30, false}, {"stalled once", 1, true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var faults atomic.Int64
			s := storagetest.Start(t, func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
					if !strings.HasSuffix(req.URL.Query().Get("file"), "/c.bin") || faults.Add(1) > c.faults {
						h.ServeHTTP(w, req)
						return
					}
					w.Header().Set("Content-Length", "5")
					_, _ = w.Write([]byte{0, 1})
					w.(http.Flusher).Flush()
					if c.stall {
						<-req.Context().Done() // the client gave up
						return
					}
					panic(http.ErrAbortHandler) // the connection is closed two bytes in
				})
			})
			r := newRig(t, rigConfig{storage: []string{s.URL}})
			ark := r.deposit("obj-1", v1Files)
			cbin := producer(r.stored(ark)[0], "c.bin")
			before := r.sourced.Load()
			v, _ := r.request(ops.AccessRequest{ARK: ark, Files: []string{cbin}})
			if tries := r.sourced.Load() - before; tries != 2 {
				t.Errorf("%d tries, want 2 (the rig's attempts)", tries)
			}
			if c.faults == 1 {
				top := packageTop(ark)
				if v.State != queue.Completed {
					t.Fatalf("%s %q, want Completed at the second try", v.State, v.Message)
				}
				if got, _ := r.fetch(v.Token.URL, queue.FormatZip); got[top+"/"+cbin] != sum(v1Files["c.bin"]) || len(got) != 1 {
					t.Errorf("package holds %v, want %s whole", got, cbin)
				}
				return
			}
			want := fmt.Sprintf("copy stored file %q of version 1: ", cbin)
			if v.State != queue.Failed || !strings.Contains(v.Message, want) || !strings.Contains(v.Message, "unexpected EOF") {
				t.Errorf("%s %q, want Failed saying %q … unexpected EOF", v.State, v.Message, want)
			}
		})
	}
}

// A service that lacks the object does not end a request that a later
// service, out of reach for now, may serve: the try fails as one that
// could not read, and the next try is served by the later service once it
// answers. Before, the first service's not-found ended the request at its
// first try: "object … is not in storage".
func TestAServiceLackingTheObjectDoesNotHideOneOutOfReach(t *testing.T) {
	t.Parallel()
	lacking := storagetest.Start(t, nil)
	var down atomic.Bool
	later := storagetest.Start(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if down.Load() {
				http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, req)
		})
	})
	var tries atomic.Int64
	r := newRig(t, rigConfig{storage: []string{lacking.URL, later.URL}, source: func(src storage.Reader) storage.Reader {
		if down.Load() && tries.Add(1) == 2 {
			down.Store(false) // the later service answers again at the second try
		}
		return src
	}})
	ark := r.deposit("obj-1", v1Files)
	a := producer(r.stored(ark)[0], "a.txt")
	// The first service no longer has the object (a replica added since).
	if err := os.RemoveAll(filepath.Dir(filepath.Dir(lacking.File(ark, 1, a)))); err != nil {
		t.Fatal(err)
	}
	down.Store(true)
	v, _ := r.request(ops.AccessRequest{ARK: ark, Files: []string{a}})
	if v.State != queue.Completed || tries.Load() != 2 {
		t.Fatalf("request: %s %q after %d tries, want Completed at the second, from the later service", v.State, v.Message, tries.Load())
	}
	top := packageTop(ark)
	if got, _ := r.fetch(v.Token.URL, queue.FormatZip); got[top+"/"+a] != sum(v1Files["a.txt"]) || len(got) != 1 {
		t.Errorf("package holds %v, want %s as deposited", got, a)
	}
}
