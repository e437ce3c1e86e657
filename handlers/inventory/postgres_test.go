package inventory

import (
	"context"
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
