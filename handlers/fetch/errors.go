package fetch

import (
	"errors"
	"fmt"
	"net/http"
)

// ErrScheme is wrapped when a URL's scheme is not allowed: anything but http
// and https, and file unless Config.AllowFile.
var ErrScheme = errors.New("URL scheme not allowed")

// ErrTooLarge is wrapped when Fetch reads a document past its limit.
var ErrTooLarge = errors.New("document too large")

// StatusError is an HTTP response whose status is not a success.
type StatusError struct {
	URL  string
	Code int
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s: HTTP %d %s", e.URL, e.Code, http.StatusText(e.Code))
}

// MismatchError is a download or file whose size or digest is not the one
// wanted. What is "size" or the digest algorithm ("md5", "sha256", …).
type MismatchError struct {
	URL, What, Want, Got string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("%s: %s mismatch: want %s, got %s", e.URL, e.What, e.Want, e.Got)
}

// permanentError marks a cause that no retry can fix (a malformed URL, a
// missing local file, a bad Want); Permanent looks for it.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func permanent(err error) error { return &permanentError{err} }

// localError is a failure of this machine (writing the .part file): the
// server is not at fault, so the request is not retried, but the job may
// succeed later (a full disk gets emptied), so it is not permanent either.
type localError struct{ err error }

func (e *localError) Error() string { return e.err.Error() }
func (e *localError) Unwrap() error { return e.err }

// Permanent tells whether err cannot be fixed by retrying: a digest or size
// mismatch, a 4xx status other than 408, 425 and 429, a bad URL or scheme, a
// local file that does not exist, a document past its limit. Network errors,
// timeouts, stalls and 5xx statuses are not permanent.
func Permanent(err error) bool {
	if err == nil {
		return false
	}
	var m *MismatchError
	var p *permanentError
	if errors.As(err, &m) || errors.As(err, &p) || errors.Is(err, ErrScheme) || errors.Is(err, ErrTooLarge) {
		return true
	}
	var s *StatusError
	if errors.As(err, &s) {
		return s.Code >= 400 && s.Code < 500 && !retryableStatus(s.Code)
	}
	return false
}

// retryableStatus tells whether a response with this status is worth asking
// again: timeouts, rate limits and server errors.
func retryableStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
		return true
	}
	return code >= 500 || code == 0
}
