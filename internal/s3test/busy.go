package s3test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
)

// Busy is an HTTP proxy in front of an S3 server that answers every
// request 503 SlowDown while it is set, as a loaded or failing S3 service
// does, and passes requests on otherwise.
type Busy struct {
	Addr  string // host:port, for the client's endpoint
	on    atomic.Bool
	proxy *httputil.ReverseProxy
}

// StartBusy starts a Busy proxy in front of server (host:port), not set;
// it is closed when the test ends.
func StartBusy(t testing.TB, server string) *Busy {
	b := &Busy{proxy: httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: server})}
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	b.Addr = srv.Listener.Addr().String()
	return b
}

// Set has every request answered 503 (on) or passed on (off).
func (b *Busy) Set(on bool) { b.on.Store(on) }

func (b *Busy) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if !b.on.Load() {
		b.proxy.ServeHTTP(w, req)
		return
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusServiceUnavailable)
	if req.Method != http.MethodHead {
		_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`))
	}
}
