package inventory

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/internal/pgtest"
)

func TestOpenPicksTheInventoryByURL(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, c := range []struct {
		target, want string
	}{
		{"", "*inventory.Local"},
		{filepath.Join(dir, "other.db"), "*inventory.Local"},
		{"file://" + filepath.Join(dir, "third.db"), "*inventory.Local"},
		{pgtest.NewDatabase(t, nil), "*inventory.Postgres"},
		{"https://inventory.example.org/api", "*inventory.HTTP"},
	} {
		h, err := Open(ctx, c.target, filepath.Join(dir, "default.db"), nil)
		if err != nil {
			t.Fatalf("Open(%q): %v", c.target, err)
		}
		if got := fmt.Sprintf("%T", h); got != c.want {
			t.Errorf("Open(%q) = %s, want %s", c.target, got, c.want)
		}
		if err := h.Close(); err != nil {
			t.Errorf("Close of %q: %v", c.target, err)
		}
	}
	for _, f := range []string{"default.db", "other.db", "third.db"} {
		if _, err := OpenLocal(filepath.Join(dir, f)); err != nil {
			t.Errorf("Open did not make or release %s: %v", f, err)
		}
	}
}

func TestOpenRefusesWhatItCannotOpen(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		target, defaultPath, want string
	}{
		{"", "", "no inventory given and no default path"},
		{"s3://bucket/inv", "x.db", `inventory "s3://bucket/inv": invalid: want a file path, postgres://…, or http(s)://…`},
		{"mysql://me:secret@db/inv", "x.db", `"mysql://me:xxxxx@db/inv"`},
		{"postgres://me:secret@127.0.0.1:5432/inv?sslmode=bogus", "x.db", "invalid PostgreSQL URL"},
		// url.Parse refuses these; pgx hid only the password's start.
		{"mysql://me:p@secret word@db/inv", "x.db", `"mysql://me:xxxxx@db/inv"`},
		{"postgres://me:p@secret word@127.0.0.1:5432/inv", "x.db", "invalid PostgreSQL URL postgres://me:xxxxx@127.0.0.1:5432/inv: failed to parse as URL"},
		{"postgres://me:secret%zz@127.0.0.1:5432/inv", "x.db", "invalid PostgreSQL URL postgres://me:xxxxx@127.0.0.1:5432/inv"},
	} {
		h, err := Open(ctx, c.target, c.defaultPath, nil)
		if err == nil {
			h.Close()
			t.Fatalf("Open(%q) succeeded", c.target)
		}
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q): %v; want ErrInvalid saying %q, without the password", c.target, err, c.want)
		}
	}
}
