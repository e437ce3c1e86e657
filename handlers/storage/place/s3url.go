package place

import (
	"cmp"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/minio/minio-go/v7/pkg/s3utils"

	"github.com/ingestq/ingestq/internal/redact"
)

const (
	awsEndpoint     = "s3.amazonaws.com"
	defaultPartSize = 16 << 20
	minPartSize     = 5 << 20 // S3 refuses smaller parts, except the last
	maxPartSize     = 5 << 30 // S3's largest part
)

// s3URLParams are the query parameters an s3:// URL may carry.
var s3URLParams = []string{"endpoint", "region", "secure", "partsize", "idletimeout"}

// s3Config is what an s3:// URL says.
type s3Config struct {
	bucket   string
	prefix   string // "" or a folder ending in "/"
	endpoint string // host[:port]
	custom   bool   // endpoint given: path-style addressing
	region   string // "" lets the client ask the bucket
	secure   bool
	partSize int64
	idle     time.Duration // a request moving no byte for this long fails
}

// parseS3URL reads s3://bucket/prefix?endpoint=host:port&region=R&secure=false&partsize=16MiB&idletimeout=30s.
// The region defaults to AWS_REGION, else us-east-1 for a custom endpoint.
func parseS3URL(rawURL string) (s3Config, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return s3Config{}, fmt.Errorf("place: S3 URL: %s", redact.In(err.Error(), rawURL))
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("place: S3 URL %s: %s", redact.Location(rawURL), fmt.Sprintf(format, args...))
	}
	if u.Scheme != "s3" {
		return s3Config{}, bad("not an s3:// URL")
	}
	if u.User != nil {
		return s3Config{}, bad("credentials do not belong in the URL; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	}
	if err := s3utils.CheckValidBucketNameStrict(u.Host); err != nil {
		return s3Config{}, bad("bucket %q: %v", u.Host, err)
	}
	c := s3Config{bucket: u.Host, endpoint: awsEndpoint, secure: true, partSize: defaultPartSize, idle: defaultIdleTimeout}
	if p := strings.Trim(u.Path, "/"); p != "" {
		if why := s3KeyProblem(p); why != "" {
			return s3Config{}, bad("prefix %q %s", p, why)
		}
		c.prefix = p + "/"
	}
	if err := c.setParams(u.Query()); err != nil {
		return s3Config{}, bad("%v", err)
	}
	return c, nil
}

// setParams applies the URL's query parameters to c.
func (c *s3Config) setParams(q url.Values) error {
	for name := range q {
		if !slices.Contains(s3URLParams, name) {
			return fmt.Errorf("unknown parameter %q (accepted: %s)", name, strings.Join(s3URLParams, ", "))
		}
	}
	if e := q.Get("endpoint"); e != "" {
		c.endpoint, c.custom = e, true
	}
	c.region = cmp.Or(q.Get("region"), os.Getenv("AWS_REGION"))
	if c.region == "" && c.custom {
		c.region = "us-east-1"
	}
	if s := q.Get("secure"); s != "" {
		secure, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("secure=%q is not true or false", s)
		}
		c.secure = secure
	}
	if s := q.Get("partsize"); s != "" {
		n, err := parsePartSize(s)
		if err != nil {
			return err
		}
		c.partSize = n
	}
	if s := q.Get("idletimeout"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return fmt.Errorf("idletimeout=%q: want a duration above zero, such as 30s", s)
		}
		c.idle = d
	}
	return nil
}

// parsePartSize reads a byte count, optionally in MiB ("16MiB").
func parsePartSize(s string) (int64, error) {
	digits, unit := s, int64(1)
	if d, ok := strings.CutSuffix(s, "MiB"); ok {
		digits, unit = d, 1<<20
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n*unit < minPartSize || n*unit > maxPartSize {
		return 0, fmt.Errorf("partsize=%q: want bytes or MiB between 5MiB and 5GiB", s)
	}
	return n * unit, nil
}

// s3KeyProblem says what is wrong with a key ("" when nothing): keys are
// relative slash-separated paths without empty, "." or ".." segments, so
// that a key cannot climb out of the place's prefix on any store.
func s3KeyProblem(key string) string {
	switch {
	case key == "":
		return "is empty"
	case !utf8.ValidString(key):
		return "is not UTF-8"
	case strings.ContainsAny(key, "\\\x00"):
		return "holds a backslash or NUL"
	case strings.HasPrefix(key, "/"):
		return "is absolute"
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "has an empty, \".\" or \"..\" segment"
		}
	}
	return ""
}
