package httpd_test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ingestq/ingestq/internal/httpd"
	"github.com/ingestq/ingestq/internal/tlsfiles"
	"github.com/ingestq/ingestq/internal/tlstest"
)

// ioTimeout is the body's and the writes' deadline in these tests.
const ioTimeout = 500 * time.Millisecond

func TestMain(m *testing.M) {
	httpd.SetIOTimeout(ioTimeout)
	goleak.VerifyTestMain(m)
}

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
	for _, bad := range []string{"ingest1:8080", "ftp://ingest1", "http://", "http://h/?x=1", "http://u:s3cret@h/", "http://h/#x"} {
		named := strings.Replace(bad, ":s3cret@", ":xxxxx@", 1) // its password masked
		if _, err := httpd.CheckAdvertise(bad); err == nil || !strings.Contains(err.Error(), strconv.Quote(named)) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("CheckAdvertise(%q): %v, want an error naming it as %q", bad, err, named)
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

// Every answer is nosniff, whatever its handler set: a browser runs none
// as a script unless its type says it is one (the dashboard's CSP takes
// scripts from the whole origin).
func TestEveryAnswerIsNosniff(t *testing.T) {
	t.Parallel()
	s := start(t, "127.0.0.1:0")
	s.Handle("GET /file", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = io.WriteString(w, "window.x = 1;")
	}))
	s.Handle("GET /json", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
	}))
	for _, path := range []string{"/file", "/json", "/nothing/here"} {
		resp, err := http.Get(s.DefaultAdvertise() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("GET %s (%d): X-Content-Type-Options %q, want nosniff", path, resp.StatusCode, got)
		}
	}
}

// With a certificate and key the server speaks TLS only, and advertises an
// https URL; a client that trusts the certificate gets the routes.
func TestServesTLS(t *testing.T) {
	t.Parallel()
	certFile, keyFile, pool := tlstest.SelfSigned(t)
	cert, err := tlsfiles.Load(certFile, keyFile, tlsfiles.ServerUsage)
	if err != nil {
		t.Fatal(err)
	}
	s, err := httpd.StartTLS("127.0.0.1:0", cert, slog.New(slog.DiscardHandler))
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
}

// A client that sends a request's body a byte at a time, or not at all, is
// cut off once the body has not arrived within the deadline: the handler's
// read fails, and the client is told. Before, the read waited for the
// client's whole life.
func TestStalledBodyIsCutOff(t *testing.T) {
	t.Parallel()
	s := start(t, "127.0.0.1:0")
	readErr := make(chan error, 1)
	s.Handle("POST /in", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		readErr <- err
		if err != nil {
			http.Error(w, "the body did not arrive", http.StatusRequestTimeout)
		}
	}))
	conn := dial(t, s)
	if _, err := io.WriteString(conn, "POST /in HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\none byte of 100"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-readErr:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("reading a stalled body: %v, want the deadline exceeded", err)
		}
	case <-time.After(20 * ioTimeout):
		t.Fatal("a stalled body was still being read long after the deadline")
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("the stalled client got %d, want 408", resp.StatusCode)
	}
}

// A client that does not read a big answer (or an event stream) makes the
// handler's write fail once nothing was taken within the deadline, so the
// handler ends and lets go of what it holds. Before, the write waited for
// the client's whole life.
func TestUnreadAnswerIsCutOff(t *testing.T) {
	t.Parallel()
	s := start(t, "127.0.0.1:0")
	writeErr := make(chan error, 1)
	s.Handle("GET /big", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 1<<20)
		for {
			if _, err := w.Write(chunk); err != nil {
				writeErr <- err
				return
			}
		}
	}))
	conn := dial(t, s)
	if _, err := io.WriteString(conn, "GET /big HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	select { // the client reads nothing
	case err := <-writeErr:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("writing to a client that reads nothing: %v, want the deadline exceeded", err)
		}
	case <-time.After(20 * ioTimeout):
		t.Fatal("a write to a client that reads nothing still waited long after the deadline")
	}
}

// A handler that writes, then works past the write deadline before it
// returns: what it wrote, still buffered, goes out when it returns, and
// the client gets the whole answer. Before, the deadline set at the write
// had passed by then, and the answer was cut.
func TestAnswerBufferedPastTheDeadlineGoesOut(t *testing.T) {
	t.Parallel()
	s := start(t, "127.0.0.1:0")
	s.Handle("GET /late", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "the whole answer") // buffered: not flushed
		<-time.After(2 * ioTimeout)                  // the work after the last write outlasts its deadline
	}))
	resp, err := http.Get(s.DefaultAdvertise() + "/late")
	if err != nil {
		t.Fatalf("an answer buffered past the write deadline: %v, want it whole", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || string(body) != "the whole answer" {
		t.Errorf("an answer buffered past the write deadline: %d %q %v, want 200 and the whole answer", resp.StatusCode, body, err)
	}
}

// The body's deadline does not bound the request: one whose body has
// arrived runs, its context alive, past the deadline; an event stream
// written to slowly stays open; and the next request on the connection is
// answered.
func TestDeadlinesDoNotBoundRequests(t *testing.T) {
	t.Parallel()
	s := start(t, "127.0.0.1:0")
	s.Handle("POST /long", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		select {
		case <-r.Context().Done():
			http.Error(w, "cancelled", http.StatusInternalServerError)
		case <-time.After(3 * ioTimeout): // the work outlasts the body's deadline
			_, _ = w.Write(body)
		}
	}))
	s.Handle("GET /stream", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tick := time.NewTicker(ioTimeout / 2) // each write is taken in time
		defer tick.Stop()
		for i := range 6 {
			if _, err := io.WriteString(w, strconv.Itoa(i)); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			<-tick.C
		}
	}))
	s.Handle("GET /empty", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}} // one connection for all three
	defer client.CloseIdleConnections()
	resp, err := client.Post(s.DefaultAdvertise()+"/long", "text/plain", strings.NewReader("done"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "done" {
		t.Errorf("a request outlasting the body's deadline: %d %q, want 200 done", resp.StatusCode, body)
	}
	if resp, err = client.Get(s.DefaultAdvertise() + "/stream"); err != nil {
		t.Fatal(err)
	}
	body, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(body) != "012345" {
		t.Errorf("a stream outlasting the write deadline: %q %v, want 012345", body, err)
	}
	resp, err = client.Get(s.DefaultAdvertise() + "/empty") // after the last write's deadline passed
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("the next request on the connection: %d, want 204", resp.StatusCode)
	}
}

// dial opens a connection to s that the test writes and reads by hand.
func dial(t *testing.T, s *httpd.Server) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
