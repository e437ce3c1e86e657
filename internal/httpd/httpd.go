// Package httpd is the daemon's HTTP server: one listener and one mux to
// which parts of the daemon add their routes (the files a job hands to the
// next consumer, the API, the dashboard, /metrics, health and pprof). It
// is bound before those parts are built, so that they know the URL other
// hosts reach it at, and it is closed with the daemon. A client that stalls
// (a body that stops arriving, an answer not taken) is cut after a minute.
// It answers only a request whose Host it is reached by (hosts.go).
package httpd

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ingestq/ingestq/internal/redact"
	"github.com/ingestq/ingestq/internal/tlsfiles"
)

// ErrListen marks an address the server cannot listen on (errors.Is).
var ErrListen = errors.New("httpd: cannot listen")

// shutdownWait is how long Close lets requests under way finish.
const shutdownWait = 5 * time.Second

// ioTimeout is how long a request's body may take to arrive, and how long
// one write of an answer may wait for the client to take it: a client that
// stalls (a body sent a byte at a time, an answer or event stream it does
// not read) is cut off then, not held for the daemon's life. The server has
// no whole-request deadline: event streams and downloads last as long as
// the client keeps reading. A variable for the tests.
var ioTimeout = time.Minute

// Server is a running HTTP server. Handle is safe while it serves.
type Server struct {
	mux    *http.ServeMux
	srv    *http.Server
	ln     net.Listener
	listen string
	scheme string        // http, or https with TLS
	served chan struct{} // closed when Serve has returned
	log    *slog.Logger
	watch  atomic.Pointer[RequestObserver]
	// The Host check (hosts.go): the names the server always answers
	// to besides IP literals and localhost, the check in force, and
	// which refusals are logged.
	own     []string
	hosts   atomic.Pointer[hostCheck]
	refused refusalLog
}

// RequestObserver is told of each request served: the pattern of the
// route that took it ("" when none did), its status code and how long it
// took. The metrics count requests by route, not by raw path.
type RequestObserver func(pattern string, code int, took time.Duration)

// Start listens on addr (host:port; port 0 picks a free one) and serves
// the mux, which answers 404 until routes are added.
func Start(addr string, log *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w on %s: %w", ErrListen, addr, err)
	}
	return newServer(ln, addr, "http", log), nil
}

// StartTLS is Start over TLS, serving to each handshake the certificate
// in force of cert (tlsfiles.Pair.Reload renews it; connections made are
// not concerned).
func StartTLS(addr string, cert *tlsfiles.Pair, log *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w on %s: %w", ErrListen, addr, err)
	}
	cfg := &tls.Config{GetCertificate: cert.GetCertificate, MinVersion: tls.VersionTLS12}
	return newServer(tls.NewListener(ln, cfg), addr, "https", log), nil
}

func newServer(ln net.Listener, addr, scheme string, log *slog.Logger) *Server {
	s := &Server{mux: http.NewServeMux(), ln: ln, listen: addr, scheme: scheme, served: make(chan struct{}), log: log}
	hostname, _ := os.Hostname()
	s.own = ownNames(hostname, addr)
	s.AnswerTo(nil, "the server's host names")
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go func() {
		defer close(s.served)
		if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error("httpd: serving stopped", "addr", ln.Addr(), "err", err)
		}
	}()
	return s
}

// Handle adds a route (a net/http ServeMux pattern).
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// Observe has fn told of every request from now on (nil: none).
func (s *Server) Observe(fn RequestObserver) { s.watch.Store(&fn) }

// serve routes a request through the mux, with the body's and the writes'
// deadlines (ioTimeout), telling the observer of it; a request for a Host
// the server does not answer to is refused before it reaches a route
// (hosts.go). Every answer is nosniff: a browser takes none as a script or
// a style sheet unless its type says it is one, so the dashboard's CSP
// ('self') cannot be met by a depositor's file that the hand-off route
// serves as octet-stream.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	began := time.Now()
	w.Header().Set("X-Content-Type-Options", "nosniff")
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // the server keeps none from the connection's last answer
	if r.Body != http.NoBody {
		_ = rc.SetReadDeadline(began.Add(ioTimeout))
		r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
	}
	sw := &statusWriter{ResponseWriter: w, rc: rc}
	if c := s.hosts.Load(); c.answers(r.Host) {
		s.mux.ServeHTTP(sw, r) // sets r.Pattern to the route that took it
	} else {
		s.refuse(sw, r, c)
	}
	sw.takeWithin() // the buffered rest goes out now, maybe long after the handler's last write
	if fn := s.watch.Load(); fn != nil && *fn != nil {
		(*fn)(r.Pattern, cmp.Or(sw.code, http.StatusOK), time.Since(began))
	}
}

// deadlineBody lifts the body's read deadline once the whole body is
// read: the server then watches the connection for the client going away,
// and a deadline left there would end a long request's context. A body
// not read to its end keeps it, which bounds the server's discarding the
// rest.
type deadlineBody struct {
	io.ReadCloser
	rc *http.ResponseController
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// statusWriter notes the status code a handler answers with, and gives
// each write ioTimeout to be taken. It flushes (server-sent events need
// it) and unwraps (for http.ResponseController).
type statusWriter struct {
	http.ResponseWriter
	rc   *http.ResponseController
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 && code >= 200 { // 1xx are interim answers
		w.code = code
	}
	w.takeWithin()
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	w.takeWithin()
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	w.takeWithin()
	_ = w.rc.Flush()
}

// takeWithin gives what is written next ioTimeout to be taken.
func (w *statusWriter) takeWithin() { _ = w.rc.SetWriteDeadline(time.Now().Add(ioTimeout)) }

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Addr is the address the server listens on.
func (s *Server) Addr() *net.TCPAddr { return s.ln.Addr().(*net.TCPAddr) }

// DefaultAdvertise is the URL other hosts reach the server at when none is
// given (https with TLS): the host of the listen address when it names one (a loopback
// listener is reached only there), the machine's host name when it listens
// on every interface; and the port it listens on.
func (s *Server) DefaultAdvertise() string {
	host, _, _ := net.SplitHostPort(s.listen)
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host, _ = os.Hostname()
	}
	return s.scheme + "://" + net.JoinHostPort(host, strconv.Itoa(s.Addr().Port))
}

// Close stops the server, letting requests under way finish for a few
// seconds, and returns once it has stopped serving.
func (s *Server) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownWait)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		s.log.Warn("httpd: requests still under way at shutdown; closed", "err", err)
		_ = s.srv.Close()
	}
	<-s.served
}

// CheckAdvertise checks a URL given to reach the server: absolute http or
// https, no query or fragment; it is returned without a trailing slash.
func CheckAdvertise(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("%q: want an http(s) URL of a host, like http://ingest1.example.org:8080", redact.Location(raw))
	}
	return strings.TrimRight(raw, "/"), nil
}
