package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/hashicorp/go-retryablehttp"
)

// HTTP is an inventory behind an inventory service:
//
//	POST <endpoint>/records                       a Record as JSON; 2xx ok, 409 local id conflict
//	GET  <endpoint>/localids/<profile>/<local id> → {"ark": …}; 404 when none
//
// 5xx answers and network errors are retried by the client; other 4xx are
// refusals ([Refused]).
type HTTP struct {
	endpoint string
	client   *retryablehttp.Client
}

var _ Inventory = (*HTTP)(nil)

// NewHTTP returns an inventory speaking to endpoint through client (a
// default retrying client when nil).
func NewHTTP(endpoint string, client *retryablehttp.Client) *HTTP {
	if client == nil {
		client = retryablehttp.NewClient()
	}
	return &HTTP{endpoint: strings.TrimRight(endpoint, "/"), client: client}
}

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
		return fmt.Errorf("inventory: %s at %s: %w", what, target, err)
	}
	// A []byte body is replayed by the client on each retry.
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, target, body)
	if err != nil {
		return fmt.Errorf("inventory: %s at %s: %w", what, target, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		return fmt.Errorf("inventory: %s at %s: %w", what, target, err)
	}
	defer closeBody(resp)
	switch {
	case resp.StatusCode/100 == 2:
		return nil
	case resp.StatusCode == http.StatusConflict:
		return fmt.Errorf("inventory: %s at %s: %w: %q", what, target, ErrConflict, snippet(resp))
	}
	return answerError(resp, what, target)
}

// LookupLocalID asks the service which ARK localID maps to within profile.
func (h *HTTP) LookupLocalID(ctx context.Context, profile, localID string) (string, bool, error) {
	if err := checkLookup(profile, localID); err != nil {
		return "", false, err
	}
	target := h.endpoint + "/localids/" + url.PathEscape(profile) + "/" + url.PathEscape(localID)
	what := fmt.Sprintf("look up local id %q in profile %q", localID, profile)
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return "", false, fmt.Errorf("inventory: %s at %s: %w", what, target, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		return "", false, fmt.Errorf("inventory: %s at %s: %w", what, target, err)
	}
	defer closeBody(resp)
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return "", false, nil
	case resp.StatusCode/100 != 2:
		return "", false, answerError(resp, what, target)
	}
	var answer struct {
		ARK string `json:"ark"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&answer); err != nil {
		return "", false, fmt.Errorf("inventory: %s at %s: reading the answer: %w", what, target, err)
	}
	if answer.ARK == "" {
		return "", false, fmt.Errorf("inventory: %s at %s: the answer has no ark", what, target)
	}
	return answer.ARK, true, nil
}

// refusedError is a 4xx answer: the service understood and said no.
type refusedError struct {
	target string
	status string
	body   string
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("%s refused: %s: %q", e.target, e.status, e.body)
}

// Refused tells whether err is (or wraps) a refusal by the inventory
// service: a 4xx answer other than 409, which retrying will not change.
func Refused(err error) bool {
	var r *refusedError
	return errors.As(err, &r)
}

// answerError describes a non-2xx answer; a 4xx one is marked refused.
func answerError(resp *http.Response, what, target string) error {
	if resp.StatusCode/100 == 4 {
		return fmt.Errorf("inventory: %s: %w", what, &refusedError{target, resp.Status, snippet(resp)})
	}
	return fmt.Errorf("inventory: %s: %s answered %s: %q", what, target, resp.Status, snippet(resp))
}

// snippet is the first 200 bytes of an answer's body.
func snippet(resp *http.Response) string {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	return string(b)
}

// closeBody drains a little of the body so the connection can be reused.
func closeBody(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
}
