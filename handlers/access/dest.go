package access

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/ingestq/ingestq/handlers/storage/place"
	"github.com/ingestq/ingestq/internal/durable"
	"github.com/ingestq/ingestq/reactor/queue"
)

// A destination is where finished packages go. Every package is first
// written and verified in the local folder under a hidden partial name;
// publishing makes it visible at once and whole: a rename in the folder,
// or an upload to S3 that exists only once its multipart upload is
// complete (place.S3.Put).
type destination interface {
	kind() string     // "folder" or "s3"
	location() string // the folder's path, or the s3:// URL
	// publish makes the verified file tmp the package name, and returns
	// the URL it is fetched from until expires.
	publish(ctx context.Context, tmp, name string, size int64, sum string, expires time.Time) (string, error)
	remove(ctx context.Context, name string) error
	names(ctx context.Context) ([]string, error) // the packages there
}

// partialPrefix starts the name of a package being written in the folder:
// hidden, never served, never listed as a package.
const partialPrefix = ".partial-"

// packageShape is the shape of packageName's names: what the package
// holds, "-", its request's token (tokenShape, as checkToken lets through),
// the format. Only such names in a place are packages: the folder or prefix
// may hold other files (the data folder given as --access-dir, the OCFL
// root of a bucket given as --access-to), which are neither served nor
// swept as packages no request names.
var packageShape = regexp.MustCompile(`^[^./\\][^/\\]*-` + tokenShape + `\.(` +
	regexp.QuoteMeta(queue.FormatZip) + `|` + regexp.QuoteMeta(queue.FormatTarGz) + `)$`)

func isPackage(name string) bool { return packageShape.MatchString(name) }

// folder is the local folder the daemon's HTTP server serves at
// <advertise>/access/<name> (or file: URLs without a server).
type folder struct {
	dir       string // absolute
	advertise string // "" for file: URLs
}

func (f *folder) kind() string     { return "folder" }
func (f *folder) location() string { return f.dir }

func (f *folder) publish(_ context.Context, tmp, name string, _ int64, _ string, _ time.Time) (string, error) {
	dst := filepath.Join(f.dir, name)
	if err := os.Rename(tmp, dst); err != nil {
		return "", err
	}
	if err := durable.SyncDir(f.dir); err != nil {
		return "", err
	}
	return f.url(name), nil
}

func (f *folder) url(name string) string {
	if f.advertise == "" {
		return (&url.URL{Scheme: "file", Path: filepath.Join(f.dir, name)}).String()
	}
	return f.advertise + Prefix + url.PathEscape(name)
}

func (f *folder) remove(_ context.Context, name string) error {
	err := os.Remove(filepath.Join(f.dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

func (f *folder) names(context.Context) ([]string, error) {
	des, err := os.ReadDir(f.dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, de := range des {
		if de.Type().IsRegular() && isPackage(de.Name()) {
			out = append(out, de.Name())
		}
	}
	return out, nil
}

// bucket is an S3 prefix: packages are uploaded there and fetched by
// presigned URLs.
type bucket struct {
	s   *place.S3
	url string // as configured, for the token
}

func (b *bucket) kind() string     { return "s3" }
func (b *bucket) location() string { return b.url }

func (b *bucket) publish(ctx context.Context, tmp, name string, size int64, sum string, expires time.Time) (string, error) {
	f, err := os.Open(tmp)
	if err != nil {
		return "", err
	}
	err = b.s.Put(ctx, name, f, size, sum)
	f.Close()
	if err != nil {
		return "", err
	}
	if err := os.Remove(tmp); err != nil {
		return "", err
	}
	return b.presign(ctx, name, expires)
}

func (b *bucket) presign(ctx context.Context, name string, expires time.Time) (string, error) {
	valid := min(time.Until(expires), place.MaxPresign)
	if valid <= 0 {
		return "", fmt.Errorf("package %s expired at %s", name, expires.Format(time.RFC3339))
	}
	return b.s.Presign(ctx, name, valid, name)
}

func (b *bucket) remove(ctx context.Context, name string) error { return b.s.Delete(ctx, name) }

func (b *bucket) names(ctx context.Context) ([]string, error) {
	keys, err := b.s.List(ctx, "")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, k := range keys {
		if isPackage(k) { // packages only: never a folder below the prefix, nor another's object
			out = append(out, k)
		}
	}
	return out, nil
}

// openDestination opens where packages go: "" or "folder" for the folder
// dir, or an s3:// URL.
func openDestination(ctx context.Context, to, dir, advertise string) (destination, error) {
	if to == "" || to == "folder" {
		return &folder{dir: dir, advertise: advertise}, nil
	}
	if !strings.HasPrefix(to, "s3://") {
		return nil, fmt.Errorf("access packages to %q: want an s3:// URL (or nothing, for the folder %s)", to, dir)
	}
	s, err := place.NewS3(ctx, to)
	if err != nil {
		return nil, err
	}
	return &bucket{s: s, url: to}, nil
}
