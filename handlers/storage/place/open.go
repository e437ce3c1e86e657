package place

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/ingestq/ingestq/internal/redact"
)

// acceptedForms is named by every error about a place URL.
const acceptedForms = "a folder path, file:///absolute/path, or s3://bucket/prefix?endpoint=host:port&region=R"

// ErrForm is in every error about a URL that is none of acceptedForms, so
// that a caller with forms of its own (the pipeline's storage services)
// names them there, and only there.
var ErrForm = errors.New("not a place's form")

// formError is err, a URL of none of acceptedForms.
type formError struct{ err error }

func (e formError) Error() string   { return e.err.Error() }
func (e formError) Unwrap() []error { return []error{e.err, ErrForm} }

// Open opens the place rawURL names: a folder (a plain path or a file://
// URL) through NewLocal, or an S3 bucket and prefix (s3://…) through NewS3.
func Open(ctx context.Context, rawURL string) (Place, error) { return open(ctx, rawURL, NewLocal) }

// OpenExisting opens the place rawURL names as Open does but makes
// nothing: a folder that does not exist is an error wrapping
// fs.ErrNotExist (NewS3 makes nothing either). It is for readers, such as
// the audit, that must not write where an operator may have mistyped a
// path.
func OpenExisting(ctx context.Context, rawURL string) (Place, error) {
	return open(ctx, rawURL, ExistingLocal)
}

func open(ctx context.Context, rawURL string, local func(dir string) (*Local, error)) (Place, error) {
	kind, target, err := placeKind(rawURL)
	if err != nil {
		return nil, err
	}
	if kind == "s3" {
		s, err := NewS3(ctx, target)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	l, err := local(target)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// placeKind says which place rawURL names: "local" with the folder's path,
// or "s3" with the URL.
func placeKind(rawURL string) (kind, target string, err error) {
	if rawURL == "" {
		return "", "", formError{fmt.Errorf("place: no place given; want %s", acceptedForms)}
	}
	if !strings.Contains(rawURL, "://") {
		return "local", rawURL, nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", "", formError{fmt.Errorf("place: %q: %s; want %s", redact.Location(rawURL), redact.In(err.Error(), rawURL), acceptedForms)}
	}
	switch {
	case u.Scheme == "s3":
		return "s3", rawURL, nil
	case u.Scheme != "file":
		return "", "", formError{fmt.Errorf("place: %s: unknown scheme %q; want %s", redact.Location(rawURL), u.Scheme, acceptedForms)}
	case u.Host != "" && u.Host != "localhost", u.Path == "", u.RawQuery != "", u.Fragment != "":
		return "", "", formError{fmt.Errorf("place: %s: a file URL is file:///absolute/path; want %s", redact.Location(rawURL), acceptedForms)}
	}
	return "local", u.Path, nil
}
