package access

import (
	"archive/tar"
	"archive/zip"
	"cmp"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/internal/ctxio"
	"github.com/ingestq/ingestq/reactor/queue"
)

// archiver writes a package's entries one after the other, each streamed
// from storage: nothing is held in memory but the copy buffer.
type archiver interface {
	// next starts an entry; its bytes are then written to the writer.
	next(e entry) (io.Writer, error)
	close() error
}

// newArchiver writes a package of format to w. A zip stores its files as
// they are (decision: preserved files are mostly compressed already, and
// Store keeps assembly at disk speed); a tar.gz compresses at gzip's
// fastest level for the same reason.
func newArchiver(format string, w io.Writer) (archiver, error) {
	switch format {
	case queue.FormatZip:
		return &zipArchiver{zw: zip.NewWriter(w)}, nil
	case queue.FormatTarGz:
		gz, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
		if err != nil {
			return nil, err
		}
		return &tarArchiver{gz: gz, tw: tar.NewWriter(gz)}, nil
	}
	return nil, fmt.Errorf("format %q: want %s or %s", format, queue.FormatZip, queue.FormatTarGz)
}

type zipArchiver struct{ zw *zip.Writer }

func (z *zipArchiver) next(e entry) (io.Writer, error) {
	return z.zw.CreateHeader(&zip.FileHeader{Name: e.name, Method: zip.Store, Modified: e.modified})
}

func (z *zipArchiver) close() error { return z.zw.Close() }

type tarArchiver struct {
	gz *gzip.Writer
	tw *tar.Writer
}

func (t *tarArchiver) next(e entry) (io.Writer, error) {
	h := &tar.Header{Typeflag: tar.TypeReg, Name: e.name, Size: e.file.Size, Mode: 0o644, ModTime: e.modified, Format: tar.FormatPAX}
	if err := t.tw.WriteHeader(h); err != nil {
		return nil, err
	}
	return t.tw, nil
}

func (t *tarArchiver) close() error {
	if err := t.tw.Close(); err != nil {
		return err
	}
	return t.gz.Close()
}

// fixityError is a stored file whose bytes are not the ones recorded:
// assembly stops rather than hand out damaged content.
type fixityError struct {
	ark      string
	version  int
	name     string
	size     int64
	sha256   string
	wantSize int64
	want     string
	copy     string // where it was read (storage.Locator); "" when storage does not say
	ref      string // the request (Assemble sets it)
}

// Error says what was read, from which copy, and what to do: the audit
// checks every copy, and the request is assembled again once the file is
// restored.
func (e *fixityError) Error() string {
	read := ""
	if e.copy != "" {
		read = " (the copy read: " + e.copy + ")"
	}
	return fmt.Sprintf("stored file %q of %s version %d reads as %d bytes with sha256 %s; recorded: %d bytes with sha256 %s%s; "+
		"`ingestq audit %s` checks every stored copy of the object: restore this file from a sound copy, then `ingestq access requeue %s`",
		e.name, e.ark, e.version, e.size, e.sha256, e.wantSize, e.want, read, e.ark, cmp.Or(e.ref, "REF"))
}

// unservedError is a stored file that storage says it does not have, or
// refuses to give (a storage service's 4xx): no retry gives its bytes.
type unservedError struct{ error }

func (e unservedError) Unwrap() error { return e.error }

// writePackage streams the entries from o into a package of format on w.
// Each file is checked against its recorded size and digest as it passes.
func writePackage(ctx context.Context, w io.Writer, format string, ark string, o storage.Stored, entries []entry) error {
	a, err := newArchiver(format, w)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := copyEntry(ctx, a, ark, o, e); err != nil {
			return err
		}
	}
	return a.close()
}

func copyEntry(ctx context.Context, a archiver, ark string, o storage.Stored, e entry) error {
	r, err := o.Open(ctx, e.version, e.file.Name)
	if err != nil {
		err = fmt.Errorf("open stored file %q of version %d: %w", e.file.Name, e.version, err)
		if errors.Is(err, storage.ErrNotFound) || storage.Refused(err) {
			return unservedError{err}
		}
		return err
	}
	defer r.Close()
	dst, err := a.next(e)
	if err != nil {
		return fmt.Errorf("package entry %q: %w", e.name, err)
	}
	// A tar entry takes exactly Size bytes: a longer stored file is cut
	// there, and found longer by the byte after.
	n, sum, err := ctxio.CopySHA256(ctx, dst, io.LimitReader(r, e.file.Size))
	if err != nil {
		return fmt.Errorf("copy stored file %q of version %d: %w", e.file.Name, e.version, err)
	}
	var one [1]byte
	if _, err := io.ReadFull(r, one[:]); err == nil {
		n++ // at least one byte more than recorded
	}
	if n != e.file.Size || sum != e.file.SHA256 {
		fe := &fixityError{ark: ark, version: e.version, name: e.file.Name, size: n, sha256: sum, wantSize: e.file.Size, want: e.file.SHA256}
		if l, ok := o.(storage.Locator); ok {
			fe.copy = l.Location(e.version, e.file.Name)
		}
		return fe
	}
	return nil
}
