package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// fastClient retries twice with millisecond waits.
func fastClient() *retryablehttp.Client {
	c := retryablehttp.NewClient()
	c.RetryWaitMin = time.Millisecond
	c.RetryWaitMax = 5 * time.Millisecond
	c.RetryMax = 2
	c.Logger = nil
	return c
}

type done struct {
	JobID string `json:"job_id"`
	ARK   string `json:"ark"`
}

func TestCallbackSuccess(t *testing.T) {
	type request struct {
		method, contentType string
		body                done
	}
	got := make(chan request, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req request
		req.method, req.contentType = r.Method, r.Header.Get("Content-Type")
		if err := json.NewDecoder(r.Body).Decode(&req.body); err != nil {
			t.Errorf("server: %v", err)
		}
		got <- req
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()

	want := done{JobID: "jid-1", ARK: "ark:/99999/fk40000017"}
	if err := Callback(context.Background(), fastClient(), srv.URL+"/hook", want); err != nil {
		t.Fatal(err)
	}
	req := <-got
	if req.method != http.MethodPost || req.contentType != "application/json" || req.body != want {
		t.Errorf("server received %+v", req)
	}
}

func TestCallbackServerError(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "database is down"+strings.Repeat("!", 500), http.StatusInternalServerError)
	}))
	defer srv.Close()

	url := srv.URL + "/hook"
	err := Callback(context.Background(), fastClient(), url, done{JobID: "j"})
	var se *StatusError
	if !errors.As(err, &se) {
		t.Fatalf("error %v (%T) is not a *StatusError", err, err)
	}
	if n := hits.Load(); n != 3 {
		t.Errorf("server hit %d times, want 3 (1 + 2 retries)", n)
	}
	if se.StatusCode != 500 || se.Attempts != 3 || len(se.Body) != maxBodyShown || !strings.HasPrefix(se.Body, "database is down") {
		t.Errorf("StatusError = %+v", se)
	}
	for _, w := range []string{url, "500 Internal Server Error", "database is down", "(3 requests)"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
}

func TestCallbackClientErrorIsNotRetried(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "unknown job", http.StatusNotFound)
	}))
	defer srv.Close()

	err := Callback(context.Background(), fastClient(), srv.URL, done{})
	var se *StatusError
	if !errors.As(err, &se) || se.StatusCode != 404 || !strings.Contains(err.Error(), "unknown job") || !strings.Contains(err.Error(), srv.URL) {
		t.Fatalf("error = %v", err)
	}
	if n := hits.Load(); n != 1 || se.Attempts != 1 {
		t.Errorf("hits %d, attempts %d; a 4xx must not be retried", n, se.Attempts)
	}
}

func TestCallbackRecoversAfterRetry(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer srv.Close()
	if err := Callback(context.Background(), fastClient(), srv.URL, done{}); err != nil {
		t.Fatal(err)
	}
	if n := hits.Load(); n != 2 {
		t.Errorf("hits = %d, want 2", n)
	}
}

func TestCallbackServerClosed(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL + "/hook"
	srv.Close() // nothing listens any more: connection refused
	err := Callback(context.Background(), fastClient(), url, done{})
	want := "callback " + url + ": connection refused (3 requests)"
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q: the URL once, what happened in plain words", err, want)
	}
}

// TestCallbackConnectionCut: the server reads the request and hangs up
// without answering.
func TestCallbackConnectionCut(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		conn.Close()
	}))
	defer srv.Close()
	err := Callback(context.Background(), fastClient(), srv.URL, done{})
	if err == nil || !strings.Contains(err.Error(), srv.URL) {
		t.Errorf("error = %v", err)
	}
	if n := hits.Load(); n != 3 {
		t.Errorf("hits = %d, want 3: a cut connection is retried", n)
	}
}

func TestCallbackBadInput(t *testing.T) {
	tests := []struct {
		name    string
		client  *retryablehttp.Client
		url     string
		payload any
		want    string
	}{
		{"ftp URL", fastClient(), "ftp://example.org/x", done{}, "ftp://example.org/x"},
		{"no host", fastClient(), "http:///x", done{}, "http:///x"},
		{"unparsable", fastClient(), "http://[::1", done{}, "bad URL"},
		{"nil client", nil, "http://example.org", done{}, "no HTTP client"},
		{"payload", fastClient(), "http://example.org", func() {}, "encode payload"},
		{"password hidden", fastClient(), "ftp://user:secret@example.org", done{}, "user:xxxxx@"},
		// url.Parse's error repeats what it refuses, the password and all.
		{"unparsable, password hidden", fastClient(), "https://hook:p@secret word@cb.example.org/done", done{}, "bad URL"},
		{"control character, password hidden", fastClient(), "https://hook:secret\x01@cb.example.org/done", done{}, `hook:xxxxx@`},
		{"token in the query hidden", fastClient(), "ftp://cb.example.org/done?token=secret", done{}, "token=xxxxx"},
	}
	for _, tt := range tests {
		err := Callback(context.Background(), tt.client, tt.url, tt.payload)
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: error %v, want one mentioning %q", tt.name, err, tt.want)
		}
	}
}

func TestCallbackZeroClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "teapot", http.StatusTeapot)
	}))
	defer srv.Close()
	// A Client not made by NewClient has no retry policy or backoff.
	err := Callback(context.Background(), &retryablehttp.Client{}, srv.URL, done{})
	var se *StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusTeapot {
		t.Errorf("error = %v", err)
	}
}

// A callback refused for good (a 4xx but 408, 425 and 429; a bad URL) is
// permanent; a 5xx, a 408, 425 or 429, a refused or cut connection may pass.
func TestCallbackPermanent(t *testing.T) {
	status := func(code int) error {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", code) }))
		defer srv.Close()
		return Callback(context.Background(), fastClient(), srv.URL, done{})
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
	}))
	defer cut.Close()
	tests := []struct {
		name      string
		err       error
		permanent bool
	}{
		{"400", status(http.StatusBadRequest), true},
		{"403", status(http.StatusForbidden), true},
		{"404", status(http.StatusNotFound), true},
		{"408", status(http.StatusRequestTimeout), false},
		{"425", status(http.StatusTooEarly), false},
		{"429", status(http.StatusTooManyRequests), false},
		{"500", status(http.StatusInternalServerError), false},
		{"503", status(http.StatusServiceUnavailable), false},
		{"refused", Callback(context.Background(), fastClient(), closed.URL, done{}), false},
		{"cut", Callback(context.Background(), fastClient(), cut.URL, done{}), false},
		{"ftp URL", Callback(context.Background(), fastClient(), "ftp://example.org/x", done{}), true},
		{"wrapped 500", fmt.Errorf("step: %w", status(http.StatusInternalServerError)), false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		if tt.name != "nil" && tt.err == nil {
			t.Errorf("%s: no error", tt.name)
		}
		if got := Permanent(tt.err); got != tt.permanent {
			t.Errorf("%s: Permanent(%v) = %v, want %v", tt.name, tt.err, got, tt.permanent)
		}
	}
}
