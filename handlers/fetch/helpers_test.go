package fetch

import (
	"bytes"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"hash"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const etag = `"v1"`

// payload is n reproducible bytes that differ from seed to seed.
func payload(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed)})
	r.Read(b)
	return b
}

func digestOf(t *testing.T, alg string, b []byte) string {
	t.Helper()
	var h hash.Hash
	switch alg {
	case "md5":
		h = md5.New()
	case "sha1":
		h = sha1.New()
	case "sha256", "":
		h = sha256.New()
	case "sha512":
		h = sha512.New()
	default:
		t.Fatalf("no hasher for %q", alg)
	}
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// origin is a test server for one file. Request n (from 0) goes to step,
// which may answer it itself and return true; otherwise the file is served
// with http.ServeContent, which honours Range and If-Range.
type origin struct {
	*httptest.Server
	data []byte

	mu   sync.Mutex
	reqs []http.Header // with "Method" added
}

func newOrigin(t *testing.T, data []byte, step func(n int, w http.ResponseWriter, r *http.Request) bool) *origin {
	o := &origin{data: data}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Clone()
		h.Set("Method", r.Method)
		o.mu.Lock()
		n := len(o.reqs)
		o.reqs = append(o.reqs, h)
		o.mu.Unlock()
		if step != nil && step(n, w, r) {
			return
		}
		serve(w, r, data)
	}))
	t.Cleanup(o.Close)
	return o
}

func (o *origin) requests() []http.Header {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]http.Header(nil), o.reqs...)
}

func (o *origin) file() string { return o.URL + "/file.bin" }

func serve(w http.ResponseWriter, r *http.Request, data []byte) {
	w.Header().Set("ETag", etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
}

// cut answers with the headers of the whole file and its first n bytes,
// then closes the connection.
func cut(t *testing.T, w http.ResponseWriter, data []byte, n int) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return
	}
	defer conn.Close()
	fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nETag: %s\r\n\r\n", len(data), etag)
	buf.Write(data[:n])
	buf.Flush()
}

// stallAfter sends the headers of the whole file and its first n bytes, then
// nothing until the client goes away or done is closed.
func stallAfter(w http.ResponseWriter, r *http.Request, data []byte, n int, done <-chan struct{}) {
	w.Header().Set("ETag", etag)
	w.Header().Set("Content-Length", fmt.Sprint(len(data)))
	w.Write(data[:n])
	http.NewResponseController(w).Flush()
	select {
	case <-r.Context().Done():
	case <-done:
	}
}

// testClient retries fast and reaches the test servers (loopback); Timeout
// stays long unless a test is about stalls.
func testClient(cfg Config) *Client {
	if cfg.Allow == nil {
		cfg.Allow = Loopback
	}
	if cfg.MinWait == 0 {
		cfg.MinWait = time.Millisecond
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = 5 * time.Millisecond
	}
	return New(cfg)
}

// counter sums progress deltas.
type counter struct{ n atomic.Int64 }

func (c *counter) add(d int64) { c.n.Add(d) }

func dest(t *testing.T) string { return filepath.Join(t.TempDir(), "out.bin") }

// wantFile checks that path holds data and that no .part is left beside it.
func wantFile(t *testing.T, path string, data []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading result: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("%s: %d bytes differ from the %d served", path, len(got), len(data))
	}
	if _, err := os.Stat(path + ".part"); !os.IsNotExist(err) {
		t.Fatalf("%s.part still there (stat: %v)", path, err)
	}
}

func wantNoFile(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("%s exists (stat: %v)", path, err)
	}
}
