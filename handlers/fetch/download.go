package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/ingestq/ingestq/internal/durable"
)

// PartFile is where Download writes dest until it is verified: what a
// caller removes to drop a download rather than let the next call resume it.
func PartFile(dest string) string { return dest + ".part" }

// Download streams url into dest through PartFile(dest), checking size and
// digest while the bytes arrive (and computing the SHA-256 in the same
// pass, for the Result), then fsyncs and renames the file to dest
// and fsyncs dest's folder (unless want.DeferSync: the caller syncs both).
//
// A cut or stalled transfer resumes with a Range request from the .part
// file's length, also when the .part was left by an earlier call; the bytes
// already there are hashed first so the digest covers the whole file. If a
// .part from an earlier call turns out wrong, the file is fetched once more
// from zero, since that .part may be of an older version of the file.
//
// A size or digest mismatch removes the .part and returns a *MismatchError.
// Other failures leave the .part for the next call to resume. progress, if
// not nil, is called with byte counts as they arrive (negative when bytes
// are thrown away to start over): on success they add up to the file's size.
func (c *Client) Download(ctx context.Context, rawURL, dest string, want Want, progress func(delta int64)) (Result, error) {
	u, err := c.parse(rawURL)
	if err != nil {
		return Result{}, fmt.Errorf("download: %w", err)
	}
	res, old, err := c.download(ctx, u, dest, want, progress)
	var m *MismatchError
	if old && errors.As(err, &m) {
		res, _, err = c.download(ctx, u, dest, want, progress)
	}
	if err != nil {
		err = failed("download", u, err)
	}
	return res, err
}

// download is one transfer into a .part file, across the attempts of a
// request. Only the goroutine running Download touches it.
type download struct {
	url       string // redacted, for messages
	want      Want
	f         *os.File
	h         *digester
	progress  func(int64)
	offset    int64              // bytes in f, all of them hashed
	wb        *durable.Writeback // of f's bytes from offset on
	resumed   bool               // the bytes in f did not all come from one response from zero
	validator string             // ETag or Last-Modified of the first response, for If-Range
	failure   error              // why the client last asked the request again (checkRetry)
}

type downloadKey struct{}

// download makes one pass; old tells whether it began from a .part left by
// an earlier call.
func (c *Client) download(ctx context.Context, u *url.URL, dest string, want Want, progress func(int64)) (Result, bool, error) {
	h, err := newDigester(want)
	if err != nil {
		return Result{}, false, err
	}
	part := PartFile(dest)
	f, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return Result{}, false, &localError{err}
	}
	defer f.Close() // again after the checked Close below: harmless
	d := &download{url: shown(u), want: want, f: f, h: h, progress: progress}
	if err := d.rehash(); err != nil {
		return Result{}, false, err
	}
	old := d.offset > 0

	switch {
	case old && d.offset == want.Size:
		d.resumed = true // complete already: a killed process did not get to rename it
	case u.Scheme == "file":
		err = d.copyLocal(ctx, u)
	default:
		err = c.get(ctx, u, d)
	}
	res := Result{}
	if err == nil {
		res, err = check(d.url, want, d.offset, h)
		res.Resumed = d.resumed
	}
	var m *MismatchError
	if errors.As(err, &m) {
		// Start clean next time: these bytes are known bad.
		f.Close()
		d.report(-d.offset)
		if rmErr := os.Remove(part); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
			err = errors.Join(err, &localError{rmErr})
		}
	}
	if err != nil {
		return Result{}, old, err
	}
	if err := commit(f, part, dest, !want.DeferSync); err != nil {
		return Result{}, old, &localError{err}
	}
	return res, old, nil
}

// rehash feeds the bytes of an existing .part to the hasher, dropping them
// when there are more than the file can have.
func (d *download) rehash() error {
	n, err := copyBuffered(d.h, d.f)
	if err != nil {
		return &localError{fmt.Errorf("reading %s: %w", d.f.Name(), err)}
	}
	d.offset = n
	d.wb = durable.NewWriteback(d.f, n)
	d.report(n)
	if d.want.Size >= 0 && n > d.want.Size {
		return d.restart()
	}
	return nil
}

// restart throws away what was received, to read the file from zero.
func (d *download) restart() error {
	if err := d.f.Truncate(0); err != nil {
		return &localError{err}
	}
	if _, err := d.f.Seek(0, io.SeekStart); err != nil {
		return &localError{err}
	}
	d.h.Reset()
	d.report(-d.offset)
	d.offset, d.resumed = 0, false
	d.wb = durable.NewWriteback(d.f, 0)
	return nil
}

func (d *download) report(delta int64) {
	if d.progress != nil && delta != 0 {
		d.progress(delta)
	}
}

// copy appends r to the .part file and the hasher, reading at most one byte
// past the wanted size: enough to know the server sends too much.
func (d *download) copy(r io.Reader) error {
	if d.want.Size >= 0 {
		r = io.LimitReader(r, d.want.Size-d.offset+1)
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := d.f.Write(buf[:n]); werr != nil {
				return &localError{werr}
			}
			d.h.Write(buf[:n])
			d.offset += int64(n)
			d.wb.Write(buf[:n]) // a big file's disk writes start while it is hashed (decision 221)
			d.report(int64(n))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return &cutError{at: d.offset, err: err}
		}
	}
	if d.want.Size >= 0 && d.offset > d.want.Size {
		return d.sizeMismatch("more than " + strconv.FormatInt(d.want.Size, 10))
	}
	return nil
}

// expectTotal fails early when the source announces a size other than the
// one wanted (total -1: not announced); by names the announcement ("by
// its Content-Length"): no byte was read, and a server whose length lies
// sent fewer, so "got N" alone read as N bytes received.
func (d *download) expectTotal(total int64, by string) error {
	if total >= 0 && d.want.Size >= 0 && total != d.want.Size {
		return d.sizeMismatch(strconv.FormatInt(total, 10) + " " + by)
	}
	return nil
}

func (d *download) sizeMismatch(got string) error {
	return &MismatchError{URL: d.url, What: "size", Want: strconv.FormatInt(d.want.Size, 10), Got: got}
}

// commit makes the finished .part durable and puts it at dest; sync false
// leaves both the data and the rename to be made durable by the caller.
func commit(f *os.File, part, dest string, sync bool) error {
	if sync {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(part, dest); err != nil {
		return err
	}
	if !sync {
		return nil
	}
	// The rename is durable only once the directory is synced; failing
	// that, the data itself is safe.
	_ = durable.SyncDir(filepath.Dir(dest))
	return nil
}

// get runs the request whose response handler streams into d; the client
// retries the handler's errors, and prepareRetry sets the Range to go on.
// Its job waits for a busy server itself (WaitsForBusy).
func (c *Client) get(ctx context.Context, u *url.URL, d *download) error {
	ctx = context.WithValue(WaitsForBusy(ctx), downloadKey{}, d)
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return permanent(err)
	}
	// Digests are of the bytes as stored, not of a compressed transfer.
	req.Header.Set("Accept-Encoding", "identity")
	d.setRange(req.Header)
	req.SetResponseHandler(d.handle)
	resp, err := c.rc.Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}
