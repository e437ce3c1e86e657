package place

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/internal/s3test"
	"github.com/minio/minio-go/v7"
)

// testTimeout bounds each call to the store: only a bug waits this long.
const testTimeout = time.Minute

// openS3 opens a place under the prefix "root" of srv's bucket, reached at
// endpoint (srv.Addr or a proxy), with extra URL parameters.
func openS3(t *testing.T, srv *s3test.Server, endpoint, params string) *S3 {
	t.Helper()
	srv.SetEnv(t)
	s, err := NewS3(ctxT(t), srv.URL(endpoint, "root")+params)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ctxT is a context for one step of t.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// content is n random bytes and their hex SHA-256.
func content(t *testing.T, n int) ([]byte, string) {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return b, hex.EncodeToString(sum[:])
}

func put(t *testing.T, p Place, key string, b []byte, sum string) {
	t.Helper()
	if err := p.Put(ctxT(t), key, bytes.NewReader(b), int64(len(b)), sum); err != nil {
		t.Fatal(err)
	}
}

// mustRead reads key and compares it with want.
func mustRead(t *testing.T, p Place, key string, want []byte) {
	t.Helper()
	r, err := p.Open(ctxT(t), key)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: read %d bytes that differ from the %d put", key, len(got), len(want))
	}
}

// mustBeAbsent checks that key is not in p, and that srv holds no
// unfinished multipart upload.
func mustBeAbsent(t *testing.T, p Place, srv *s3test.Server, key string) {
	t.Helper()
	if _, err := p.Stat(ctxT(t), key); !errors.Is(err, ErrNotExist) {
		t.Fatalf("stat %s after a failed put: got %v, want ErrNotExist", key, err)
	}
	c, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	core := minio.Core{Client: c}
	res, err := core.ListMultipartUploads(ctxT(t), srv.Bucket, "", "", "", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Uploads) != 0 {
		t.Fatalf("unfinished multipart uploads left: %+v", res.Uploads)
	}
}

func TestS3RoundTrip(t *testing.T) {
	srv := s3test.Start(t)
	s := openS3(t, srv, srv.Addr, "")
	files := map[string][]byte{}
	for _, key := range []string{"z.txt", "a/c.txt", "a/b.txt", "ab/d.txt"} {
		b, sum := content(t, 1000+len(key))
		put(t, s, key, b, sum)
		files[key] = b
	}
	for key, b := range files {
		mustRead(t, s, key, b)
		if n, err := s.Stat(ctxT(t), key); err != nil || n != int64(len(b)) {
			t.Fatalf("stat %s: %d, %v; want %d", key, n, err, len(b))
		}
	}
	for prefix, want := range map[string][]string{
		"":   {"a/b.txt", "a/c.txt", "ab/d.txt", "z.txt"},
		"a/": {"a/b.txt", "a/c.txt"},
		"a":  {"a/b.txt", "a/c.txt"},
		"b/": nil,
	} {
		got, err := s.List(ctxT(t), prefix)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("list %q: %q, %v; want %q", prefix, got, err, want)
		}
	}
	if got := firstKeys(t, s, "a/", 1); !slices.Equal(got, []string{"a/b.txt"}) {
		t.Fatalf("the first of Keys(a/) = %q", got)
	}
	if err := s.Delete(ctxT(t), "a/b.txt"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctxT(t), "a/b.txt"); err != nil {
		t.Fatalf("delete of a missing key: %v", err)
	}
	if _, err := s.Open(ctxT(t), "a/b.txt"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("open of a deleted key: %v, want ErrNotExist", err)
	}
	if _, err := s.Stat(ctxT(t), "a/b.txt"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("stat of a deleted key: %v, want ErrNotExist", err)
	}
}

func TestS3MultipartVerifiedOnRead(t *testing.T) {
	srv := s3test.Start(t)
	s := openS3(t, srv, srv.Addr, "&partsize=5MiB")
	b, sum := content(t, 3*minPartSize+1234)
	put(t, s, "big/file.bin", b, sum)
	mustRead(t, s, "big/file.bin", b)
	c, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.StatObject(ctxT(t), srv.Bucket, "root/big/file.bin", minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(info.ETag, "-4") {
		t.Fatalf("ETag %q: want a multipart upload of 4 parts (-4)", info.ETag)
	}
}

// A wrong digest, a short input and a long input are each refused, on both
// paths (one PUT, multipart), with nothing left at the key.
func TestS3PutMismatchLeavesNothing(t *testing.T) {
	srv := s3test.Start(t)
	s := openS3(t, srv, srv.Addr, "&partsize=5MiB")
	for name, n := range map[string]int{"single": 5000, "multipart": 2*minPartSize + 10} {
		b, sum := content(t, n)
		_, other := content(t, 1)
		for how, try := range map[string]func(key string) error{
			"wrong digest": func(key string) error {
				return s.Put(ctxT(t), key, bytes.NewReader(b), int64(n), other)
			},
			"input shorter than size": func(key string) error {
				return s.Put(ctxT(t), key, bytes.NewReader(b[:n-1]), int64(n), sum)
			},
			"input longer than size": func(key string) error {
				return s.Put(ctxT(t), key, io.MultiReader(bytes.NewReader(b), strings.NewReader("x")), int64(n), sum)
			},
		} {
			key := name + "/" + strings.ReplaceAll(how, " ", "-")
			err := try(key)
			t.Logf("%s, %s: %v", name, how, err)
			if !errors.Is(err, ErrDigest) {
				t.Fatalf("%s, %s: got %v, want ErrDigest", name, how, err)
			}
			if !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "expected") {
				t.Errorf("%s, %s: error does not name the key and what was expected: %v", name, how, err)
			}
			mustBeAbsent(t, s, srv, key)
		}
	}
}

func TestS3HostileKeysRefused(t *testing.T) {
	srv := s3test.Start(t)
	s := openS3(t, srv, srv.Addr, "")
	b, sum := content(t, 10)
	for _, key := range []string{"", "/etc/passwd", "../x", "a/../../x", "a//b", "a/./b", "a/", `a\b`, "a\x00b"} {
		if err := s.Put(ctxT(t), key, bytes.NewReader(b), 10, sum); err == nil || errors.Is(err, ErrDigest) {
			t.Errorf("put %q: got %v, want a refusal of the key", key, err)
		}
		if _, err := s.Stat(ctxT(t), key); err == nil || errors.Is(err, ErrNotExist) {
			t.Errorf("stat %q: got %v, want a refusal of the key", key, err)
		}
		if err := s.Delete(ctxT(t), key); err == nil {
			t.Errorf("delete %q: no error", key)
		}
	}
	if _, err := s.List(ctxT(t), "../"); err == nil {
		t.Error("list ../: no error")
	}
	c, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	for obj := range c.ListObjectsIter(ctxT(t), srv.Bucket, minio.ListObjectsOptions{Recursive: true}) {
		t.Errorf("bucket holds %q (err %v) after refused puts", obj.Key, obj.Err)
	}
}

func TestNewS3WithoutCredentials(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	_, err := NewS3(t.Context(), "s3://bucket/p?endpoint=127.0.0.1:1&secure=false")
	if err == nil || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") || !strings.Contains(err.Error(), "AWS_SECRET_ACCESS_KEY") {
		t.Fatalf("got %v, want an error naming AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", err)
	}
}

// An endpoint without TLS, named without secure=false, is refused saying
// which setting of the URL fixes it. Before, the error was Go's alone
// ("http: server gave HTTP response to HTTPS client"), and the README
// named no secure parameter: an operator's walk-through stopped there.
func TestS3PlainHTTPEndpointNamesSecureFalse(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	url := strings.TrimSuffix(srv.URL(srv.Addr, "root"), "&secure=false")
	_, err := NewS3(ctxT(t), url)
	if err == nil || !strings.Contains(err.Error(), "add &secure=false to the URL") || !strings.Contains(err.Error(), srv.Addr) {
		t.Fatalf("NewS3(%s) = %v; want an error naming %s and &secure=false", url, err, srv.Addr)
	}
}

// A Put while the server is down returns within its deadline; once the
// server is back, the same Put succeeds.
func TestS3PutServerStopped(t *testing.T) {
	srv := s3test.Start(t)
	s := openS3(t, srv, srv.Addr, "")
	b, sum := content(t, 4096)
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	err := s.Put(ctx, "k", bytes.NewReader(b), int64(len(b)), sum)
	t.Logf("put with the server stopped: %v", err)
	if err == nil {
		t.Fatal("put with the server stopped: no error")
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	put(t, s, "k", b, sum)
	mustRead(t, s, "k", b)
}

// A server that hangs (SIGSTOP: connections stay open, nothing answers)
// fails each call as a timeout (a net.Error, which the pipeline takes for
// the store out of reach) within its tries of idletimeout, not minio-go's
// ten tries of a minute; once it runs again, the same place works.
func TestS3FrozenServerTimesOut(t *testing.T) {
	srv, s, b, sum := idlePlace(t, 4096)
	if err := srv.Freeze(); err != nil { // the test's end stops it frozen or not
		t.Fatal(err)
	}
	for name, call := range map[string]func(context.Context) error{
		"stat": func(ctx context.Context) error { _, err := s.Stat(ctx, "k"); return err },
		"put":  func(ctx context.Context) error { return s.Put(ctx, "k2", bytes.NewReader(b), int64(len(b)), sum) },
	} {
		start := time.Now()
		err := call(ctxT(t))
		took := time.Since(start)
		t.Logf("%s with the server frozen, after %v: %v", name, took, err)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("%s with the server frozen: %v; want a timeout", name, err)
		}
		if took > (s3Tries+2)*idle {
			t.Errorf("%s with the server frozen failed after %v; want within %d tries of %v and their pauses", name, took, s3Tries, idle)
		}
	}
	if err := srv.Thaw(); err != nil {
		t.Fatal(err)
	}
	put(t, s, "k2", b, sum)
	mustRead(t, s, "k2", b)
}

// idle is the idletimeout of idlePlace's place.
const idle = time.Second

// idlePlace opens a place with idletimeout idle on a server of its own,
// holding key "k": n random bytes b, of SHA-256 sum.
func idlePlace(t *testing.T, n int) (srv *s3test.Server, s *S3, b []byte, sum string) {
	srv = s3test.Start(t)
	s = openS3(t, srv, srv.Addr, "&idletimeout="+idle.String())
	b, sum = content(t, n)
	put(t, s, "k", b, sum)
	return srv, s, b, sum
}

// A read that keeps moving bytes is never cut, however long it takes in
// all: the timeout is of inactivity, not of the request.
func TestS3SlowReadIsNotCut(t *testing.T) {
	_, s, b, _ := idlePlace(t, 1<<20)
	body, err := s.Open(ctxT(t), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	start := time.Now()
	tick := time.NewTicker(idle / 4) // a slow reader's pace, below idle between reads
	defer tick.Stop()
	var got []byte
	chunk := make([]byte, 64<<10)
	for {
		<-tick.C
		n, err := io.ReadFull(body, chunk)
		got = append(got, chunk[:n]...)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			t.Fatalf("after %v and %d bytes: %v", time.Since(start), len(got), err)
		}
	}
	if took := time.Since(start); !bytes.Equal(got, b) || took < 2*idle {
		t.Fatalf("read %d bytes of %d in %v; want all of them, over more than twice idletimeout (%v)", len(got), len(b), took, idle)
	}
}

// A byte flipped between the client and the server is caught by the
// store's check of the checksum sent, on both paths.
func TestS3UploadCorruptedInFlight(t *testing.T) {
	srv := s3test.Start(t)
	proxy := s3test.StartProxy(t, srv.Addr)
	p := openS3(t, srv, proxy.Addr(), "&partsize=5MiB")
	for i, n := range []int{64 << 10, 2*minPartSize + 10} {
		b, _ := content(t, n)
		b[n/2] = 0 // a byte for the proxy to flip (an earlier random 0 does as well)
		digest := sha256.Sum256(b)
		sum := hex.EncodeToString(digest[:])
		key := fmt.Sprintf("corrupt-%d", n)
		proxy.FlipNextZero()
		err := p.Put(ctxT(t), key, bytes.NewReader(b), int64(n), sum)
		t.Logf("put of %d bytes corrupted in flight: %v", n, err)
		if proxy.Flipped() != i+1 {
			t.Fatalf("the proxy flipped %d bytes, want %d", proxy.Flipped(), i+1)
		}
		if !errors.Is(err, ErrDigest) {
			t.Fatalf("put of %d bytes corrupted in flight: got %v, want ErrDigest", n, err)
		}
		mustBeAbsent(t, p, srv, key)
		put(t, p, key, b, sum) // unarmed, the proxy passes the same bytes
		mustRead(t, p, key, b)
	}
}

// A store that answers no checksum gets its copy read back: a good copy
// counts, one that reads back wrong is refused and removed.
func TestS3ReadBackWhenStoreAnswersNoChecksum(t *testing.T) {
	srv := s3test.Start(t)
	proxy := s3test.StartProxy(t, srv.Addr)
	proxy.Rewrite("X-Amz-Checksum-Sha256:", "X-Amz-Checksum-Hidden:") // the PUT's answer
	proxy.Rewrite("x-amz-checksum-sha256:", "x-amz-checksum-hidden:") // versitygw sends lower case
	proxy.Rewrite("ChecksumSHA256>", "ChecksumHidden>")               // CompleteMultipartUpload's
	p := openS3(t, srv, proxy.Addr(), "&partsize=5MiB")
	for _, n := range []int{4096, minPartSize + 10} {
		b, sum := content(t, n)
		put(t, p, fmt.Sprintf("good-%d", n), b, sum)

		marker := fmt.Sprintf("MARKER-%d-", n) // turned into a different marker on its way back
		copy(b[100:], marker)
		digest := sha256.Sum256(b)
		sum = hex.EncodeToString(digest[:])
		proxy.Rewrite(marker, strings.ToLower(marker))
		key := fmt.Sprintf("bad-%d", n)
		err := p.Put(ctxT(t), key, bytes.NewReader(b), int64(n), sum)
		if !errors.Is(err, ErrDigest) || !strings.Contains(err.Error(), "read back") {
			t.Fatalf("put of %d bytes that read back wrong: got %v, want ErrDigest from the read-back", n, err)
		}
		mustBeAbsent(t, p, srv, key)
	}
}

// An S3 server answering 503 or 429 is busy (whatever its code), and its
// Retry-After (seconds or a date) is kept with the error, as the moment
// before which its job does not try again; without one, none is.
func TestS3BusyKeepsItsRetryAfter(t *testing.T) {
	srv := s3test.Start(t)
	busy := s3test.StartBusy(t, srv.Addr)
	s := openS3(t, srv, busy.Addr, "")
	date := time.Now().Add(4 * time.Second).Truncate(time.Second)
	for _, c := range []struct {
		answer s3test.BusyAnswer
		least  func(start time.Time) time.Time // nil: no Retry-After
	}{
		{s3test.BusyAnswer{Status: 429, Code: "TooManyRequests"}, nil}, // first: no Retry-After asked before
		{s3test.BusyAnswer{Status: 503, Code: "SlowDown", RetryAfter: "2"}, func(start time.Time) time.Time { return start.Add(2 * time.Second) }},
		{s3test.BusyAnswer{Status: 429, Code: "TooManyRequests", RetryAfter: date.UTC().Format(http.TimeFormat)}, func(time.Time) time.Time { return date }},
	} {
		busy.Answer(c.answer)
		busy.Set(true)
		start := time.Now()
		_, err := s.Stat(ctxT(t), "any")
		switch {
		case !Busy(err):
			t.Errorf("%+v: Stat: %v; want busy", c.answer, err)
		case c.least == nil && time.Now().Before(askedUntil(err)):
			t.Errorf("%+v: Stat: %v asks to wait until %v; want no wait asked", c.answer, err, askedUntil(err))
		case c.least != nil && askedUntil(err).Before(c.least(start)):
			t.Errorf("%+v: Stat: %v; want to wait until %v at least", c.answer, err, c.least(start))
		}
		busy.Set(false)
	}
}

// A Retry-After is the service's word until it answers again: once it
// takes a request, a later busy answer that asks nothing waits for nothing
// it asked before (a Retry-After: 30 kept a job waiting 30 s after S3 had
// served it and answered 503 again without one).
func TestS3BusyForgetsARetryAfterOnceItAnswers(t *testing.T) {
	srv := s3test.Start(t)
	busy := s3test.StartBusy(t, srv.Addr)
	s := openS3(t, srv, busy.Addr, "")

	busy.Answer(s3test.BusyAnswer{Status: 503, Code: "SlowDown", RetryAfter: "30"})
	busy.Set(true)
	if _, err := s.Stat(ctxT(t), "any"); time.Until(askedUntil(err)) < 20*time.Second {
		t.Fatalf("Stat while busy, Retry-After: 30: %v; want a wait of 30 s asked", err)
	}
	busy.Set(false)
	if _, err := s.Stat(ctxT(t), "any"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("Stat once served: %v; want ErrNotExist", err)
	}
	busy.Answer(s3test.BusyAnswer{Status: 503, Code: "SlowDown"})
	busy.Set(true)
	_, err := s.Stat(ctxT(t), "any")
	switch {
	case !Busy(err):
		t.Errorf("Stat busy again: %v; want busy", err)
	case time.Now().Before(askedUntil(err)):
		t.Errorf("Stat busy again, no Retry-After: %v asks to wait until %v (%v from now), as the answer before the service took a request asked",
			err, askedUntil(err), time.Until(askedUntil(err)).Round(time.Second))
	}
}

// A target opened while its S3 service is busy (MinIO starting answers 503
// with Retry-After: 120) says how long it asked, as any later request does:
// its jobs waited the back-off only.
func TestS3OpenedBusyKeepsItsRetryAfter(t *testing.T) {
	srv := s3test.Start(t)
	busy := s3test.StartBusy(t, srv.Addr)
	busy.Answer(s3test.BusyAnswer{Status: 503, Code: "XMinioServerNotInitialized", RetryAfter: "120"})
	busy.Set(true)
	srv.SetEnv(t)
	_, err := NewS3(ctxT(t), srv.URL(busy.Addr, "root"))
	if !Busy(err) || time.Until(askedUntil(err)) < 100*time.Second {
		t.Errorf("NewS3 while busy, Retry-After: 120: %v; want busy, asking to wait 120 s", err)
	}
}

// askedUntil is the moment err's Retry-After asked to be left until (its
// NotBefore); zero when it asked none.
func askedUntil(err error) time.Time {
	var asked interface{ NotBefore() time.Time }
	if !errors.As(err, &asked) {
		return time.Time{}
	}
	return asked.NotBefore()
}
