package s3test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// Busy is an HTTP proxy in front of an S3 server that answers every
// request 503 SlowDown while it is set, as a loaded or failing S3 service
// does, or only those of some keys (SetFor), and passes requests on
// otherwise. Answer changes the answer (429, another code, a Retry-After).
type Busy struct {
	Addr   string                 // host:port, for the client's endpoint
	keys   atomic.Pointer[string] // what a busy request's path holds ("" any); nil: none is
	answer atomic.Pointer[BusyAnswer]
	proxy  *httputil.ReverseProxy
}

// BusyAnswer is what a busy request is answered.
type BusyAnswer struct {
	Status     int    // HTTP status
	Code       string // S3 error code
	RetryAfter string // the Retry-After header; "" none
}

// Answer has busy requests answered a (by default 503 SlowDown, no
// Retry-After).
func (b *Busy) Answer(a BusyAnswer) { b.answer.Store(&a) }

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
func (b *Busy) Set(on bool) {
	if on {
		b.SetFor("")
	} else {
		b.keys.Store(nil)
	}
}

// SetFor has the requests whose path holds part answered 503, as an S3
// service does for an object it cannot serve (a lost erasure set's), and
// the others passed on.
func (b *Busy) SetFor(part string) { b.keys.Store(&part) }

func (b *Busy) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if part := b.keys.Load(); part == nil || !strings.Contains(req.URL.Path, *part) {
		b.proxy.ServeHTTP(w, req)
		return
	}
	a := BusyAnswer{Status: http.StatusServiceUnavailable, Code: "SlowDown"}
	if set := b.answer.Load(); set != nil {
		a = *set
	}
	w.Header().Set("Content-Type", "application/xml")
	if a.RetryAfter != "" {
		w.Header().Set("Retry-After", a.RetryAfter)
	}
	w.WriteHeader(a.Status)
	if req.Method != http.MethodHead {
		_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>` + a.Code + `</Code><Message>Please reduce your request rate.</Message></Error>`))
	}
}
