package inventory

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/ingestq/ingestq/internal/redact"
)

// Handle is an opened inventory, to be closed when done.
type Handle interface {
	Inventory
	Close() error
}

var (
	_ Handle = (*Local)(nil)
	_ Handle = (*Postgres)(nil)
	_ Handle = (*HTTP)(nil)
)

// Open opens the inventory target names:
//
//   - "" → [Local] at defaultPath (the daemon's built-in inventory);
//   - a file path or a file: URL → [Local] in that file;
//   - postgres://… or postgresql://… → [Postgres];
//   - http://… or https://… → [HTTP] through client (a default retrying
//     client when nil).
func Open(ctx context.Context, target, defaultPath string, client *retryablehttp.Client) (Handle, error) {
	return open(ctx, target, defaultPath, client, false)
}

// OpenReader is Open for a command that only reads: it makes nothing and
// writes nothing. A database file must exist (bbolt would make an empty
// one) and is opened read-only (OpenLocalReader), and a
// PostgreSQL database must hold the schema a daemon made; it is not
// migrated (NewPostgresReader).
func OpenReader(ctx context.Context, target, defaultPath string, client *retryablehttp.Client) (Handle, error) {
	return open(ctx, target, defaultPath, client, true)
}

// readerLockWait is how long OpenReader waits for a database file another
// process holds: a daemon's open outlasts any wait.
const readerLockWait = 100 * time.Millisecond

func open(ctx context.Context, target, defaultPath string, client *retryablehttp.Client, reader bool) (Handle, error) {
	local := func(path string) (Handle, error) {
		if !reader {
			return OpenLocal(path)
		}
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("inventory database %s: %w (nothing was recorded there: is the path right?)", path, fs.ErrNotExist)
		}
		// A running daemon holds the file for good: a reader finds out at
		// once (ErrLocked) and asks the daemon, rather than wait it out.
		// The file is opened read-only: a read changes nothing in it.
		return OpenLocalReader(path, readerLockWait)
	}
	if target == "" {
		if defaultPath == "" {
			return nil, fmt.Errorf("inventory: %w: no inventory given and no default path", ErrInvalid)
		}
		return local(defaultPath)
	}
	scheme, _, hasScheme := strings.Cut(target, "://")
	if !hasScheme && !strings.HasPrefix(target, "file:") {
		return local(target)
	}
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		if reader {
			return NewPostgresReader(ctx, target)
		}
		return NewPostgres(ctx, target)
	case "http", "https":
		return NewHTTP(target, client), nil
	}
	if u, err := url.Parse(target); err == nil && u.Scheme == "file" && u.Path != "" && (u.Host == "" || u.Host == "localhost") {
		return local(u.Path)
	}
	return nil, fmt.Errorf("inventory %q: %w: want a file path, postgres://…, or http(s)://…", redact.Location(target), ErrInvalid)
}
