package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"

	"github.com/ingestq/ingestq/handlers/internal/plainfile"
	"github.com/ingestq/ingestq/internal/ctxio"
)

// localPath is the file a file:// URL names; only local hosts are allowed.
func localPath(u *url.URL) (string, error) {
	if u.Host != "" && u.Host != "localhost" {
		return "", permanent(fmt.Errorf("file URL names host %q", u.Host))
	}
	p := u.Path
	if p == "" {
		p = u.Opaque // file:relative/path
	}
	if p == "" {
		return "", permanent(errors.New("file URL without a path"))
	}
	return filepath.FromSlash(p), nil
}

// openLocal opens the file of u, failing permanently when it is missing or
// no plain file (plainfile.OpenFollowing): a folder, a pipe, a socket, a
// device. A pipe without a writer held the step for good, in an open no
// context ends; a device such as /dev/zero was read without end.
func openLocal(u *url.URL) (*os.File, int64, error) {
	path, err := localPath(u)
	if err != nil {
		return nil, 0, err
	}
	f, st, err := plainfile.OpenFollowing(path)
	if errors.Is(err, plainfile.ErrNotPlain) {
		return nil, 0, permanent(err)
	}
	if err != nil {
		return nil, 0, localOpenError(err)
	}
	return f, st.Size(), nil
}

// copyLocal is Download's transfer for file:// URLs: the same .part, resume
// and checks as over HTTP, with a seek in place of a Range.
func (d *download) copyLocal(ctx context.Context, u *url.URL) error {
	src, size, err := openLocal(u)
	if err != nil {
		return err
	}
	defer src.Close()
	if err := d.expectTotal(size, "by the file's size"); err != nil {
		return err
	}
	if d.offset > size {
		if err := d.restart(); err != nil {
			return err
		}
	}
	if d.offset > 0 {
		if _, err := src.Seek(d.offset, io.SeekStart); err != nil {
			return err
		}
		d.resumed = true
	}
	return d.copy(ctxio.Reader(ctx, src))
}

// fetchLocal reads the file of u, at most limit bytes: whole, or its head.
func fetchLocal(u *url.URL, limit int64, whole bool) ([]byte, error) {
	f, size, err := openLocal(u)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if !whole {
		return io.ReadAll(io.LimitReader(f, limit))
	}
	b, err := plainfile.ReadOpen(f, size, limit)
	if errors.As(err, new(*plainfile.TooLongError)) {
		err = fmt.Errorf("%w: %w", err, ErrTooLarge)
	}
	return b, err
}

// headLocal is the size of the file of u, or -1.
func headLocal(u *url.URL) int64 {
	f, size, err := openLocal(u)
	if err != nil {
		return -1
	}
	f.Close()
	return size
}
