// Package place stores files by key in one place: a local folder or an
// S3-compatible bucket. The OCFL store (package ocfl) keeps its storage
// root in a place.
package place

import (
	"context"
	"errors"
	"io"
)

// ErrNotExist is returned (wrapped) by Open and Stat for a missing key.
var ErrNotExist = errors.New("no such key")

// ErrDigest is returned (wrapped) by Put when the bytes written do not have
// the digest or size the caller gave; nothing is left at the key.
var ErrDigest = errors.New("digest mismatch")

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
	// Delete removes key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// String names the place for messages: a file path or s3://bucket/prefix.
	String() string
}
