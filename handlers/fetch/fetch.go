package fetch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/hashicorp/go-retryablehttp"
)

// Head returns the size of url from a HEAD request's Content-Length, or -1
// when it cannot tell (no length, a status other than 2xx, any failure):
// an estimate must never fail because of a HEAD. Only a URL this client may
// not fetch is an error.
func (c *Client) Head(ctx context.Context, rawURL string) (int64, error) {
	u, err := c.parse(rawURL)
	if err != nil {
		return -1, fmt.Errorf("head: %w", err)
	}
	if u.Scheme == "file" {
		return headLocal(u), nil
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodHead, u.String(), nil)
	if err != nil {
		return -1, nil
	}
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := c.rc.Do(req)
	if err != nil {
		c.logger(ctx).Debug("HEAD gave no size", "url", shown(u), "err", err)
		return -1, nil
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		c.logger(ctx).Debug("HEAD gave no size", "url", shown(u), "status", resp.StatusCode)
		return -1, nil
	}
	return resp.ContentLength, nil
}

// Fetch reads a small document (a manifest) whole, failing with an error
// wrapping ErrTooLarge past limit bytes.
func (c *Client) Fetch(ctx context.Context, rawURL string, limit int64) ([]byte, error) {
	return c.read(ctx, rawURL, limit, true)
}

// Peek reads the first n bytes of a document (fewer if it is shorter), to
// recognise what it is. A longer document is not an error, and only its
// first n bytes are asked for (a Range request, which a server may ignore).
func (c *Client) Peek(ctx context.Context, rawURL string, n int64) ([]byte, error) {
	return c.read(ctx, rawURL, n, false)
}

// read reads a document up to limit bytes: the whole of it, or its head.
func (c *Client) read(ctx context.Context, rawURL string, limit int64, whole bool) ([]byte, error) {
	u, err := c.parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("fetch: %w", err)
	}
	if limit < 0 {
		return nil, permanent(fmt.Errorf("fetch %s: negative limit %d", shown(u), limit))
	}
	var b []byte
	if u.Scheme == "file" {
		b, err = fetchLocal(u, limit, whole)
	} else {
		b, err = c.readHTTP(ctx, u, limit, whole)
	}
	if err != nil {
		return nil, failed("fetch", u, err)
	}
	return b, nil
}

// readHTTP is read over HTTP; its errors do not name the URL (read does).
func (c *Client) readHTTP(ctx context.Context, u *url.URL, limit int64, whole bool) ([]byte, error) {
	var buf bytes.Buffer
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, permanent(err)
	}
	if !whole && limit > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=0-%d", limit-1))
	}
	req.SetResponseHandler(func(resp *http.Response) error {
		defer resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			return &StatusError{URL: shown(u), Code: resp.StatusCode}
		}
		if !whole {
			buf.Reset()
			if _, err := buf.ReadFrom(io.LimitReader(resp.Body, limit)); err != nil {
				return &cutError{at: int64(buf.Len()), err: err}
			}
			return nil
		}
		if resp.ContentLength > limit {
			return fmt.Errorf("%d bytes, more than %d: %w", resp.ContentLength, limit, ErrTooLarge)
		}
		buf.Reset() // a retry reads the document from the start
		if _, err := buf.ReadFrom(io.LimitReader(resp.Body, limit+1)); err != nil {
			return &cutError{at: int64(buf.Len()), err: err}
		}
		if int64(buf.Len()) > limit {
			return fmt.Errorf("more than %d bytes: %w", limit, ErrTooLarge)
		}
		return nil
	})
	resp, err := c.rc.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	return buf.Bytes(), nil
}
