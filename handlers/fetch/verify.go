package fetch

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Want is what a file should be. Alg is "", "md5", "sha1", "sha256" or
// "sha512"; Digest is hex; Size is -1 when unknown.
//
// DeferDirSync is for a caller that downloads many files into few folders:
// Download then leaves dest's folder unsynced after the rename (the file's
// data is synced either way), and the caller must fsync that folder itself
// before it counts the file as kept. Verify ignores it.
type Want struct {
	Alg, Digest  string
	Size         int64
	DeferDirSync bool
}

// Result is what a file turned out to be: its size and its digest by
// Want.Alg (sha256 when Want.Alg is ""). Resumed is true when the file was
// completed from an earlier partial transfer rather than read from zero.
type Result struct {
	Bytes       int64
	Alg, Digest string
	Resumed     bool
}

// newHash returns the hasher of want.Alg, sha256 for "".
func newHash(want Want) (hash.Hash, string, error) {
	switch strings.ToLower(want.Alg) {
	case "":
		if want.Digest != "" {
			return nil, "", permanent(errors.New("digest given without an algorithm"))
		}
		return sha256.New(), "sha256", nil
	case "md5":
		return md5.New(), "md5", nil
	case "sha1":
		return sha1.New(), "sha1", nil
	case "sha256":
		return sha256.New(), "sha256", nil
	case "sha512":
		return sha512.New(), "sha512", nil
	}
	return nil, "", permanent(fmt.Errorf("unknown digest algorithm %q", want.Alg))
}

// check compares what was read with want; name is the URL or file.
func check(name string, want Want, alg string, size int64, h hash.Hash) (Result, error) {
	res := Result{Bytes: size, Alg: alg, Digest: hex.EncodeToString(h.Sum(nil))}
	if want.Size >= 0 && size != want.Size {
		return res, &MismatchError{URL: name, What: "size", Want: strconv.FormatInt(want.Size, 10), Got: strconv.FormatInt(size, 10)}
	}
	if want.Digest != "" && !strings.EqualFold(want.Digest, res.Digest) {
		return res, &MismatchError{URL: name, What: alg, Want: want.Digest, Got: res.Digest}
	}
	return res, nil
}

// Verify hashes the file at path and checks it against want, so that a file
// verified earlier need not be downloaded again.
func Verify(path string, want Want) (Result, error) {
	h, alg, err := newHash(want)
	if err != nil {
		return Result{}, fmt.Errorf("verify %s: %w", path, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return Result{}, fmt.Errorf("verify: %w", localOpenError(err))
	}
	defer f.Close()
	n, err := copyBuffered(h, f)
	if err != nil {
		return Result{}, fmt.Errorf("verify: %w", err)
	}
	return check(path, want, alg, n, h)
}

// bufPool holds copy buffers: one per transfer in flight, not one per file.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

func copyBuffered(w io.Writer, r io.Reader) (int64, error) {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	// Hide WriterTo/ReaderFrom so that the pooled buffer is the one used.
	return io.CopyBuffer(struct{ io.Writer }{w}, struct{ io.Reader }{r}, *bp)
}

// localOpenError marks a missing local file as permanent.
func localOpenError(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return permanent(err)
	}
	return err
}
