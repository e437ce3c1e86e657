package fetch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
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
	// RetryAt is when a busy server (Busy) asked to be asked again, by its
	// Retry-After; zero when it did not say.
	RetryAt time.Time
}

// statusError is resp's StatusError, with its Retry-After when busy.
func statusError(resp *http.Response) *StatusError {
	e := &StatusError{URL: shown(resp.Request.URL), Code: resp.StatusCode}
	if e.Busy() {
		e.RetryAt = RetryAt(resp.Header, time.Now())
	}
	return e
}

// Busy tells whether the server takes no request now, whatever the
// request, and asks to be tried later: 503 Service Unavailable, 429 Too
// Many Requests. A 500, 502 or 504 may be about the request.
func (e *StatusError) Busy() bool { return BusyStatus(e.Code) }

// BusyStatus tells whether an HTTP status code is a busy answer (Busy):
// the one rule of the back ends' clients and S3's (place).
func BusyStatus(code int) bool {
	return code == http.StatusServiceUnavailable || code == http.StatusTooManyRequests
}

// BusyAnswer is err's busy answer (a StatusError that is Busy), with its
// Retry-After; ok false when err holds none.
func BusyAnswer(err error) (*StatusError, bool) {
	var se *StatusError
	if errors.As(err, &se) && se.Busy() {
		return se, true
	}
	return nil, false
}

// NotBefore is RetryAt: a back end's step waits at least until then
// (reactor).
func (e *StatusError) NotBefore() time.Time { return e.RetryAt }

// RetryAt is when h's Retry-After (seconds, or an HTTP date) asks to be
// asked again, from now; zero without one, or with one past or unreadable.
// Seconds past 32 bits ask as long as 32 bits' most (136 years): as long as
// any wait, not none.
func RetryAt(h http.Header, now time.Time) time.Time {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return time.Time{}
	}
	if secs, err := strconv.ParseUint(v, 10, 32); err == nil || errors.Is(err, strconv.ErrRange) {
		return now.Add(time.Duration(secs) * time.Second)
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t
	}
	return time.Time{}
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s: HTTP %d %s", e.URL, e.Code, http.StatusText(e.Code))
}

// plain is the status in words, without the URL.
func (e *StatusError) plain() string {
	return fmt.Sprintf("HTTP %d %s", e.Code, http.StatusText(e.Code))
}

// MismatchError is a download or file whose size or digest is not the one
// wanted. What is "size" or the digest algorithm ("md5", "sha256", …).
type MismatchError struct {
	URL, What, Want, Got string
}

func (e *MismatchError) Error() string { return e.URL + ": " + e.plain() }

// plain is the mismatch in words, without the URL.
func (e *MismatchError) plain() string {
	return fmt.Sprintf("%s mismatch: want %s, got %s", e.What, e.Want, e.Got)
}

// RequestError is a request that failed: Op ("download", "fetch",
// "callback") of URL (any password redacted), after Requests requests (0:
// not counted). Its message names the URL once and says what happened in
// plain words (Plain): "download https://host/x: connection refused (5
// requests)". Err is the cause, for errors.Is and errors.As.
type RequestError struct {
	Op, URL  string
	Requests int
	Err      error
}

func (e *RequestError) Error() string {
	s := e.Op + " " + e.URL + ": " + Plain(e.Err)
	if e.Requests > 1 {
		s += fmt.Sprintf(" (%d requests)", e.Requests)
	}
	return s
}

func (e *RequestError) Unwrap() error { return e.Err }

// failed is the RequestError of op on u, counting the requests the
// retrying client made (giveUp's note).
func failed(op string, u *url.URL, err error) error {
	re := &RequestError{Op: op, URL: shown(u), Err: err}
	var tries *triesError
	if errors.As(err, &tries) {
		re.Requests = tries.n
	}
	return re
}

// triesError is a request the retrying client gave up on after n tries.
type triesError struct {
	n   int
	err error
}

func (e *triesError) Error() string { return fmt.Sprintf("after %d attempt(s): %v", e.n, e.err) }
func (e *triesError) Unwrap() error { return e.err }

// cutError is a response body that broke off after at bytes.
type cutError struct {
	at  int64
	err error
}

func (e *cutError) Error() string { return fmt.Sprintf("cut off at byte %d: %s", e.at, Plain(e.err)) }
func (e *cutError) Unwrap() error { return e.err }

// Plain says what went wrong with a request in plain words, without its
// URL, which the caller names once: "connection refused", "no such host",
// "HTTP 404 Not Found", "md5 mismatch: want …, got …". The HTTP client's
// own words around the cause (`Get "URL": dial tcp host:port: connect: …`)
// are left out.
func Plain(err error) string {
	for {
		switch e := err.(type) {
		case *RequestError:
			return e.Error()
		case *triesError:
			err = e.err
			continue
		case *url.Error:
			err = e.Err
			continue
		case *permanentError:
			err = e.err
			continue
		case *localError:
			return e.Error() // this machine's failure, naming its own file
		case *fs.PathError:
			return e.Err.Error() // a file:// URL's file: the URL names it
		case *StatusError:
			return e.plain()
		case *MismatchError:
			return e.plain()
		}
		break
	}
	var dns *net.DNSError
	var op *net.OpError
	switch {
	case errors.As(err, &dns) && dns.IsNotFound:
		return "no such host"
	case errors.As(err, &dns):
		return "DNS lookup of " + dns.Name + " failed: " + dns.Err
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.EHOSTUNREACH):
		return "host unreachable"
	case errors.Is(err, syscall.ENETUNREACH):
		return "network unreachable"
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	case errors.As(err, &op) && op.Err != nil && (op.Op == "dial" || op.Op == "read" || op.Op == "write"):
		return op.Err.Error() // without "dial tcp ADDR: "
	}
	return err.Error()
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
