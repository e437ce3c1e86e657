package place

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/ingestq/ingestq/handlers/fetch"
	"github.com/ingestq/ingestq/internal/stall"
)

// S3 is a place in a bucket of an S3-compatible store, under a prefix: key
// k is the object prefix+k. It talks to the store through minio-go.
//
// Put sends a SHA-256 checksum with every upload and counts the copy only
// when the store confirms it (see s3put.go); files larger than a part go as
// multipart uploads, one part in memory at a time.
type S3 struct {
	core     minio.Core
	bucket   string
	prefix   string // "" or ending in "/"
	partSize int64
	asked    *askedTransport
}

var _ Place = (*S3)(nil)

// NewS3 opens the place an s3:// URL names:
//
//	s3://bucket/prefix?endpoint=host:port&region=us-east-1&secure=false&partsize=16MiB&idletimeout=30s
//
// endpoint defaults to AWS (a custom endpoint is addressed path-style),
// secure to true, region to AWS_REGION, partsize to 16 MiB, idletimeout
// (how long a request may move no byte) to 30 s. Credentials come
// from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN.
// NewS3 checks that the bucket exists, so a wrong bucket, endpoint or key
// fails here rather than at the first Put.
func NewS3(ctx context.Context, rawURL string) (*S3, error) {
	c, err := parseS3URL(rawURL)
	if err != nil {
		return nil, err
	}
	s := &S3{bucket: c.bucket, prefix: c.prefix, partSize: c.partSize}
	creds, err := envCredentials()
	if err != nil {
		return nil, fmt.Errorf("place: %s: %w", s, err)
	}
	tr, err := minio.DefaultTransport(c.secure)
	if err != nil {
		return nil, fmt.Errorf("place: %s: %w", s, err)
	}
	s.asked = &askedTransport{base: stall.Transport(tr, c.idle)}
	opts := &minio.Options{Creds: creds, Secure: c.secure, Region: c.region, Transport: s.asked, MaxRetries: s3Tries}
	if c.custom {
		opts.BucketLookup = minio.BucketLookupPath
	}
	client, err := minio.New(c.endpoint, opts)
	if err != nil {
		return nil, fmt.Errorf("place: %s at %s: %w", s, c.endpoint, err)
	}
	s.core = minio.Core{Client: client}
	ok, err := client.BucketExists(ctx, c.bucket)
	if c.secure && errors.Is(err, http.ErrSchemeMismatch) {
		// An endpoint without TLS (a MinIO or versitygw on the private
		// network): Go's words alone do not name the URL's setting.
		return nil, fmt.Errorf("place: %s at %s answers plain HTTP, not HTTPS: add &secure=false to the URL for an endpoint without TLS (%w)",
			s, c.endpoint, err)
	}
	if err != nil {
		return nil, fmt.Errorf("place: %s at %s: %w", s, c.endpoint, s.asked.busy(err))
	}
	if !ok {
		return nil, fmt.Errorf("place: %s at %s: no bucket %q", s, c.endpoint, c.bucket)
	}
	return s, nil
}

// envCredentials reads the static keys from the usual AWS variables.
func envCredentials() (*credentials.Credentials, error) {
	id, secret := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	if id == "" || secret == "" {
		return nil, errors.New("no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY " +
			"(and AWS_SESSION_TOKEN for temporary ones)")
	}
	return credentials.NewStaticV4(id, secret, os.Getenv("AWS_SESSION_TOKEN")), nil
}

// String is s3://bucket/prefix (never the credentials).
func (s *S3) String() string {
	if s.prefix == "" {
		return "s3://" + s.bucket
	}
	return "s3://" + s.bucket + "/" + strings.TrimSuffix(s.prefix, "/")
}

// object returns key's object name, or an error naming the bad key.
func (s *S3) object(key string) (string, error) {
	if why := s3KeyProblem(key); why != "" {
		return "", fmt.Errorf("place %s: key %q %s", s, key, why)
	}
	return s.prefix + key, nil
}

// maxS3Key is the longest key AWS S3 holds, in bytes of UTF-8; minio-go
// refuses a longer one itself, before any request, on every try. Other S3
// servers may hold longer ones (versitygw, over a folder, has its file
// system's limits instead): a place is held to AWS's, so that what it
// takes can move to AWS.
const maxS3Key = 1024

// Fits says whether key, after the place's prefix, is a key S3 holds.
func (s *S3) Fits(key string) error {
	if n := len(s.prefix) + len(key); n > maxS3Key {
		return &TooLong{What: "its S3 key (the place's prefix, then the key)", Length: n, Limit: maxS3Key,
			Rule: "AWS S3 keys are at most 1024 bytes (UTF-8)"}
	}
	return nil
}

// fail wraps err from op on key, as ErrNotExist when the store has no such
// key, or as busy until the moment a Retry-After asked for.
func (s *S3) fail(op, key string, err error) error {
	if s3NotFound(err) {
		err = ErrNotExist
	}
	return fmt.Errorf("place %s: %s %s: %w", s, op, key, s.asked.busy(err))
}

// askedTransport notes the moment the latest busy answer's Retry-After
// (503, 429) asked the service to be left until: minio-go's errors keep no
// header. The service asked it, whatever the request: a busy error of
// another request meanwhile waits for it too. Any answer but a busy one
// forgets it: the service takes requests again.
type askedTransport struct {
	base  http.RoundTripper
	until atomic.Int64 // Unix nanoseconds; 0: nothing asked
}

func (t *askedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	switch {
	case err != nil:
	case fetch.BusyStatus(resp.StatusCode):
		if at := fetch.RetryAt(resp.Header, time.Now()); !at.IsZero() {
			t.until.Store(at.UnixNano())
		}
	default:
		t.until.Store(0)
	}
	return resp, err
}

// busy is err, as a busyError when Busy and a Retry-After asked for a
// moment still to come.
func (t *askedTransport) busy(err error) error {
	if at := time.Unix(0, t.until.Load()); Busy(err) && time.Now().Before(at) {
		return &busyError{err: err, until: at}
	}
	return err
}

// busyError is a busy answer (Busy) whose Retry-After asked to be left
// until a moment: a job's step waits at least until then (reactor).
type busyError struct {
	err   error
	until time.Time
}

func (e *busyError) Error() string        { return e.err.Error() }
func (e *busyError) Unwrap() error        { return e.err }
func (e *busyError) NotBefore() time.Time { return e.until }

func s3NotFound(err error) bool {
	code := s3Code(err)
	return code == "NoSuchKey" || code == "NotFound"
}

// s3Code is the S3 error code in err, or "".
func s3Code(err error) string {
	var resp minio.ErrorResponse
	if errors.As(err, &resp) {
		return resp.Code
	}
	return ""
}

// Busy tells whether err is an S3 server's 503 (ServiceUnavailable, or
// SlowDown: "reduce your request rate") or 429 Too Many Requests (some
// S3-compatible services throttle with it): the service takes no request
// now, whatever the key, and asks to be tried later. minio-go tries it
// again once (s3Tries); a job waits out the rest.
func Busy(err error) bool {
	var resp minio.ErrorResponse
	return errors.As(err, &resp) && (fetch.BusyStatus(resp.StatusCode) || resp.Code == "SlowDown" || resp.Code == "ServiceUnavailable")
}

// Open reads key.
func (s *S3) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	obj, err := s.object(key)
	if err != nil {
		return nil, err
	}
	body, _, _, err := s.core.GetObject(ctx, s.bucket, obj, minio.GetObjectOptions{})
	if err != nil {
		return nil, s.fail("open", key, err)
	}
	return body, nil
}

// Stat returns key's size.
func (s *S3) Stat(ctx context.Context, key string) (int64, error) {
	obj, err := s.object(key)
	if err != nil {
		return 0, err
	}
	info, err := s.core.StatObject(ctx, s.bucket, obj, minio.StatObjectOptions{})
	if err != nil {
		return 0, s.fail("stat", key, err)
	}
	return info.Size, nil
}

// List returns the keys under the folder prefix ("" for all; "a/b" is the
// folder "a/b/"), sorted.
func (s *S3) List(ctx context.Context, prefix string) ([]string, error) {
	return sortedKeys(s.Keys(ctx, prefix))
}

// Keys gives the keys under the folder prefix as the bucket lists them;
// see [Place].
func (s *S3) Keys(ctx context.Context, prefix string) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		folder := strings.TrimSuffix(prefix, "/")
		if folder != "" {
			if why := s3KeyProblem(folder); why != "" {
				yield("", fmt.Errorf("place %s: list prefix %q %s", s, prefix, why))
				return
			}
			folder += "/"
		}
		ctx, cancel := context.WithCancel(ctx) // a caller that stops early ends the listing
		defer cancel()
		opts := minio.ListObjectsOptions{Prefix: s.prefix + folder, Recursive: true}
		for obj := range s.core.ListObjectsIter(ctx, s.bucket, opts) {
			if obj.Err != nil {
				yield("", s.fail("list", folder, obj.Err))
				return
			}
			if !strings.HasSuffix(obj.Key, "/") && !yield(strings.TrimPrefix(obj.Key, s.prefix), nil) { // a folder marker is no file
				return
			}
		}
	}
}

// Delete removes key; a missing key is not an error.
func (s *S3) Delete(ctx context.Context, key string) error {
	obj, err := s.object(key)
	if err != nil {
		return err
	}
	err = s.core.RemoveObject(ctx, s.bucket, obj, minio.RemoveObjectOptions{})
	if err != nil && !s3NotFound(err) {
		return s.fail("delete", key, err)
	}
	return nil
}
