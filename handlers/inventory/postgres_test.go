package inventory

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/internal/pgtest"
)

// openPostgres opens an inventory in a new database on s (the shared
// server when nil).
func openPostgres(t *testing.T, s *pgtest.Server) *Postgres {
	t.Helper()
	p, err := NewPostgres(context.Background(), pgtest.NewDatabase(t, s))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestPostgresConformance(t *testing.T) {
	runConformance(t, func(t *testing.T) Inventory { return openPostgres(t, nil) })
}

// A reader (the CLI's object command) makes nothing: a database without an
// inventory is refused, naming why, and stays without one; a database a
// daemon migrated is read as it is. A missing database file is refused
// and not made.
func TestReadersMakeNothing(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t, nil)
	if _, err := OpenReader(ctx, url, "", nil); err == nil || !strings.Contains(err.Error(), "holds no ingestq inventory") {
		t.Fatalf("a reader of an empty database: %v; want a refusal naming it", err)
	}
	if _, err := OpenReader(ctx, url, "", nil); err == nil || !strings.Contains(err.Error(), "holds no ingestq inventory") {
		t.Fatalf("a second reader of the database: %v; the first one made the schema", err)
	}
	daemon, err := NewPostgres(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer daemon.Close()
	reader, err := OpenReader(ctx, url, "", nil)
	if err != nil {
		t.Fatalf("a reader of a migrated database: %v", err)
	}
	defer reader.Close()
	if _, err := reader.Object(ctx, "ark:/99999/fk4none"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a reader's lookup: %v; want ErrNotFound", err)
	}
	path := filepath.Join(t.TempDir(), "inventory.db")
	if _, err := OpenReader(ctx, path, "", nil); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a reader of a missing file: %v; want fs.ErrNotExist", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the reader made %s (%v)", path, err)
	}
}
