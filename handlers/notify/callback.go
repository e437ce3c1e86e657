package notify

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

	"github.com/ingestq/ingestq/handlers/fetch"
	"github.com/ingestq/ingestq/internal/redact"
)

// maxBodyShown is how much of a failed reply goes into the error: enough
// for a server's one-line reason, not a whole HTML error page.
const maxBodyShown = 200

// StatusError is a callback answered with a non-2xx status after the
// client's retries.
type StatusError struct {
	URL        string // with any password redacted
	StatusCode int
	Status     string // e.g. "500 Internal Server Error"
	Attempts   int
	Body       string // the first maxBodyShown bytes
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("callback %s: HTTP %s", e.URL, e.Status)
	if e.Attempts > 1 {
		s += fmt.Sprintf(" (%d requests)", e.Attempts)
	}
	return s + fmt.Sprintf(", body %q", e.Body)
}

// Callback POSTs payload as JSON to rawURL through client, which retries as
// it is configured to (by default 5xx, 429 and connection errors). A 2xx
// reply is success; any other final status is a *StatusError; a transport
// failure is a *fetch.RequestError. Each names the URL once.
func Callback(ctx context.Context, client *retryablehttp.Client, rawURL string, payload any) error {
	shown := redact.Location(rawURL)
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("callback: bad URL: %s", redact.In(err.Error(), rawURL))
	}
	if s := strings.ToLower(u.Scheme); (s != "http" && s != "https") || u.Host == "" {
		return fmt.Errorf("callback %s: not an http(s) URL", shown)
	}
	if client == nil {
		return fmt.Errorf("callback %s: no HTTP client", shown)
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("callback %s: encode payload: %w", shown, err)
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, rawURL, body)
	if err != nil {
		return fmt.Errorf("callback %s: %w", shown, err)
	}
	req.Header.Set("Content-Type", "application/json")

	attempts := 0
	resp, err := withLastResponse(client, &attempts).Do(req)
	if err != nil {
		if resp != nil {
			resp.Body.Close()
		}
		return &fetch.RequestError{Op: "callback", URL: shown, Requests: attempts, Err: err}
	}
	defer resp.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(resp.Body, maxBodyShown))
	// Read a little more so the connection can be reused; a huge body is
	// not worth waiting for.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return nil
	}
	return &StatusError{URL: shown, StatusCode: resp.StatusCode, Status: resp.Status, Attempts: attempts, Body: string(head)}
}

// Permanent tells whether a Callback error is one that no retry can fix: a
// bad URL, a payload that cannot be encoded, or an answer that refuses it
// (a 4xx status other than 408, 425 and 429). A 5xx status, a 408, 425 or
// 429, a network error or no answer in time may pass: the step is tried
// again.
func Permanent(err error) bool {
	var se *StatusError
	var re *fetch.RequestError
	switch {
	case err == nil:
		return false
	case errors.As(err, &se):
		return fetch.Permanent(&fetch.StatusError{URL: se.URL, Code: se.StatusCode})
	case errors.As(err, &re):
		return fetch.Permanent(re.Err)
	}
	return true // Callback's own: a bad URL, no client, an unencodable payload
}

// withLastResponse copies client's settings into a new client whose error
// handler hands back the final response, which the default handler would
// discard with its status and body, and which counts the attempts. The
// caller's client is not modified, so it may be shared between goroutines.
func withLastResponse(client *retryablehttp.Client, attempts *int) *retryablehttp.Client {
	hook := client.RequestLogHook
	c := &retryablehttp.Client{
		HTTPClient:   client.HTTPClient,
		Logger:       client.Logger,
		RetryWaitMin: client.RetryWaitMin,
		RetryWaitMax: client.RetryWaitMax,
		RetryMax:     client.RetryMax,
		RequestLogHook: func(l retryablehttp.Logger, r *http.Request, retry int) {
			*attempts = retry + 1
			if hook != nil {
				hook(l, r, retry)
			}
		},
		ResponseLogHook: client.ResponseLogHook,
		CheckRetry:      client.CheckRetry,
		Backoff:         client.Backoff,
		PrepareRetry:    client.PrepareRetry,
		ErrorHandler:    retryablehttp.PassthroughErrorHandler,
	}
	// A zero Client (not from NewClient) lacks these, and Do needs them.
	if c.HTTPClient == nil {
		c.HTTPClient = http.DefaultClient
	}
	if c.CheckRetry == nil {
		c.CheckRetry = retryablehttp.DefaultRetryPolicy
	}
	if c.Backoff == nil {
		c.Backoff = retryablehttp.DefaultBackoff
	}
	return c
}
