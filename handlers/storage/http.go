package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/ingestq/ingestq/internal/redact"
)

// HTTP is a store behind a storage service:
//
//	POST <endpoint>/objects        multipart: "version" (JSON), then one "file" per file
//	                               → {"ark": …, "number": n, "changed": bool, "message": …}
//	GET  <endpoint>/objects/<ark>  → a Version as JSON; 404 when none
//	GET  <endpoint>/objects/<ark>?versions=all → {"ark": …, "versions": [Version…]}, oldest
//	                               first, each file's size as stored (-1: its copy is gone)
//	GET  <endpoint>/content/<ark>?version=n&file=name → the file's bytes
//
// The last two are what an audit (Survey) and the access queue (Read)
// read; a service that answers versions=all with the latest Version alone
// serves no older one ([ErrLatestOnly]).
//
// 5xx answers and network errors are retried by the client; 4xx are
// refusals ([Refused]).
type HTTP struct {
	endpoint string
	shown    string // endpoint as messages name it, its password masked
	client   *retryablehttp.Client
}

var (
	_ Store    = (*HTTP)(nil)
	_ Surveyor = (*HTTP)(nil)
	_ Reader   = (*HTTP)(nil)
)

// ErrLatestOnly is a storage service that serves each object's latest
// version alone (an older service than ingestq's): an audit compares that.
var ErrLatestOnly = errors.New("the storage service serves only each object's latest version")

// NewHTTP returns a store speaking to endpoint through client (a default
// retrying client when nil).
func NewHTTP(endpoint string, client *retryablehttp.Client) *HTTP {
	if client == nil {
		client = retryablehttp.NewClient()
	}
	endpoint = strings.TrimRight(endpoint, "/")
	return &HTTP{endpoint: endpoint, shown: redact.Location(endpoint), client: client}
}

// at is target, a URL under the endpoint, as messages name it: only the
// endpoint holds a secret. Redacting target whole took an "@" in its path
// (an ARK may hold one) for a password's end, hiding the service's host.
func (h *HTTP) at(target string) string { return h.shown + strings.TrimPrefix(target, h.endpoint) }

// putRequest is the "version" part of a Put.
type putRequest struct {
	ARK      string   `json:"ark"`
	LocalIDs []string `json:"local_ids"`
	Files    []File   `json:"files"`
	// Describing is Object.Describing.
	Describing []string `json:"describing,omitempty"`
	// Message is Object.Message, which the service keeps with the version
	// it makes and answers as Version.Message. A service of an older
	// release ignores it and answers none.
	Message string `json:"message,omitempty"`
}

// putReply is the service's answer to a Put.
type putReply struct {
	ARK     string    `json:"ark"`
	Number  int       `json:"number"`
	Changed bool      `json:"changed"`
	Created time.Time `json:"created"`
	Message string    `json:"message,omitempty"` // the version's, as Version.Message
}

// Put sends obj in one streamed multipart POST; see [Store].
func (h *HTTP) Put(ctx context.Context, obj Object) (Version, error) {
	files, err := checkObject(obj)
	if err != nil {
		return Version{}, err
	}
	target := h.endpoint + "/objects"
	meta, err := json.Marshal(putRequest{ARK: obj.ARK, LocalIDs: obj.LocalIDs, Files: files, Describing: obj.Describing, Message: obj.Message})
	if err != nil {
		return Version{}, fmt.Errorf("storage: put %s to %s: %w", obj.ARK, h.at(target), err)
	}
	// A source file that fails mid-stream cancels the request with the
	// reason, so the client stops retrying what cannot succeed.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	b := &bodies{boundary: multipart.NewWriter(io.Discard).Boundary(), meta: meta, files: files, fail: cancel}
	defer b.finish()
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, target, retryablehttp.ReaderFunc(b.open))
	if err != nil {
		return Version{}, fmt.Errorf("storage: put %s to %s: %w", obj.ARK, h.at(target), err)
	}
	req.Header.Set("Content-Type", "multipart/form-data; boundary="+b.boundary)
	req.Header.Set("Accept", "application/json")

	resp, err := h.client.Do(req)
	var src sourceError
	if errors.As(context.Cause(ctx), &src) {
		if err == nil {
			resp.Body.Close()
		}
		return Version{}, fmt.Errorf("storage: put %s to %s: %w", obj.ARK, h.at(target), src.err)
	}
	if err != nil {
		return Version{}, fmt.Errorf("storage: put %s to %s: %w", obj.ARK, h.at(target), err)
	}
	defer closeBody(resp)
	if resp.StatusCode/100 != 2 {
		return Version{}, answerError(resp, "put "+obj.ARK, h.at(target))
	}
	var r putReply
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&r); err != nil {
		return Version{}, fmt.Errorf("storage: put %s to %s: reading the answer: %w", obj.ARK, h.at(target), err)
	}
	if r.ARK != obj.ARK || r.Number < 1 {
		return Version{}, fmt.Errorf("storage: put %s to %s: answer names %q version %d", obj.ARK, h.at(target), r.ARK, r.Number)
	}
	v := Version{ARK: r.ARK, Number: r.Number, Created: r.Created, Changed: r.Changed, Files: slices.Clone(files),
		Message: r.Message, URL: h.objectURL(r.ARK)}
	for i := range v.Files {
		v.Files[i].Path = "" // the service's copy has no local path
	}
	return v, nil
}

// Latest asks the service for the newest version of ark.
func (h *HTTP) Latest(ctx context.Context, ark string) (Version, error) {
	if err := checkARK(ark); err != nil {
		return Version{}, err
	}
	target := h.objectURL(ark)
	resp, err := h.get(ctx, target, "application/json")
	if err != nil {
		return Version{}, fmt.Errorf("storage: latest of %s from %s: %w", ark, h.at(target), err)
	}
	defer closeBody(resp)
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return Version{}, fmt.Errorf("storage: %s at %s: %w", ark, h.at(target), ErrNotFound)
	case resp.StatusCode/100 != 2:
		return Version{}, answerError(resp, "latest of "+ark, h.at(target))
	}
	var v Version
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&v); err != nil {
		return Version{}, fmt.Errorf("storage: latest of %s from %s: reading the answer: %w", ark, h.at(target), err)
	}
	if v.ARK != ark || v.Number < 1 {
		return Version{}, fmt.Errorf("storage: latest of %s from %s: answer names %q version %d", ark, h.at(target), v.ARK, v.Number)
	}
	v.Changed, v.URL = false, target
	slices.SortFunc(v.Files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	return v, nil
}

// surveyReply is the service's answer to versions=all; Number is set
// instead of Versions by a service that ignores the question and answers
// the latest version.
type surveyReply struct {
	ARK      string    `json:"ark"`
	Versions []Version `json:"versions"`
	Number   int       `json:"number,omitempty"`
}

// Survey asks the service for every version of ark, each file's size as
// stored; see [Surveyor]. A service that answers the latest version alone
// is ErrLatestOnly.
func (h *HTTP) Survey(ctx context.Context, ark string) (Stored, error) {
	if err := checkARK(ark); err != nil {
		return nil, err
	}
	target := h.objectURL(ark) + "?versions=all"
	fail := func(format string, a ...any) (Stored, error) {
		return nil, fmt.Errorf("storage: versions of %s from %s: "+format, append([]any{ark, h.at(target)}, a...)...)
	}
	resp, err := h.get(ctx, target, "application/json")
	if err != nil {
		return fail("%w", err)
	}
	defer closeBody(resp)
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("storage: %s at %s: %w", ark, h.at(target), ErrNotFound)
	case resp.StatusCode/100 != 2:
		return nil, answerError(resp, "versions of "+ark, h.at(target))
	}
	var r surveyReply
	if err := json.NewDecoder(io.LimitReader(resp.Body, 256<<20)).Decode(&r); err != nil {
		return fail("reading the answer: %w", err)
	}
	if r.Versions == nil && r.Number > 0 {
		return fail("%w: it answered version %d alone", ErrLatestOnly, r.Number)
	}
	for i := range r.Versions {
		v := &r.Versions[i]
		if r.ARK != ark || v.ARK != ark || v.Number != i+1 {
			return fail("answer names %q version %d as version %d of %q", v.ARK, v.Number, i+1, r.ARK)
		}
		v.URL = h.objectURL(ark)
		slices.SortFunc(v.Files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	}
	if len(r.Versions) == 0 {
		return fail("answer names no version")
	}
	return &httpStored{h: h, ark: ark, versions: r.Versions}, nil
}

// Read is Survey for the access queue: a file whose stored copy the
// service says is gone fails the read, as an OCFL root's Read does. A
// service that serves each object's latest version alone gives that
// version, as a [LatestOnly].
func (h *HTTP) Read(ctx context.Context, ark string) (Stored, error) {
	o, err := h.Survey(ctx, ark)
	if errors.Is(err, ErrLatestOnly) {
		v, lerr := h.Latest(ctx, ark)
		if lerr != nil {
			return nil, lerr
		}
		return &latestStored{httpStored{h: h, ark: ark, versions: []Version{v}}, err}, nil
	}
	if err != nil {
		return nil, err
	}
	for _, v := range o.Versions() {
		for _, f := range v.Files {
			if f.Size == Absent {
				return nil, fmt.Errorf("storage: %s at %s: the stored copy of file %q of version %d is gone", ark, h.shown, f.Name, v.Number)
			}
		}
	}
	return o, nil
}

// httpStored is an object as a storage service surveyed it.
type httpStored struct {
	h        *HTTP
	ark      string
	versions []Version
}

func (s *httpStored) Versions() []Version { return s.versions }

// latestStored is the latest version alone, from a service that serves no
// other; why says so.
type latestStored struct {
	httpStored
	why error
}

func (s *latestStored) Why() error { return s.why }

// Open is httpStored's; a file the service will not give is said to come
// from a service older than the content call, which such a service may be.
func (s *latestStored) Open(ctx context.Context, n int, name string) (io.ReadCloser, error) {
	rc, err := s.httpStored.Open(ctx, n, name)
	if errors.Is(err, ErrNotFound) || Refused(err) {
		return nil, fmt.Errorf("%w (%s serves each object's latest version alone, and may be older than the protocol's "+
			"GET /content/{ark} of a file's bytes)", err, s.h.shown)
	}
	return rc, err
}

// contentURL is where the service gives file name of version n.
func (s *httpStored) contentURL(n int, name string) string {
	return s.h.endpoint + "/content/" + url.PathEscape(s.ark) + "?" + url.Values{"version": {strconv.Itoa(n)}, "file": {name}}.Encode()
}

// Location is the service's URL Open reads, as shown (Locator).
func (s *httpStored) Location(n int, name string) string { return s.h.at(s.contentURL(n, name)) }

// Open streams file name of version n from the service.
func (s *httpStored) Open(ctx context.Context, n int, name string) (io.ReadCloser, error) {
	target := s.contentURL(n, name)
	resp, err := s.h.get(ctx, target, "application/octet-stream")
	if err != nil {
		return nil, fmt.Errorf("storage: file %q of version %d of %s from %s: %w", name, n, s.ark, s.h.at(target), err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		defer closeBody(resp)
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return nil, fmt.Errorf("storage: file %q of version %d of %s from %s: %q: %w", name, n, s.ark, s.h.at(target),
			strings.TrimSpace(string(b)), ErrNotFound)
	case resp.StatusCode/100 != 2:
		defer closeBody(resp)
		return nil, answerError(resp, fmt.Sprintf("file %q of version %d of %s", name, n, s.ark), s.h.at(target))
	}
	return resp.Body, nil
}

// get sends a GET of target, accepting accept.
func (h *HTTP) get(ctx context.Context, target, accept string) (*http.Response, error) {
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", accept)
	return h.client.Do(req)
}

// objectURL is where the service serves the latest version of ark.
func (h *HTTP) objectURL(ark string) string { return h.endpoint + "/objects/" + url.PathEscape(ark) }

// refusedError is a 4xx answer: the service understood and said no.
type refusedError struct {
	target string
	status string
	body   string
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("%s refused: %s: %q", e.target, e.status, e.body)
}

// Refused tells whether err is (or wraps) a refusal by the storage service:
// a 4xx answer, which retrying will not change.
func Refused(err error) bool {
	var r *refusedError
	return errors.As(err, &r)
}

// answerError describes a non-2xx answer from target, as messages name
// it (HTTP.at), with the first 200 bytes of its body; a 4xx one is marked
// refused.
func answerError(resp *http.Response, what, target string) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	if resp.StatusCode/100 == 4 {
		return fmt.Errorf("storage: %s: %w", what, &refusedError{target, resp.Status, string(b)})
	}
	return fmt.Errorf("storage: %s: %s answered %s: %q", what, target, resp.Status, b)
}

// closeBody drains a little of the body so the connection can be reused.
func closeBody(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
}
