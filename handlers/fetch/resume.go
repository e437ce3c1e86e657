package fetch

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// setRange asks for the bytes after those already in the .part file, and
// (If-Range) for the whole file instead if it changed since the first
// response.
func (d *download) setRange(h http.Header) {
	h.Del("Range")
	h.Del("If-Range")
	if d.offset == 0 {
		return
	}
	h.Set("Range", "bytes="+strconv.FormatInt(d.offset, 10)+"-")
	if d.validator != "" {
		h.Set("If-Range", d.validator)
	}
}

// handle is the response handler of a download's request: called for every
// attempt that got a response the retry policy did not retry.
func (d *download) handle(resp *http.Response) error {
	defer resp.Body.Close()
	code := resp.StatusCode
	switch {
	case code == http.StatusPartialContent:
		if err := d.continues(resp.Header.Get("Content-Range")); err != nil {
			return err
		}
	case code == http.StatusRequestedRangeNotSatisfiable && d.offset > 0:
		return d.unsatisfiable(resp.Header.Get("Content-Range"))
	case code >= 200 && code < 300:
		// The whole file: the server ignored the Range, or the file
		// changed (If-Range), or no Range was sent.
		if d.offset > 0 {
			if err := d.restart(); err != nil {
				return err
			}
		}
		if err := d.expectTotal(resp.ContentLength, "by its Content-Length"); err != nil {
			return err
		}
		d.validator = validator(resp.Header)
	default:
		se := statusError(resp) // with a busy server's Retry-After
		se.URL = d.url
		return se
	}
	if d.validator == "" {
		d.validator = validator(resp.Header)
	}
	return d.copy(resp.Body)
}

// continues checks that a 206 response carries the bytes from d.offset on.
func (d *download) continues(contentRange string) error {
	start, total, ok := parseContentRange(contentRange)
	if !ok || start != d.offset {
		at := d.offset
		if err := d.restart(); err != nil {
			return err
		}
		return fmt.Errorf("Content-Range %q does not go on at byte %d; starting over", contentRange, at)
	}
	if err := d.expectTotal(total, "by its Content-Range"); err != nil {
		return err
	}
	d.resumed = d.offset > 0
	return nil
}

// unsatisfiable handles a 416 to our Range: the .part is either the whole
// file already (a process died before renaming it) or longer than the file.
func (d *download) unsatisfiable(contentRange string) error {
	if start, total, ok := parseContentRange(contentRange); ok && start < 0 && total == d.offset {
		d.resumed = true
		return nil
	}
	at := d.offset
	if err := d.restart(); err != nil {
		return err
	}
	return fmt.Errorf("range from byte %d not satisfiable (Content-Range %q); starting over", at, contentRange)
}

// validator returns what If-Range may carry: a strong ETag, else the
// Last-Modified date (weak ETags are not allowed there).
func validator(h http.Header) string {
	if etag := h.Get("ETag"); etag != "" && !strings.HasPrefix(etag, "W/") {
		return etag
	}
	return h.Get("Last-Modified")
}

// parseContentRange reads "bytes first-last/total" and "bytes */total";
// start is -1 for "*", total -1 for "*".
func parseContentRange(s string) (start, total int64, ok bool) {
	rest, ok := strings.CutPrefix(s, "bytes ")
	if !ok {
		return 0, 0, false
	}
	rng, tot, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, 0, false
	}
	total = -1
	if tot != "*" {
		t, err := strconv.ParseInt(tot, 10, 64)
		if err != nil || t < 0 {
			return 0, 0, false
		}
		total = t
	}
	if rng == "*" {
		return -1, total, total >= 0
	}
	first, last, ok := strings.Cut(rng, "-")
	if !ok {
		return 0, 0, false
	}
	a, err1 := strconv.ParseInt(first, 10, 64)
	b, err2 := strconv.ParseInt(last, 10, 64)
	if err1 != nil || err2 != nil || a < 0 || b < a || (total >= 0 && b >= total) {
		return 0, 0, false
	}
	return a, total, true
}
