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

// logAttempt is the retrying client's RequestLogHook: each attempt, at
// debug, through the request's logger.
func (c *Client) logAttempt(_ retryablehttp.Logger, req *http.Request, retry int) {
	c.logger(req.Context()).Debug("http: request", "method", req.Method, "url", shown(req.URL), "attempt", retry+1)
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
