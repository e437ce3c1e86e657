package inventory

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/hashicorp/go-retryablehttp"
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
	if target == "" {
		if defaultPath == "" {
			return nil, fmt.Errorf("inventory: %w: no inventory given and no default path", ErrInvalid)
		}
		return OpenLocal(defaultPath)
	}
	scheme, _, hasScheme := strings.Cut(target, "://")
	if !hasScheme && !strings.HasPrefix(target, "file:") {
		return OpenLocal(target)
	}
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		return NewPostgres(ctx, target)
	case "http", "https":
		return NewHTTP(target, client), nil
	}
	if u, err := url.Parse(target); err == nil && u.Scheme == "file" && u.Path != "" && (u.Host == "" || u.Host == "localhost") {
		return OpenLocal(u.Path)
	}
	shown := target
	if u, err := url.Parse(target); err == nil {
		shown = u.Redacted() // no password in the message
	}
	return nil, fmt.Errorf("inventory %q: %w: want a file path, postgres://…, or http(s)://…", shown, ErrInvalid)
}
