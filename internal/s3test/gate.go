package s3test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Gate is an HTTP proxy in front of an S3 server that holds the first PUT
// of a key ending in its suffix until the test releases it: a moment in
// the middle of a Put that the test chooses, not a timing.
type Gate struct {
	Addr string        // host:port, for the client's endpoint
	Held chan struct{} // closed when the PUT arrives

	suffix   string
	open     chan struct{} // closed by Release
	taken    atomic.Bool   // the one PUT to hold has come
	opened   sync.Once
	failHeld atomic.Bool
	proxy    *httputil.ReverseProxy
}

// StartGate starts a gate in front of server (host:port) for keys ending
// in suffix; it is closed when the test ends.
func StartGate(t testing.TB, server, suffix string) *Gate {
	g := &Gate{Held: make(chan struct{}), open: make(chan struct{}), suffix: suffix,
		proxy: httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: server})}
	g.proxy.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
		http.Error(w, err.Error(), http.StatusBadGateway) // the server is down
	}
	transport := &http.Transport{}
	g.proxy.Transport = transport
	srv := httptest.NewServer(g)
	t.Cleanup(transport.CloseIdleConnections)
	t.Cleanup(srv.Close)
	t.Cleanup(g.Release) // first: Close waits for the held request
	g.Addr = srv.Listener.Addr().String()
	return g
}

// FailHeld has the held PUT, once released, answered 400 Bad Request (an
// error no client retries) instead of passed on.
func (g *Gate) FailHeld() { g.failHeld.Store(true) }

func (g *Gate) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method == http.MethodPut && strings.HasSuffix(req.URL.Path, g.suffix) {
		// Only the first is held; later ones pass at once (a sync.Once
		// would make them wait for the first).
		held := g.taken.CompareAndSwap(false, true)
		if held {
			close(g.Held)
			<-g.open
		}
		if held && g.failHeld.Load() {
			http.Error(w, "refused by the test's gate", http.StatusBadRequest)
			return
		}
	}
	g.proxy.ServeHTTP(w, req) // the signed Host header is passed on as it came
}

// Release lets the held PUT go on (or fail, after FailHeld).
func (g *Gate) Release() { g.opened.Do(func() { close(g.open) }) }
