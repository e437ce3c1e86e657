package container

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
)

// Limits bound what Extract accepts. Zero or negative fields take the default.
type Limits struct {
	MaxFiles int   // entries in the zip, folders included; default 100_000
	MaxBytes int64 // total uncompressed bytes, default 64 GiB
	MaxRatio int64 // max uncompressed:compressed ratio per entry, default 1000 (zip bomb)
	// Fits, when set, is asked whether the zip's files fit where they go,
	// with the bytes their headers give in all and how many files there
	// are (each takes its bytes rounded up to whole blocks), before
	// anything is written; its error refuses the zip. The headers bound
	// what is written: an entry longer than its header fails as it is read.
	Fits func(unpacked uint64, files int) error
}

const (
	defaultMaxFiles = 100_000
	defaultMaxBytes = 64 << 30
	defaultMaxRatio = 1000
)

func (l Limits) withDefaults() Limits {
	if l.MaxFiles <= 0 {
		l.MaxFiles = defaultMaxFiles
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = defaultMaxBytes
	}
	if l.MaxRatio <= 0 {
		l.MaxRatio = defaultMaxRatio
	}
	return l
}

// File is a regular file as extracted.
type File struct {
	Name   string // cleaned relative path, with "/" separators
	Size   int64  // bytes written
	SHA256 string // of the bytes written, computed while writing them (lower-case hex)
}

var zipMagic = []byte("PK\x03\x04")

// Sniff tells whether the first bytes look like a zip ("PK\x03\x04").
func Sniff(head []byte) bool { return bytes.HasPrefix(head, zipMagic) }

// Extract unpacks the zip at zipPath into dest (created if missing) and
// lists its regular files in zip order. It checks every entry before
// writing any (see the package comment), so a refused zip leaves dest as it
// was, except when an entry's data turns out bad or bigger than its header
// said: then the files before it stay in dest, and the caller, who owns
// dest, removes it. Running it again on the same dest overwrites the files.
func Extract(zipPath, dest string, lim Limits) ([]File, error) {
	return ExtractAs(zipPath, zipPath, dest, lim)
}

// notZip is why a container that is no zip (a tar, say), or one cut short,
// is refused.
const notZip = "not a zip file, or one cut short (a container payload is a zip; a tar or tar.gz is stored as one file with type auto or file)"

// ExtractAs is Extract with the container called name in its errors (the
// URL it came from, say, rather than where it lies on this host).
func ExtractAs(zipPath, name, dest string, lim Limits) ([]File, error) {
	lim = lim.withDefaults()
	zr, err := zip.OpenReader(zipPath)
	// Said for a depositor, not in archive/zip's words: a central directory
	// that runs past the end (a damaged one) is io.ErrUnexpectedEOF.
	if errors.Is(err, zip.ErrFormat) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, fmt.Errorf("container %s: %s", name, notZip)
	}
	// ErrInsecurePath (GODEBUG zipinsecurepath=0) still returns the reader;
	// the checks below name the offending entry.
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return nil, fmt.Errorf("container %s: %w", name, err)
	}
	defer zr.Close()

	entries, unpacked, fileCount, err := checkEntries(zr.File, lim)
	if err == nil && lim.Fits != nil {
		err = lim.Fits(unpacked, fileCount)
	}
	if err != nil {
		return nil, fmt.Errorf("container %s: %w", name, err)
	}
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return nil, fmt.Errorf("container %s: %w", name, err)
	}
	root, err := os.OpenRoot(dest)
	if err != nil {
		return nil, fmt.Errorf("container %s: %w", name, err)
	}
	defer root.Close()

	files := make([]File, 0, len(entries))
	budget := lim.MaxBytes
	for _, e := range entries {
		if err := extractEntry(root, e, &budget, lim.MaxRatio); err != nil {
			return nil, fmt.Errorf("container %s: entry %q: %w", name, e.zf.Name, err)
		}
		if !e.folder {
			files = append(files, File{Name: e.name, Size: e.written, SHA256: e.sha256})
		}
	}
	return files, nil
}

// extractEntry creates a folder, or writes a file, spending budget.
func extractEntry(root *os.Root, e *entry, budget *int64, maxRatio int64) error {
	if e.folder {
		return root.MkdirAll(e.name, 0o755)
	}
	if dir := path.Dir(e.name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	src, err := e.zf.Open()
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, zip.ErrFormat) {
		return errors.New("its data is not where the zip's directory says: the zip is damaged or cut short")
	}
	if err != nil {
		return err
	}
	defer src.Close()
	// A file of an earlier run is removed, not truncated: it may share its
	// bytes with a stored copy (a hard link).
	if err := root.Remove(e.name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	dst, err := root.OpenFile(e.name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	h := sha256.New()
	e.written, err = copyCapped(io.MultiWriter(dst, h), src, *budget, e.zf.CompressedSize64, maxRatio)
	e.sha256 = hex.EncodeToString(h.Sum(nil))
	if closeErr := dst.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		// A half-written file must not pass for a whole one.
		_ = root.Remove(e.name)
		return damaged(err, e.zf.UncompressedSize64)
	}
	*budget -= e.written
	return nil
}

// damaged says what an error reading an entry's data means, when it is the
// data's fault; archive/zip's and compress/flate's words ("unexpected
// EOF", "flate: corrupt input before offset 6") say nothing to a depositor.
func damaged(err error, header uint64) error {
	var corrupt flate.CorruptInputError
	switch {
	case errors.Is(err, zip.ErrChecksum):
		return errors.New("data does not match its header: its checksum (CRC-32) differs: the zip is damaged")
	case errors.Is(err, zip.ErrFormat): // archive/zip reads no more than the header gives
		return fmt.Errorf("data does not match its header: it holds more than the %d bytes the header gives", header)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("its data ends before the %d bytes its header gives: the zip is damaged or cut short", header)
	case errors.As(err, &corrupt):
		return fmt.Errorf("its compressed data is damaged (%w)", err)
	}
	return err
}
