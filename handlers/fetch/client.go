package fetch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"net/url"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/ingestq/ingestq/internal/backoff"
	"github.com/ingestq/ingestq/internal/redact"
	"github.com/ingestq/ingestq/internal/stall"
)

// Config tunes a Client; zero fields take the defaults noted.
type Config struct {
	Attempts  int           // tries per request, default 5
	MinWait   time.Duration // backoff base, default 200ms
	MaxWait   time.Duration // longest backoff, default 10s
	Timeout   time.Duration // how long a request may move no byte (sending it, awaiting or reading its answer), default 60s
	PerHost   int           // concurrent requests per host across the Client, default 8
	AllowFile bool          // allow file:// URLs (local files); otherwise only http and https
	// A depositor's URL reaches only public addresses and the ranges in
	// Allow (loopback, private, the other special-purpose ranges);
	// link-local, cloud metadata, unspecified, broadcast and multicast
	// addresses never (reach.go). AnyAddress lifts this, for the
	// operator's own services (storage, inventory, callbacks).
	Allow      []netip.Prefix
	AnyAddress bool
	Logger     *slog.Logger // nil: no logging
}

// Defaults are the settings a zero Config field gets; the CLI's flags show
// them as theirs.
var Defaults = Config{Attempts: 5, MinWait: 200 * time.Millisecond, MaxWait: 10 * time.Second, Timeout: 60 * time.Second, PerHost: 8}

func (cfg Config) withDefaults() Config {
	if cfg.Attempts <= 0 {
		cfg.Attempts = Defaults.Attempts
	}
	if cfg.MinWait <= 0 {
		cfg.MinWait = Defaults.MinWait
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = Defaults.MaxWait
	}
	cfg.MaxWait = max(cfg.MaxWait, cfg.MinWait)
	if cfg.Timeout <= 0 {
		cfg.Timeout = Defaults.Timeout
	}
	if cfg.PerHost <= 0 {
		cfg.PerHost = Defaults.PerHost
	}
	return cfg
}

// Client downloads files and small documents. It is safe for concurrent use.
type Client struct {
	cfg Config
	lim *limiter
	rc  *retryablehttp.Client
}

// New returns a Client for cfg.
func New(cfg Config) *Client {
	cfg = cfg.withDefaults()
	lim := &limiter{base: stall.Transport(newTransport(cfg), cfg.Timeout), perHost: cfg.PerHost, sems: map[string]chan struct{}{},
		allow: cfg.Allow, guard: !cfg.AnyAddress}
	c := &Client{cfg: cfg, lim: lim}
	c.rc = c.retrying(cfg.Attempts, c.checkRetry)
	return c
}

// retrying is a retrying client over this Client's transport that sends a
// request at most tries times, as check decides.
func (c *Client) retrying(tries int, check retryablehttp.CheckRetry) *retryablehttp.Client {
	// No Logger: the library's lines cannot name the job a request is
	// for. The hooks log instead, through the request's context (WithLogger).
	return &retryablehttp.Client{
		HTTPClient:     &http.Client{Transport: c.lim},
		RetryWaitMin:   c.cfg.MinWait,
		RetryWaitMax:   c.cfg.MaxWait,
		RetryMax:       tries - 1,
		CheckRetry:     check,
		Backoff:        retryBackoff,
		ErrorHandler:   giveUp,
		PrepareRetry:   prepareRetry,
		RequestLogHook: c.logAttempt,
	}
}

// backEndTries is how many times a back end's request is sent: a storage
// or inventory service that hangs is found out after at most two stalls,
// as an S3 store is (the reactor's pause and next try do the rest), where
// the downloads' five tries kept a step five timeouts.
const backEndTries = 2

// BackEnd returns the retrying client of a back end's requests (a storage
// or inventory service): HTTP's, but sending a request at most twice.
func (c *Client) BackEnd() *retryablehttp.Client {
	return c.retrying(min(c.cfg.Attempts, backEndTries), c.checkBackEndRetry)
}

// checkBackEndRetry is checkRetry, but a busy answer whose Retry-After
// asks for a longer wait than the client's longest (MaxWait) ends the
// request (waitsLonger), for any request of a back end's.
func (c *Client) checkBackEndRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if se := waitsLonger(resp, c.cfg.MaxWait); se != nil {
		return false, se
	}
	return c.checkRetry(ctx, resp, err)
}

// waitsLonger is resp's busy answer (BusyStatus) when its Retry-After asks
// for a longer wait than d, else nil. Such an answer is not waited for in
// the client, holding the caller's worker, nor sooner than asked: the
// request ends with it, and the caller waits as long as asked, spending no
// attempt (a back end's step: reactor.Unavailable; a download's job:
// handlers).
func waitsLonger(resp *http.Response, d time.Duration) *StatusError {
	if resp == nil {
		return nil
	}
	if se := statusError(resp); se.Busy() && time.Until(se.RetryAt) > d {
		return se
	}
	return nil
}

// HTTP returns the underlying retrying client, for other packages' requests
// (they share the per-host bound and the stall timeout). Its hooks belong to
// this package: replacing them breaks Download.
func (c *Client) HTTP() *retryablehttp.Client { return c.rc }

// checkRetry is retryPolicy, logging each failure it retries. The busy
// answer that asks for any wait ends the request (waitsLonger) of a caller
// that waits for a busy server itself (WaitsForBusy: a download's, a
// batch's payload read): a depositor's server asking for 30 s or more
// (S3's SlowDown, a CDN's rate limit) was asked again within 10 s, its
// job's attempts spent in a minute, and ten servers asking for 3 s held
// the Downloading workers, every other job's download waiting.
func (c *Client) checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Value(waitsForBusyKey{}) != nil {
		if se := waitsLonger(resp, 0); se != nil {
			return false, se
		}
	}
	retry, err2 := retryPolicy(ctx, resp, err)
	if retry {
		c.logFailure(ctx, resp, err)
		if d, ok := ctx.Value(downloadKey{}).(*download); ok {
			d.failure = err // for the note of its next request (logAttempt)
			if err == nil {
				d.failure = statusError(resp)
			}
		}
	}
	return retry, err2
}

type waitsForBusyKey struct{}

// WaitsForBusy marks ctx's requests as those of a caller that waits for a
// busy server itself, as long as its Retry-After asks, so a busy answer
// with one ends the request at once (checkRetry). Download marks its own;
// a batch's payload read (handlers) was asked again within the client's
// longest wait, its batch's attempts spent in seconds, under a batch
// worker.
func WaitsForBusy(ctx context.Context) context.Context {
	return context.WithValue(ctx, waitsForBusyKey{}, true)
}

// retryPolicy retries network errors, stalls, cut bodies and retryable
// statuses, and stops on anything Permanent or local.
func retryPolicy(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if err != nil {
		if Permanent(err) {
			return false, err
		}
		var local *localError
		if errors.As(err, &local) {
			return false, err
		}
		// The library's policy knows which client errors (bad TLS
		// certificates, redirect loops) no retry can fix.
		return retryablehttp.DefaultRetryPolicy(ctx, resp, err)
	}
	return retryableStatus(resp.StatusCode), nil
}

// retryBackoff is exponential but never past max, with jitter so that many
// workers hit by one outage do not come back in step, and never sooner than
// a busy server's Retry-After asks (up to max). The jitter took 2 s asked
// down to 1–2 s.
func retryBackoff(lo, hi time.Duration, attempt int, resp *http.Response) time.Duration {
	d := retryablehttp.DefaultBackoff(lo, hi, attempt, nil)
	d = d/2 + rand.N(d/2+1)
	if resp != nil && BusyStatus(resp.StatusCode) {
		now := time.Now()
		d = backoff.NotBeforeAsked(now.Add(d), RetryAt(resp.Header, now), now, hi).Sub(now)
	}
	return d
}

// giveUp builds the error of a request that failed for good, counting the
// attempts, with the last cause; callers name the URL (failed).
func giveUp(resp *http.Response, err error, attempts int) (*http.Response, error) {
	if resp != nil {
		resp.Body.Close()
		if err == nil {
			err = statusError(resp)
		}
	}
	return nil, &triesError{n: attempts, err: err}
}

// prepareRetry lets a download set its Range for the next attempt.
func prepareRetry(req *http.Request) error {
	if d, ok := req.Context().Value(downloadKey{}).(*download); ok {
		// The header map is shared with the previous attempt's request.
		req.Header = req.Header.Clone()
		d.setRange(req.Header)
	}
	return nil
}

// parse checks that raw is a URL this client may fetch.
func (c *Client) parse(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, permanent(fmt.Errorf("bad URL: %s", redact.In(err.Error(), raw)))
	}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" {
			return nil, permanent(fmt.Errorf("bad URL %s: no host", shown(u)))
		}
		return u, nil
	case "file":
		if c.cfg.AllowFile {
			return u, nil
		}
	}
	return nil, fmt.Errorf("%s: %w", shown(u), ErrScheme)
}
