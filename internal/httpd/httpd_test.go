package httpd_test

import (
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ingestq/ingestq/internal/httpd"
	"github.com/ingestq/ingestq/internal/tlstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func start(t *testing.T, addr string) *httpd.Server {
	t.Helper()
	s, err := httpd.Start(addr, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Routes added while the server runs answer; the rest is 404; the default
// advertised URL of a loopback listener is that address and the port it got.
func TestServesRoutesAddedLater(t *testing.T) {
	t.Parallel()
	s := start(t, "127.0.0.1:0")
	base := s.DefaultAdvertise()
	if want := "http://127.0.0.1:" + strconv.Itoa(s.Addr().Port); base != want {
		t.Errorf("DefaultAdvertise %q, want %q", base, want)
	}
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := get("/hello"); code != http.StatusNotFound {
		t.Errorf("before the route: %d, want 404", code)
	}
	s.Handle("GET /hello", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hi") }))
	if code, body := get("/hello"); code != http.StatusOK || body != "hi" {
		t.Errorf("after the route: %d %q, want 200 hi", code, body)
	}
}

// A listener on every interface is advertised by the machine's host name.
func TestAdvertisesHostNameOnEveryInterface(t *testing.T) {
	t.Parallel()
	s := start(t, ":0")
	host, _ := os.Hostname()
	if want := "http://" + host + ":" + strconv.Itoa(s.Addr().Port); s.DefaultAdvertise() != want {
		t.Errorf("DefaultAdvertise %q, want %q", s.DefaultAdvertise(), want)
	}
}

func TestAddressInUse(t *testing.T) {
	t.Parallel()
	s := start(t, "127.0.0.1:0")
	addr := s.Addr().String()
	_, err := httpd.Start(addr, slog.New(slog.DiscardHandler))
	if !errors.Is(err, httpd.ErrListen) || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("a second server on %s: %v, want ErrListen naming the address", addr, err)
	}
}

func TestCheckAdvertise(t *testing.T) {
	t.Parallel()
	if got, err := httpd.CheckAdvertise("https://ingest1.example.org:8443/"); err != nil || got != "https://ingest1.example.org:8443" {
		t.Errorf("CheckAdvertise: %q %v", got, err)
	}
	for _, bad := range []string{"ingest1:8080", "ftp://ingest1", "http://", "http://h/?x=1", "http://u:p@h/", "http://h/#x"} {
		if _, err := httpd.CheckAdvertise(bad); err == nil || !strings.Contains(err.Error(), strconv.Quote(bad)) {
			t.Errorf("CheckAdvertise(%q): %v, want an error naming it", bad, err)
		}
	}
}

// The observer is told of each request by the pattern of the route that
// took it (not the raw path), with its status code; a request no route
// takes has no pattern. A handler can still flush through it.
func TestObserve(t *testing.T) {
	t.Parallel()
	s := start(t, "127.0.0.1:0")
	type seen struct {
		pattern string
		code    int
	}
	got := make(chan seen, 10)
	s.Observe(func(pattern string, code int, _ time.Duration) { got <- seen{pattern, code} })
	s.Handle("GET /items/{id}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") == "gone" {
			http.Error(w, "gone", http.StatusGone)
			return
		}
		_, _ = io.WriteString(w, "item ")
		w.(http.Flusher).Flush()
		_, _ = io.WriteString(w, r.PathValue("id"))
	}))
	for _, c := range []struct {
		path string
		want seen
		body string
	}{
		{"/items/42", seen{"GET /items/{id}", 200}, "item 42"},
		{"/items/gone", seen{"GET /items/{id}", 410}, "gone\n"},
		{"/nothing/here", seen{"", 404}, "404 page not found\n"},
	} {
		resp, err := http.Get(s.DefaultAdvertise() + c.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if o := <-got; o != c.want || string(body) != c.body {
			t.Errorf("GET %s: observed %+v, body %q; want %+v, %q", c.path, o, body, c.want, c.body)
		}
	}
}

// With a certificate and key the server speaks TLS only, and advertises an
// https URL; a client that trusts the certificate gets the routes.
func TestServesTLS(t *testing.T) {
	t.Parallel()
	certFile, keyFile, pool := tlstest.SelfSigned(t)
	s, err := httpd.StartTLS("127.0.0.1:0", certFile, keyFile, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	s.Handle("GET /hello", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hi") }))
	base := s.DefaultAdvertise()
	if !strings.HasPrefix(base, "https://127.0.0.1:") {
		t.Fatalf("DefaultAdvertise %q, want https://127.0.0.1:PORT", base)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get(base + "/hello")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "hi" {
		t.Fatalf("over TLS: %d %q", resp.StatusCode, body)
	}
	// Plain HTTP gets no answer from a route.
	plain, err := http.Get("http://" + s.Addr().String() + "/hello")
	if err == nil {
		plain.Body.Close()
		if plain.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP was served")
		}
	}
	// Files that are not a certificate and its key: an error naming them.
	if _, err := httpd.StartTLS("127.0.0.1:0", keyFile, certFile, slog.New(slog.DiscardHandler)); err == nil ||
		!strings.Contains(err.Error(), keyFile) || !strings.Contains(err.Error(), certFile) {
		t.Fatalf("swapped certificate and key: %v, want an error naming both files", err)
	}
}
