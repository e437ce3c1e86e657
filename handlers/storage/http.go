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
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// HTTP is a store behind a storage service:
//
//	POST <endpoint>/objects        multipart: "version" (JSON), then one "file" per file
//	                               → {"ark": …, "number": n, "changed": bool}
//	GET  <endpoint>/objects/<ark>  → a Version as JSON; 404 when none
//
// 5xx answers and network errors are retried by the client; 4xx are
// refusals ([Refused]).
type HTTP struct {
	endpoint string
	client   *retryablehttp.Client
}

var _ Store = (*HTTP)(nil)

// NewHTTP returns a store speaking to endpoint through client (a default
// retrying client when nil).
func NewHTTP(endpoint string, client *retryablehttp.Client) *HTTP {
	if client == nil {
		client = retryablehttp.NewClient()
	}
	return &HTTP{endpoint: strings.TrimRight(endpoint, "/"), client: client}
}

// putRequest is the "version" part of a Put.
type putRequest struct {
	ARK      string   `json:"ark"`
	LocalIDs []string `json:"local_ids"`
	Files    []File   `json:"files"`
	// Describing is Object.Describing.
	Describing []string `json:"describing,omitempty"`
}

// putReply is the service's answer to a Put.
type putReply struct {
	ARK     string    `json:"ark"`
	Number  int       `json:"number"`
	Changed bool      `json:"changed"`
	Created time.Time `json:"created"`
}

// Put sends obj in one streamed multipart POST; see [Store].
func (h *HTTP) Put(ctx context.Context, obj Object) (Version, error) {
	files, err := checkObject(obj)
	if err != nil {
		return Version{}, err
	}
	target := h.endpoint + "/objects"
	meta, err := json.Marshal(putRequest{ARK: obj.ARK, LocalIDs: obj.LocalIDs, Files: files, Describing: obj.Describing})
	if err != nil {
		return Version{}, fmt.Errorf("storage: put %s to %s: %w", obj.ARK, target, err)
	}
	// A source file that fails mid-stream cancels the request with the
	// reason, so the client stops retrying what cannot succeed.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	b := &bodies{boundary: multipart.NewWriter(io.Discard).Boundary(), meta: meta, files: files, fail: cancel}
	defer b.finish()
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, target, retryablehttp.ReaderFunc(b.open))
	if err != nil {
		return Version{}, fmt.Errorf("storage: put %s to %s: %w", obj.ARK, target, err)
	}
	req.Header.Set("Content-Type", "multipart/form-data; boundary="+b.boundary)
	req.Header.Set("Accept", "application/json")

	resp, err := h.client.Do(req)
	var src sourceError
	if errors.As(context.Cause(ctx), &src) {
		if err == nil {
			resp.Body.Close()
		}
		return Version{}, fmt.Errorf("storage: put %s to %s: %w", obj.ARK, target, src.err)
	}
	if err != nil {
		return Version{}, fmt.Errorf("storage: put %s to %s: %w", obj.ARK, target, err)
	}
	defer closeBody(resp)
	if resp.StatusCode/100 != 2 {
		return Version{}, answerError(resp, "put "+obj.ARK, target)
	}
	var r putReply
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&r); err != nil {
		return Version{}, fmt.Errorf("storage: put %s to %s: reading the answer: %w", obj.ARK, target, err)
	}
	if r.ARK != obj.ARK || r.Number < 1 {
		return Version{}, fmt.Errorf("storage: put %s to %s: answer names %q version %d", obj.ARK, target, r.ARK, r.Number)
	}
	v := Version{ARK: r.ARK, Number: r.Number, Created: r.Created, Changed: r.Changed, Files: slices.Clone(files),
		URL: h.objectURL(r.ARK)}
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
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return Version{}, fmt.Errorf("storage: latest of %s from %s: %w", ark, target, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		return Version{}, fmt.Errorf("storage: latest of %s from %s: %w", ark, target, err)
	}
	defer closeBody(resp)
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return Version{}, fmt.Errorf("storage: %s at %s: %w", ark, target, ErrNotFound)
	case resp.StatusCode/100 != 2:
		return Version{}, answerError(resp, "latest of "+ark, target)
	}
	var v Version
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&v); err != nil {
		return Version{}, fmt.Errorf("storage: latest of %s from %s: reading the answer: %w", ark, target, err)
	}
	if v.ARK != ark || v.Number < 1 {
		return Version{}, fmt.Errorf("storage: latest of %s from %s: answer names %q version %d", ark, target, v.ARK, v.Number)
	}
	v.Changed, v.URL = false, target
	slices.SortFunc(v.Files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	return v, nil
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

// answerError describes a non-2xx answer, with the first 200 bytes of its
// body; a 4xx one is marked refused.
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
