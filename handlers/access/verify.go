package access

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/ingestq/ingestq/internal/ctxio"
	"github.com/ingestq/ingestq/reactor/queue"
)

// verify reads a written package back from its file: its SHA-256 must be
// the one computed while it was written, and it must hold exactly the
// entries, in order, with their sizes (a tar.gz, read once for both, also
// with their digests; a zip's entries are read from its central directory,
// so its file is read once too).
func verify(ctx context.Context, path, format, sum string, entries []entry) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	check := &entryCheck{want: entries}
	switch format {
	case queue.FormatZip:
		err = verifyZip(ctx, f, sum, check)
	case queue.FormatTarGz:
		err = verifyTarGz(ctx, f, sum, check)
	default:
		err = fmt.Errorf("format %q", format)
	}
	if err == nil {
		err = check.done()
	}
	if err != nil {
		return fmt.Errorf("verify package %s: %w", path, err)
	}
	return nil
}

// entryCheck compares a package's entries, as read, with the ones written.
type entryCheck struct {
	want []entry
	i    int
}

// next checks the next entry: its name and size, and, when r is given,
// its bytes' digest.
func (c *entryCheck) next(ctx context.Context, name string, size int64, r io.Reader) error {
	if c.i >= len(c.want) {
		return fmt.Errorf("entry %q was not written", name)
	}
	e := c.want[c.i]
	c.i++
	sum := e.file.SHA256
	if r != nil {
		var n int64
		var err error
		if n, sum, err = ctxio.CopySHA256(ctx, io.Discard, r); err != nil {
			return fmt.Errorf("entry %q: %w", name, err)
		}
		size = n
	}
	if name != e.name || size != e.file.Size || sum != e.file.SHA256 {
		return fmt.Errorf("entry %d is %q, %d bytes with sha256 %s; written: %q, %d bytes with sha256 %s",
			c.i, name, size, sum, e.name, e.file.Size, e.file.SHA256)
	}
	return nil
}

func (c *entryCheck) done() error {
	if c.i != len(c.want) {
		return fmt.Errorf("holds %d entries, %d were written", c.i, len(c.want))
	}
	return nil
}

func verifyZip(ctx context.Context, f *os.File, sum string, check *entryCheck) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if err := sameSum(ctx, f, sum); err != nil {
		return err
	}
	zr, err := zip.NewReader(f, st.Size())
	if err != nil {
		return err
	}
	for _, zf := range zr.File {
		if err := check.next(ctx, zf.Name, int64(zf.UncompressedSize64), nil); err != nil {
			return err
		}
	}
	return nil
}

// verifyTarGz reads the file once: hashed as read, and unpacked.
func verifyTarGz(ctx context.Context, f *os.File, sum string, check *entryCheck) error {
	h := sha256.New()
	raw := io.TeeReader(f, h)
	gz, err := gzip.NewReader(raw)
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if err := check.next(ctx, hdr.Name, hdr.Size, tr); err != nil {
			return err
		}
	}
	if _, err := io.Copy(io.Discard, raw); err != nil { // the rest: the hash covers the whole file
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return fmt.Errorf("reads with sha256 %s; written with %s", got, sum)
	}
	return nil
}

// sameSum hashes the whole file and compares.
func sameSum(ctx context.Context, f *os.File, sum string) error {
	_, got, err := ctxio.CopySHA256(ctx, io.Discard, io.NewSectionReader(f, 0, 1<<62))
	if err != nil {
		return err
	}
	if got != sum {
		return fmt.Errorf("reads with sha256 %s; written with %s", got, sum)
	}
	return nil
}
