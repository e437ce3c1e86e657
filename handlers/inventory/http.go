package inventory

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/ingestq/ingestq/internal/redact"
)

// HTTP is an inventory behind an inventory service:
//
//	POST <endpoint>/records                       a Record as JSON; 2xx ok, 409 local id conflict
//	GET  <endpoint>/localids/<profile>/<local id> → {"ark": …}; 404 when none
//	GET  <endpoint>/objects/<ark>                 → an ObjectDetail; 404 when none
//	GET  <endpoint>/objects?after=<ark>&limit=<n> → a page of ObjectRows (JSON array)
//
// 5xx answers and network errors are retried by the client; 4xx answers
// other than 409 are refusals ([Refused]).
type HTTP struct {
	endpoint string
	shown    string // endpoint as messages name it, its password masked
	client   *retryablehttp.Client
}

var _ Inventory = (*HTTP)(nil)

// NewHTTP returns an inventory speaking to endpoint through client (a
// default retrying client when nil).
func NewHTTP(endpoint string, client *retryablehttp.Client) *HTTP {
	if client == nil {
		client = retryablehttp.NewClient()
	}
	endpoint = strings.TrimRight(endpoint, "/")
	return &HTTP{endpoint: endpoint, shown: redact.Location(endpoint), client: client}
}

// at is target, a URL under the endpoint, as messages name it: only the
// endpoint holds a secret. Redacting target whole took an "@" in its path
// (a local id may hold one) for a password's end, hiding the service's host.
func (h *HTTP) at(target string) string { return h.shown + strings.TrimPrefix(target, h.endpoint) }

// Record posts r to the service; see [Inventory].
func (h *HTTP) Record(ctx context.Context, r Record) error {
	r, err := normalize(r)
	if err != nil {
		return err
	}
	target := h.endpoint + "/records"
	what := fmt.Sprintf("record %s version %d", r.ARK, r.Version)
	body, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("inventory: %s at %s: %w", what, h.at(target), err)
	}
	// A []byte body is replayed by the client on each retry.
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, target, body)
	if err != nil {
		return fmt.Errorf("inventory: %s at %s: %w", what, h.at(target), err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		return fmt.Errorf("inventory: %s at %s: %w", what, h.at(target), err)
	}
	defer closeBody(resp)
	if resp.StatusCode/100 == 2 {
		return nil
	}
	return answered(resp, what, h.at(target))
}

// LookupLocalID asks the service which ARK localID maps to within profile.
func (h *HTTP) LookupLocalID(ctx context.Context, profile, localID string) (string, bool, error) {
	if err := checkLookup(profile, localID); err != nil {
		return "", false, err
	}
	target := h.endpoint + "/localids/" + url.PathEscape(profile) + "/" + url.PathEscape(localID)
	what := fmt.Sprintf("look up local id %q in profile %q", localID, profile)
	var answer struct {
		ARK string `json:"ark"`
	}
	found, err := h.get(ctx, target, what, 1<<20, &answer)
	if err != nil || !found {
		return "", false, err
	}
	if answer.ARK == "" {
		return "", false, fmt.Errorf("inventory: %s at %s: the answer has no ark", what, h.at(target))
	}
	return answer.ARK, true, nil
}

// maxObjectAnswer bounds an object's detail: many versions of many files,
// each with its events, but not more than this.
const maxObjectAnswer = 256 << 20

// Object asks the service for ark's object row and versions.
func (h *HTTP) Object(ctx context.Context, ark string) (ObjectDetail, error) {
	return h.object(ctx, ark, "", "object")
}

// Latest asks the service for ark's object with its latest version alone
// (?versions=latest); a service that ignores the parameter answers every
// version, and the last is taken.
func (h *HTTP) Latest(ctx context.Context, ark string) (Record, error) {
	d, err := h.object(ctx, ark, "?versions=latest", "latest version of")
	if err == nil && len(d.Versions) == 0 {
		err = fmt.Errorf("inventory: latest version of %s at %s: the answer has no version", ark, h.shown)
	}
	if err != nil {
		return Record{}, err
	}
	return d.Versions[len(d.Versions)-1], nil
}

// object asks the service for ark's object, query added to its URL; what
// names the question in messages.
func (h *HTTP) object(ctx context.Context, ark, query, what string) (ObjectDetail, error) {
	if err := checkARK(ark); err != nil {
		return ObjectDetail{}, err
	}
	target := h.endpoint + "/objects/" + url.PathEscape(ark) + query
	var d ObjectDetail
	found, err := h.get(ctx, target, what+" "+ark, maxObjectAnswer, &d)
	switch {
	case err != nil:
		return ObjectDetail{}, err
	case !found:
		return ObjectDetail{}, notFound(ark)
	case d.Object.ARK != ark:
		return ObjectDetail{}, fmt.Errorf("inventory: %s %s at %s: the answer is of %q", what, ark, h.at(target), d.Object.ARK)
	}
	for i, r := range d.Versions {
		d.Versions[i] = canonical(r)
	}
	return d, nil
}

// maxPageAnswer bounds a page of object rows: a server gives at most
// [MaxPage] rows, each a few hundred bytes, more with many local ids.
const maxPageAnswer = 64 << 20

// List asks the service for a page of object rows; see [Inventory]. A
// service gives at most [MaxPage] rows a page, fewer than limit when limit
// is larger. A page out of order, or not after after, is an error rather
// than a walk that never ends.
func (h *HTTP) List(ctx context.Context, after string, limit int) ([]ObjectRow, error) {
	if err := checkList(after, limit); err != nil {
		return nil, err
	}
	target := h.endpoint + "/objects?" + url.Values{"after": {after}, "limit": {strconv.Itoa(limit)}}.Encode()
	what := fmt.Sprintf("list objects after %q", after)
	var page []ObjectRow
	found, err := h.get(ctx, target, what, maxPageAnswer, &page)
	switch {
	case err != nil:
		return nil, err
	case !found:
		return nil, fmt.Errorf("inventory: %s at %s: not found: the service lists no objects (an older one?)", what, h.at(target))
	case len(page) > limit:
		return nil, fmt.Errorf("inventory: %s at %s: the answer has %d objects, more than the limit %d", what, h.at(target), len(page), limit)
	}
	prev := after
	for _, o := range page {
		if o.ARK <= prev {
			return nil, fmt.Errorf("inventory: %s at %s: the answer lists %q after %q: not in ARK order", what, h.at(target), o.ARK, prev)
		}
		prev = o.ARK
	}
	return page, nil
}

// get decodes the JSON answer to a GET of target into v; found is false on
// a 404.
func (h *HTTP) get(ctx context.Context, target, what string, limit int64, v any) (found bool, err error) {
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return false, fmt.Errorf("inventory: %s at %s: %w", what, h.at(target), err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		return false, fmt.Errorf("inventory: %s at %s: %w", what, h.at(target), err)
	}
	defer closeBody(resp)
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return false, nil
	case resp.StatusCode/100 != 2:
		return false, answered(resp, what, h.at(target))
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, limit)).Decode(v); err != nil {
		return false, fmt.Errorf("inventory: %s at %s: reading the answer: %w", what, h.at(target), err)
	}
	return true, nil
}

// Close releases nothing: the client belongs to the caller.
func (h *HTTP) Close() error { return nil }

// answerError is a non-2xx answer. A 4xx other than 409 is a refusal:
// the service understood and said no; a 409 is [ErrConflict], a 422
// [ErrMismatch] and a 400 [ErrInvalid], as [NewServer] answers them.
type answerError struct {
	target, status, body string
	kind                 error // what the answer means, when it is known
	refused              bool
}

func (e *answerError) Error() string {
	verb := "answered"
	if e.refused {
		verb = "refused"
	}
	return fmt.Sprintf("%s %s %s: %s", e.target, verb, e.status, e.body)
}

func (e *answerError) Unwrap() error { return e.kind }

// answered describes a non-2xx answer to what from target, as messages
// name it (HTTP.at).
func answered(resp *http.Response, what, target string) error {
	e := &answerError{target: target, status: resp.Status, body: snippet(resp), refused: resp.StatusCode/100 == 4}
	switch resp.StatusCode {
	case http.StatusConflict:
		e.kind, e.refused = ErrConflict, false
	case http.StatusUnprocessableEntity:
		e.kind = ErrMismatch
	case http.StatusBadRequest:
		e.kind = ErrInvalid
	}
	return fmt.Errorf("inventory: %s: %w", what, e)
}

// snippet is the start of an answer's body, on one line (quoted when it
// has control characters or is not UTF-8).
func snippet(resp *http.Response) string {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	s := strings.TrimSpace(string(b))
	if !utf8.ValidString(s) || strings.ContainsFunc(s, unicode.IsControl) {
		return strconv.Quote(s)
	}
	return s
}

// closeBody drains a little of the body so the connection can be reused.
func closeBody(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
}
