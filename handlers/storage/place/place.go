// Package place stores files by key in one place: a local folder or an
// S3-compatible bucket. The OCFL store (package ocfl) keeps its storage
// root in a place.
package place

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
)

// ErrNotExist is returned (wrapped) by Open and Stat for a missing key.
var ErrNotExist = errors.New("no such key")

// ErrDigest is returned (wrapped) by Put when the bytes written do not have
// the digest or size the caller gave; nothing is left at the key.
var ErrDigest = errors.New("digest mismatch")

// ErrNoLink is returned (wrapped) by Linker.Link when the place cannot take
// the file by a hard link (another file system, or one without hard
// links); key is unchanged, and the caller copies the file with Put.
var ErrNoLink = errors.New("cannot take the file by a hard link")

// Place keeps files by key. Safe for concurrent use.
type Place interface {
	// Put writes r to key, replacing what is there. size and sha256 (64
	// lower-case hex) are what r must yield; the write counts only when the
	// place has confirmed that digest (computed while writing and synced,
	// or confirmed by the store), and a mismatch leaves nothing at key.
	Put(ctx context.Context, key string, r io.Reader, size int64, sha256 string) error
	// Open reads key.
	Open(ctx context.Context, key string) (io.ReadCloser, error)
	// Stat returns key's size.
	Stat(ctx context.Context, key string) (int64, error)
	// List returns every key under prefix (a folder: "a/b/" or "" for all),
	// sorted.
	List(ctx context.Context, prefix string) ([]string, error)
	// Keys gives every key under prefix as List does, one at a time and in
	// no set order, holding none: a whole storage root's keys (tens of
	// millions) do not fit in memory. A failure is the last it gives.
	Keys(ctx context.Context, prefix string) iter.Seq2[string, error]
	// Delete removes key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// Fits is nil when the place can hold key, else a *TooLong saying
	// which of its limits key passes: an S3 key's length, a local path's
	// PATH_MAX or a name's NAME_MAX. It asks nothing of the store.
	Fits(key string) error
	// String names the place for messages: a file path or s3://bucket/prefix.
	String() string
}

// TooLong is a key longer than a place holds: what is measured (the key
// as the store keeps it, the file's path, one name in it), its length and
// the place's limit, in bytes.
type TooLong struct {
	What   string // "its S3 key", …
	Length int
	Limit  int
	Rule   string // the limit and its source: "AWS S3 keys are at most 1024 bytes (UTF-8)"
}

func (e *TooLong) Error() string {
	return fmt.Sprintf("%s would be %d bytes, %d over the limit: %s", e.What, e.Length, e.Over(), e.Rule)
}

// Over is how many bytes too long the key is.
func (e *TooLong) Over() int { return e.Length - e.Limit }

// Linker is a place on a local file system that can take a local file by a
// hard link instead of a copy: the key and the file become one file, so no
// byte is read, hashed or written again.
type Linker interface {
	// Link makes key name the file at src, replacing what key held. It
	// neither reads nor verifies src: the caller vouches that src is synced,
	// holds the bytes whose size and digest it records, and is never
	// written again (it may be removed: the key keeps the bytes). Key's
	// folder is left unsynced until SyncLinks.
	Link(ctx context.Context, key, src string) error
	// SyncLinks makes the names Link gave durable: each folder of keys is
	// synced once.
	SyncLinks(ctx context.Context, keys []string) error
}

// Sweeper is a place where a write cut off by a crash leaves a file of its
// own behind (a local folder's temporary file), which List does not show
// but other tools see.
type Sweeper interface {
	// Sweep removes such files under the folder prefix ("a/b/", or "" for
	// all). The caller makes sure that no write under prefix is under way.
	Sweep(ctx context.Context, prefix string) error
}

// sortedKeys collects keys, sorted ("a.txt" before "a/b", which a walk
// gives first), or their failure.
func sortedKeys(keys iter.Seq2[string, error]) ([]string, error) {
	var out []string
	for k, err := range keys {
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	slices.Sort(out)
	return out, nil
}
