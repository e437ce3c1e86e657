package fetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/ingestq/ingestq/internal/stall"
)

func TestPermanent(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{io.ErrUnexpectedEOF, false},
		{context.DeadlineExceeded, false},
		{stall.ErrStalled, false},
		{&StatusError{Code: 400}, true},
		{&StatusError{Code: 404}, true},
		{&StatusError{Code: 408}, false},
		{&StatusError{Code: 425}, false},
		{&StatusError{Code: 429}, false},
		{&StatusError{Code: 500}, false},
		{&StatusError{Code: 503}, false},
		{fmt.Errorf("x: %w", &StatusError{Code: 410}), true},
		{&MismatchError{What: "size"}, true},
		{fmt.Errorf("wrapped: %w", ErrScheme), true},
		{&localError{os.ErrPermission}, false},
		{permanent(os.ErrNotExist), true},
	}
	for _, tc := range cases {
		if got := Permanent(tc.err); got != tc.want {
			t.Errorf("Permanent(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestBadURLs(t *testing.T) {
	c := testClient(Config{AllowFile: true})
	ctx := context.Background()
	for _, u := range []string{"ftp://example.org/f", "gopher://x/", "s3://bucket/key", "mailto:a@b"} {
		if _, err := c.Download(ctx, u, dest(t), Want{Size: -1}, nil); !errors.Is(err, ErrScheme) || !Permanent(err) {
			t.Errorf("Download(%s): err = %v, want ErrScheme", u, err)
		}
		if _, err := c.Head(ctx, u); !errors.Is(err, ErrScheme) {
			t.Errorf("Head(%s): err = %v, want ErrScheme", u, err)
		}
	}
	// The last is refused by url.Parse, whose error repeats it: the error
	// names it with its password masked.
	for _, u := range []string{"http://[::1", "http:///no-host", "https://", "%zz", "https://depositor:s3cret%zz@example.org/f"} {
		_, err := c.Download(ctx, u, dest(t), Want{Size: -1}, nil)
		if err == nil || !Permanent(err) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Download(%q): err = %v, want permanent, without the password", u, err)
		}
		if _, err := c.Fetch(ctx, u, 10); err == nil || !Permanent(err) {
			t.Errorf("Fetch(%q): err = %v, want permanent", u, err)
		}
	}
}

func TestParseContentRange(t *testing.T) {
	cases := []struct {
		in           string
		start, total int64
		ok           bool
	}{
		{"bytes 0-99/100", 0, 100, true},
		{"bytes 40-99/*", 40, -1, true},
		{"bytes */100", -1, 100, true},
		{"bytes 50-40/100", 0, 0, false},
		{"bytes 0-100/100", 0, 0, false},
		{"bytes */*", 0, 0, false},
		{"items 0-1/2", 0, 0, false},
		{"bytes -1-5/10", 0, 0, false},
		{"", 0, 0, false},
	}
	for _, tc := range cases {
		start, total, ok := parseContentRange(tc.in)
		if ok != tc.ok || (ok && (start != tc.start || total != tc.total)) {
			t.Errorf("parseContentRange(%q) = %d, %d, %v", tc.in, start, total, ok)
		}
	}
}

func TestVerify(t *testing.T) {
	data := payload(70_000, 50)
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Verify(path, Want{Alg: "sha1", Digest: digestOf(t, "sha1", data), Size: 70_000})
	if err != nil || res.Bytes != 70_000 || res.Alg != "sha1" || res.SHA256 != digestOf(t, "sha256", data) {
		t.Fatalf("Verify = %+v, %v", res, err)
	}
	var m *MismatchError
	if _, err := Verify(path, Want{Alg: "sha512", Digest: digestOf(t, "sha512", data[1:]), Size: -1}); !errors.As(err, &m) || m.What != "sha512" || m.URL != path {
		t.Fatalf("wrong digest: err = %v", err)
	}
	if _, err := Verify(path, Want{Size: 69_999}); !errors.As(err, &m) || m.What != "size" {
		t.Fatalf("wrong size: err = %v", err)
	}
	if _, err := Verify(path+"-missing", Want{Size: -1}); !errors.Is(err, os.ErrNotExist) || !Permanent(err) {
		t.Fatalf("missing file: err = %v", err)
	}
	if _, err := Verify(path, Want{Alg: "whirlpool", Size: -1}); err == nil || !Permanent(err) {
		t.Fatalf("unknown alg: err = %v", err)
	}
}

func TestBackoffStaysWithinMax(t *testing.T) {
	for _, after := range []string{"99999999999999999", "3600", "5", "-4", "soon"} {
		resp := &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{"Retry-After": {after}}}
		for attempt := range 70 {
			if d := retryBackoff(time.Millisecond, time.Second, attempt, resp); d < 0 || d > time.Second {
				t.Fatalf("Retry-After %q, attempt %d: backoff %v outside [0, 1s]", after, attempt, d)
			}
		}
	}
}

// A busy server's Retry-After (503 or 429, in seconds or as a date) is the
// least wait before the next try, up to max. The jitter took 2 s asked
// down to 1–2 s.
func TestBackoffNeverSoonerThanRetryAfter(t *testing.T) {
	date := time.Now().Add(3 * time.Second).Truncate(time.Second)
	for _, c := range []struct {
		status int
		after  string
		least  time.Duration
	}{
		{http.StatusServiceUnavailable, "2", 2 * time.Second},
		{http.StatusTooManyRequests, date.UTC().Format(http.TimeFormat), time.Until(date)},
		{http.StatusTooManyRequests, "3600", 10 * time.Second}, // up to max
	} {
		resp := &http.Response{StatusCode: c.status, Header: http.Header{"Retry-After": {c.after}}}
		for attempt := range 20 {
			// Less 50 ms: backoff reads the clock after least was computed.
			if d := retryBackoff(time.Millisecond, 10*time.Second, attempt, resp); d < c.least-50*time.Millisecond || d > 10*time.Second {
				t.Fatalf("%d Retry-After %q, attempt %d: backoff %v; want at least %v, at most 10s", c.status, c.after, attempt, d, c.least)
			}
		}
	}
}

// The back ends' client does not wait for a Retry-After longer than its
// longest wait (sooner than asked): the request ends at once, a busy
// StatusError that says when the server asked to be asked again.
// A number of seconds too large for 32 bits asks as long as any (it was read
// as no Retry-After: tried again after the back-off).
func TestBackEndClientLeavesALongRetryAfterToTheStep(t *testing.T) {
	for _, c := range []struct {
		after string
		least time.Duration
	}{
		{"30", 30 * time.Second},
		{"99999999999", 30 * time.Hour},
		{"99999999999999999999999", 30 * time.Hour},
	} {
		var hits atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			w.Header().Set("Retry-After", c.after)
			http.Error(w, "busy", http.StatusServiceUnavailable)
		}))
		t.Cleanup(srv.Close)
		client := testClient(Config{Attempts: 5, MaxWait: time.Second})
		req, err := retryablehttp.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		asked := time.Now()
		resp, err := client.BackEnd().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		var se *StatusError
		if !errors.As(err, &se) || !se.Busy() || se.RetryAt.Before(asked.Add(c.least)) {
			t.Errorf("Retry-After %s: err = %v (%+v); want a busy StatusError asking to wait %v at least", c.after, err, se, c.least)
		}
		if c.least == 30*time.Second && se != nil && se.RetryAt.After(time.Now().Add(30*time.Second)) {
			t.Errorf("Retry-After 30: asks to wait until %v; want 30 s from the answer", se.RetryAt)
		}
		if n := hits.Load(); n != 1 {
			t.Errorf("Retry-After %s: the server got %d requests; want 1", c.after, n)
		}
	}
}

// A depositor's presigned URL carries its signature in the query: an error
// and every log line name the URL with it masked, as with a password
// (url.URL.Redacted masks the password only).
func TestPresignedURLSignatureNeverShown(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/short") {
			_, _ = io.WriteString(w, "abc") // 3 bytes, 5 wanted
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	var logged bytes.Buffer
	var mu sync.Mutex
	c := testClient(Config{Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &logged, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	const query = "?X-Amz-Signature=s3cret1&sig=s3cret2"
	for _, path := range []string{"/gone.zip", "/short.zip"} {
		u := "http://depositor:s3cret3@" + strings.TrimPrefix(srv.URL, "http://") + path + query
		_, err := c.Download(t.Context(), u, dest(t), Want{Size: 5}, nil)
		if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), path) {
			t.Errorf("Download(%s): %v; want an error naming the URL with its secrets masked", path, err)
		}
		if _, err := c.Head(t.Context(), u); err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Head(%s): %v shows a secret", path, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if logged.Len() == 0 || strings.Contains(logged.String(), "s3cret") {
		t.Errorf("the log, want lines without a secret:\n%s", logged.String())
	}
}

// lockedWriter serialises a log handler's writes from the client's
// goroutines.
type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
