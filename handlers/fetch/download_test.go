package fetch

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestDownloadEachAlgorithm(t *testing.T) {
	data := payload(300_000, 1)
	for _, alg := range []string{"md5", "sha1", "sha256", "sha512", ""} {
		t.Run("alg="+alg, func(t *testing.T) {
			o := newOrigin(t, data, nil)
			path := dest(t)
			var progress counter
			want := Want{Alg: alg, Size: int64(len(data))}
			if alg != "" {
				want.Digest = digestOf(t, alg, data)
			}
			res, err := testClient(Config{}).Download(context.Background(), o.file(), path, want, progress.add)
			if err != nil {
				t.Fatal(err)
			}
			wantAlg := alg
			if alg == "" {
				wantAlg = "sha256"
			}
			// The SHA-256 comes from the same pass, whatever was wanted.
			if res.Alg != wantAlg || res.Digest != digestOf(t, wantAlg, data) || res.SHA256 != digestOf(t, "sha256", data) ||
				res.Bytes != int64(len(data)) || res.Resumed {
				t.Fatalf("result %+v", res)
			}
			wantFile(t, path, data)
			if progress.n.Load() != int64(len(data)) {
				t.Fatalf("progress added up to %d, want %d", progress.n.Load(), len(data))
			}
			reqs := o.requests()
			if len(reqs) != 1 || reqs[0].Get("Accept-Encoding") != "identity" || reqs[0].Get("Range") != "" {
				t.Fatalf("requests %v", reqs)
			}
		})
	}
}

func TestDownloadUnknownSizeAndEmptyFile(t *testing.T) {
	for _, n := range []int{0, 5000} {
		data := payload(n, 2)
		o := newOrigin(t, data, nil)
		path := dest(t)
		res, err := testClient(Config{}).Download(context.Background(), o.file(), path, Want{Size: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Bytes != int64(n) || res.Digest != digestOf(t, "sha256", data) {
			t.Fatalf("result %+v", res)
		}
		wantFile(t, path, data)
	}
}

func TestDownloadDigestMismatch(t *testing.T) {
	data := payload(100_000, 3)
	o := newOrigin(t, data, nil)
	path := dest(t)
	want := Want{Alg: "sha256", Digest: digestOf(t, "sha256", payload(100_000, 4)), Size: int64(len(data))}
	_, err := testClient(Config{}).Download(context.Background(), o.file(), path, want, nil)
	var m *MismatchError
	if !errors.As(err, &m) || m.What != "sha256" || m.Got != digestOf(t, "sha256", data) {
		t.Fatalf("err = %v, want a sha256 MismatchError", err)
	}
	if !Permanent(err) || !strings.Contains(err.Error(), o.file()) {
		t.Fatalf("err = %v: want permanent and naming %s", err, o.file())
	}
	wantNoFile(t, path)
	wantNoFile(t, path+".part")
	if n := len(o.requests()); n != 1 {
		t.Fatalf("%d requests, want 1: a mismatch is not retried", n)
	}
}

func TestDownloadSizeMismatch(t *testing.T) {
	data := payload(50_000, 5)
	endless := func(n int, w http.ResponseWriter, r *http.Request) bool {
		// Chunked, no length: only the client can stop it.
		for {
			if _, err := w.Write(data); err != nil {
				return true
			}
			if r.Context().Err() != nil {
				return true
			}
		}
	}
	chunked := func(n int, w http.ResponseWriter, r *http.Request) bool {
		w.Write(data[:len(data)/2])
		http.NewResponseController(w).Flush()
		w.Write(data[len(data)/2:])
		return true
	}
	lying := func(n int, w http.ResponseWriter, r *http.Request) bool {
		// A Content-Length 500 bytes past what it sends, the size the
		// manifest gives: nothing of the announced size was received.
		w.Header().Set("Content-Length", strconv.Itoa(len(data)+500))
		w.Write(data)
		return true
	}
	cases := []struct {
		name string
		step func(int, http.ResponseWriter, *http.Request) bool
		size int64
		got  string
	}{
		{"a Content-Length that lies", lying, 50_000, "50500 by its Content-Length"},
		{"longer, announced", nil, 40_000, "50000 by its Content-Length"},
		{"longer, endless", endless, 40_000, "more than 40000"},
		{"shorter, announced", nil, 60_000, "50000 by its Content-Length"},
		{"shorter, chunked", chunked, 60_000, "50000"},
		{"longer, chunked", chunked, 49_999, "more than 49999"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := newOrigin(t, data, tc.step)
			path := dest(t)
			_, err := testClient(Config{}).Download(context.Background(), o.file(), path, Want{Size: tc.size}, nil)
			var m *MismatchError
			if !errors.As(err, &m) || m.What != "size" || m.Want != strconv.FormatInt(tc.size, 10) || m.Got != tc.got {
				t.Fatalf("err = %v (%+v), want a size mismatch, got %s", err, m, tc.got)
			}
			if !Permanent(err) || !strings.Contains(err.Error(), o.file()) {
				t.Fatalf("err = %v: want permanent and naming the URL", err)
			}
			wantNoFile(t, path)
			wantNoFile(t, path+".part")
		})
	}
}

func TestDownloadRetries5xx(t *testing.T) {
	data := payload(20_000, 6)
	o := newOrigin(t, data, func(n int, w http.ResponseWriter, r *http.Request) bool {
		if n < 2 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return true
		}
		return false
	})
	path := dest(t)
	want := Want{Alg: "md5", Digest: digestOf(t, "md5", data), Size: int64(len(data))}
	if _, err := testClient(Config{}).Download(context.Background(), o.file(), path, want, nil); err != nil {
		t.Fatal(err)
	}
	wantFile(t, path, data)
	if n := len(o.requests()); n != 3 {
		t.Fatalf("%d requests, want 3", n)
	}
}

func TestDownloadGivesUpOn5xx(t *testing.T) {
	o := newOrigin(t, nil, func(n int, w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return true
	})
	_, err := testClient(Config{Attempts: 3}).Download(context.Background(), o.file(), dest(t), Want{Size: -1}, nil)
	var s *StatusError
	if !errors.As(err, &s) || s.Code != http.StatusServiceUnavailable {
		t.Fatalf("err = %v, want a 503 StatusError", err)
	}
	if Permanent(err) {
		t.Fatalf("503 reported permanent: %v", err)
	}
	if msg := err.Error(); !strings.Contains(msg, o.file()) || !strings.Contains(msg, "(3 requests)") {
		t.Fatalf("error %q does not name the URL and the attempts", msg)
	}
	if n := len(o.requests()); n != 3 {
		t.Fatalf("%d requests, want 3", n)
	}
}

// A download answered 503 or 429 with a Retry-After, however short, ends
// at once: a busy StatusError saying when the server asked to be asked
// again, for its job to wait that long without holding a worker (handlers).
// It was asked again within the client's longest wait, sooner than asked.
func TestDownloadLeavesARetryAfterToItsJob(t *testing.T) {
	for _, code := range []int{http.StatusServiceUnavailable, http.StatusTooManyRequests} {
		o := newOrigin(t, nil, func(n int, w http.ResponseWriter, r *http.Request) bool {
			w.Header().Set("Retry-After", "2")
			http.Error(w, "busy", code)
			return true
		})
		asked := time.Now()
		_, err := testClient(Config{Attempts: 5, MaxWait: 10 * time.Second}).Download(context.Background(), o.file(), dest(t), Want{Size: -1}, nil)
		var s *StatusError
		if !errors.As(err, &s) || s.Code != code || !s.Busy() || s.RetryAt.Before(asked.Add(2*time.Second)) {
			t.Fatalf("%d: err = %v (%+v); want a busy StatusError asking to wait 2 s", code, err, s)
		}
		if n := len(o.requests()); n != 1 {
			t.Fatalf("%d: %d requests, want 1", code, n)
		}
	}
}

func TestDownload4xxIsPermanent(t *testing.T) {
	for _, code := range []int{http.StatusNotFound, http.StatusForbidden, http.StatusGone} {
		o := newOrigin(t, nil, func(n int, w http.ResponseWriter, r *http.Request) bool {
			http.Error(w, "no", code)
			return true
		})
		_, err := testClient(Config{}).Download(context.Background(), o.file(), dest(t), Want{Size: -1}, nil)
		var s *StatusError
		if !errors.As(err, &s) || s.Code != code || !Permanent(err) {
			t.Fatalf("err = %v, want a permanent %d", err, code)
		}
		if n := len(o.requests()); n != 1 {
			t.Fatalf("%d: %d requests, want 1", code, n)
		}
	}
}

func TestDownloadRetries429(t *testing.T) {
	data := payload(1000, 7)
	o := newOrigin(t, data, func(n int, w http.ResponseWriter, r *http.Request) bool {
		if n == 0 {
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return true
		}
		return false
	})
	path := dest(t)
	if _, err := testClient(Config{}).Download(context.Background(), o.file(), path, Want{Size: 1000}, nil); err != nil {
		t.Fatal(err)
	}
	wantFile(t, path, data)
}

func TestDownloadBadWant(t *testing.T) {
	o := newOrigin(t, payload(10, 8), nil)
	for _, want := range []Want{{Alg: "crc32", Size: -1}, {Digest: "abcd", Size: -1}} {
		_, err := testClient(Config{}).Download(context.Background(), o.file(), dest(t), want, nil)
		if err == nil || !Permanent(err) {
			t.Fatalf("%+v: err = %v, want permanent", want, err)
		}
	}
	if n := len(o.requests()); n != 0 {
		t.Fatalf("%d requests for bad Wants", n)
	}
}

// A download whose caller syncs the file and folder lands the same way:
// verified, renamed, no .part left.
func TestDownloadDeferSync(t *testing.T) {
	data := payload(70_000, 3)
	o := newOrigin(t, data, nil)
	path := dest(t)
	want := Want{Alg: "md5", Digest: digestOf(t, "md5", data), Size: int64(len(data)), DeferSync: true}
	res, err := testClient(Config{}).Download(context.Background(), o.file(), path, want, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Bytes != int64(len(data)) || res.Digest != want.Digest {
		t.Fatalf("result %+v", res)
	}
	wantFile(t, path, data)
}
