package fetch

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHead(t *testing.T) {
	data := payload(12_345, 20)
	noLength := func(n int, w http.ResponseWriter, r *http.Request) bool {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return true
		}
		defer conn.Close()
		buf.WriteString("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
		buf.Flush()
		return true
	}
	status := func(code int) func(int, http.ResponseWriter, *http.Request) bool {
		return func(n int, w http.ResponseWriter, r *http.Request) bool {
			w.WriteHeader(code)
			return true
		}
	}
	cases := []struct {
		name string
		step func(int, http.ResponseWriter, *http.Request) bool
		want int64
	}{
		{"length", nil, 12_345},
		{"no length", noLength, -1},
		{"405", status(http.StatusMethodNotAllowed), -1},
		{"404", status(http.StatusNotFound), -1},
		{"503", status(http.StatusServiceUnavailable), -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := newOrigin(t, data, tc.step)
			got, err := testClient(Config{Attempts: 2}).Head(context.Background(), o.file())
			if err != nil || got != tc.want {
				t.Fatalf("Head = %d, %v; want %d", got, err, tc.want)
			}
			if reqs := o.requests(); len(reqs) == 0 || reqs[0].Get("Method") != http.MethodHead {
				t.Fatalf("requests %v: want a HEAD", reqs)
			}
		})
	}
}

func TestHeadUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	got, err := testClient(Config{Attempts: 2}).Head(context.Background(), "http://"+addr+"/x")
	if err != nil || got != -1 {
		t.Fatalf("Head = %d, %v; want -1, nil", got, err)
	}
}

func TestFetch(t *testing.T) {
	doc := []byte(`{"files": ["a", "b"]}`)
	o := newOrigin(t, doc, nil)
	got, err := testClient(Config{}).Fetch(context.Background(), o.file(), 1000)
	if err != nil || string(got) != string(doc) {
		t.Fatalf("Fetch = %q, %v", got, err)
	}
}

func TestFetchRetriesCutBody(t *testing.T) {
	doc := payload(50_000, 21)
	o := newOrigin(t, doc, func(n int, w http.ResponseWriter, r *http.Request) bool {
		if n == 0 {
			cut(t, w, doc, 20_000)
			return true
		}
		return false
	})
	got, err := testClient(Config{}).Fetch(context.Background(), o.file(), 1<<20)
	if err != nil || string(got) != string(doc) {
		t.Fatalf("Fetch = %d bytes, %v", len(got), err)
	}
	if reqs := o.requests(); len(reqs) != 2 || reqs[1].Get("Range") != "" {
		t.Fatalf("requests %v: want a second, whole request", reqs)
	}
}

func TestFetchTooLarge(t *testing.T) {
	doc := payload(5000, 22)
	chunked := func(n int, w http.ResponseWriter, r *http.Request) bool {
		w.Write(doc[:10])
		http.NewResponseController(w).Flush()
		w.Write(doc[10:])
		return true
	}
	for _, step := range []func(int, http.ResponseWriter, *http.Request) bool{nil, chunked} {
		o := newOrigin(t, doc, step)
		_, err := testClient(Config{}).Fetch(context.Background(), o.file(), 4999)
		if !errors.Is(err, ErrTooLarge) || !Permanent(err) || !strings.Contains(err.Error(), o.file()) {
			t.Fatalf("err = %v, want a permanent ErrTooLarge naming the URL", err)
		}
		if n := len(o.requests()); n != 1 {
			t.Fatalf("%d requests, want 1", n)
		}
	}
}

func TestFetchStatus(t *testing.T) {
	o := newOrigin(t, nil, func(n int, w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "gone", http.StatusGone)
		return true
	})
	_, err := testClient(Config{}).Fetch(context.Background(), o.file(), 100)
	var s *StatusError
	if !errors.As(err, &s) || s.Code != http.StatusGone || !Permanent(err) {
		t.Fatalf("err = %v, want a permanent 410", err)
	}
}

func TestPeek(t *testing.T) {
	doc := payload(50_000, 7)
	o := newOrigin(t, doc, nil)
	got, err := testClient(Config{}).Peek(context.Background(), o.file(), 512)
	if err != nil || string(got) != string(doc[:512]) {
		t.Fatalf("Peek = %d bytes, %v; want the first 512", len(got), err)
	}
	if reqs := o.requests(); len(reqs) != 1 || reqs[0].Get("Range") != "bytes=0-511" {
		t.Errorf("requests %v: want one asking for bytes=0-511", reqs)
	}

	// A server that ignores Range sends it all; only the head is read.
	deaf := newOrigin(t, doc, func(_ int, w http.ResponseWriter, _ *http.Request) bool {
		_, _ = w.Write(doc)
		return true
	})
	if got, err := testClient(Config{}).Peek(context.Background(), deaf.file(), 512); err != nil || string(got) != string(doc[:512]) {
		t.Errorf("Peek past an ignored Range = %d bytes, %v", len(got), err)
	}

	short := newOrigin(t, doc[:10], nil)
	if got, err := testClient(Config{}).Peek(context.Background(), short.file(), 512); err != nil || string(got) != string(doc[:10]) {
		t.Errorf("Peek of a short document = %q, %v", got, err)
	}

	gone := newOrigin(t, doc, func(_ int, w http.ResponseWriter, r *http.Request) bool {
		http.NotFound(w, r)
		return true
	})
	if _, err := testClient(Config{}).Peek(context.Background(), gone.file(), 512); err == nil || !Permanent(err) {
		t.Errorf("Peek of a 404: %v, want a permanent error", err)
	}

	local := filepath.Join(t.TempDir(), "doc")
	if err := os.WriteFile(local, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := testClient(Config{AllowFile: true}).Peek(context.Background(), "file://"+local, 512); err != nil || string(got) != string(doc[:512]) {
		t.Errorf("Peek of a local file = %d bytes, %v", len(got), err)
	}
	if _, err := testClient(Config{}).Peek(context.Background(), "file://"+local, 512); !errors.Is(err, ErrScheme) {
		t.Errorf("Peek of a local file, not allowed: %v, want ErrScheme", err)
	}
}
