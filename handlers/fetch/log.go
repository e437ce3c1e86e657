package fetch

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/ingestq/ingestq/internal/redact"
)

type loggerKey struct{}

// WithLogger returns ctx carrying log: the requests made with ctx log
// through it instead of the Client's Logger. The pipeline gives each job's
// steps log.With("job", jid), so that a failed request names its job.
func WithLogger(ctx context.Context, log *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey{}, log)
}

// logger is the logger of a request made with ctx: its own, else the
// Client's, else one that drops everything.
func (c *Client) logger(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok && l != nil {
		return l
	}
	if c.cfg.Logger != nil {
		return c.cfg.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// Retry is a download's request asked again in the client after a
// failure: the Request-th of at most Of, after Err.
type Retry struct {
	Request, Of int
	Err         error
}

type retryNoteKey struct{}

// WithRetryNote returns ctx whose downloads (Download) call note each time
// the client asks their request again, as it sends it: a server that
// stalls mid-body costs a Timeout per request, five by default, and only
// the log said why the job stood still. note runs in the goroutine that
// called Download.
func WithRetryNote(ctx context.Context, note func(Retry)) context.Context {
	return context.WithValue(ctx, retryNoteKey{}, note)
}

// logAttempt is the retrying client's RequestLogHook: each attempt, at
// debug, through the request's logger; a download's request asked again
// is also its caller's note (WithRetryNote).
func (c *Client) logAttempt(_ retryablehttp.Logger, req *http.Request, retry int) {
	ctx := req.Context()
	c.logger(ctx).Debug("http: request", "method", req.Method, "url", shown(req.URL), "attempt", retry+1)
	note, _ := ctx.Value(retryNoteKey{}).(func(Retry))
	if d, ok := ctx.Value(downloadKey{}).(*download); ok && note != nil && retry > 0 && d.failure != nil {
		note(Retry{Request: retry + 1, Of: c.cfg.Attempts, Err: d.failure})
	}
}

// logFailure logs, through the request's logger, an attempt that failed in
// a way worth retrying: the client tries again while it has attempts left.
// Other failures are the caller's error to report.
func (c *Client) logFailure(ctx context.Context, resp *http.Response, err error) {
	var args []any
	var ue *url.Error
	switch {
	case resp != nil: // a status to retry, or a body cut short (err)
		args = []any{"url", shown(resp.Request.URL), "status", resp.Status}
	case errors.As(err, &ue):
		args, err = []any{"url", redact.Location(ue.URL)}, ue.Err // ue's own text repeats the URL
	}
	if err != nil {
		args = append(args, "err", err)
	}
	c.logger(ctx).Warn("http: request failed", args...)
}

// shown is u as messages and logs show it: its password and any secret
// query value (a presigned URL's signature) masked, as every location
// ingestq shows (internal/redact); url.URL.Redacted hides the password only.
func shown(u *url.URL) string { return redact.Location(u.String()) }
