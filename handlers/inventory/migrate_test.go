package inventory

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/ingestq/ingestq/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"
)

// migrateEnv makes the test binary a daemon that only migrates the
// database at its URL (see TestMain).
const migrateEnv = "INVENTORY_TEST_MIGRATE_URL"

func TestMain(m *testing.M) {
	if url := os.Getenv(migrateEnv); url != "" {
		p, err := NewPostgres(context.Background(), url)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		p.Close()
		os.Exit(0)
	}
	goleak.VerifyTestMain(pgtest.WithShared(m))
}

// appliedMigrations returns schema_migrations as "version name" lines.
func appliedMigrations(t *testing.T, url string) []string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, _ := conn.Query(ctx, `SELECT version || ' ' || name FROM schema_migrations ORDER BY version`)
	applied, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return applied
}

func wantMigrations(t *testing.T) []string {
	t.Helper()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, m := range ms {
		want = append(want, fmt.Sprintf("%d %s", m.version, m.name))
	}
	if len(want) < 2 || !strings.HasPrefix(want[0], "1 0001_") {
		t.Fatalf("embedded migrations = %q; want 0001_… and more", want)
	}
	return want
}

func checkApplied(t *testing.T, url string) {
	t.Helper()
	if got, want := appliedMigrations(t, url), wantMigrations(t); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("schema_migrations = %q, want each migration once: %q", got, want)
	}
}

// Daemons starting at once on a new database (pools in one process, let go
// together) all succeed, and each migration is applied once.
func TestMigrationsAtOnceFromPools(t *testing.T) {
	const rounds, daemons = 5, 4
	for range rounds {
		url := pgtest.NewDatabase(t, nil)
		start := make(chan struct{})
		errs := make([]error, daemons)
		var wg sync.WaitGroup
		for d := range daemons {
			wg.Go(func() {
				<-start
				p, err := NewPostgres(context.Background(), url)
				if err == nil {
					err = p.Close()
				}
				errs[d] = err
			})
		}
		close(start)
		wg.Wait()
		for d, err := range errs {
			if err != nil {
				t.Fatalf("daemon %d: %v", d, err)
			}
		}
		checkApplied(t, url)
	}
}

// Two processes (this test binary, as a daemon that only migrates) start
// at once on a new database: both succeed, each migration is applied once.
func TestMigrationsAtOnceFromProcesses(t *testing.T) {
	url := pgtest.NewDatabase(t, nil)
	var cmds []*exec.Cmd
	var outs []*strings.Builder
	for range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), migrateEnv+"="+url)
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("daemon %d: %v: %s", i, err, outs[i])
		}
	}
	checkApplied(t, url)
}

// A database migrated by a newer ingestq is refused, and one already up to
// date is opened without applying anything again.
func TestMigrationsOfANewerSchemaAreRefused(t *testing.T) {
	ctx := context.Background()
	p := openPostgres(t, nil)
	url := pgtestURL(t, p)
	again, err := NewPostgres(ctx, url)
	if err != nil {
		t.Fatalf("opening an up-to-date database: %v", err)
	}
	again.Close()
	checkApplied(t, url)

	if _, err := p.pool.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES (999, '0999_future.sql')`); err != nil {
		t.Fatal(err)
	}
	newer, err := NewPostgres(ctx, url)
	if err == nil {
		newer.Close()
		t.Fatal("a database at schema version 999 was opened")
	}
	if !strings.Contains(err.Error(), "the schema is at version 999, newer than this ingestq knows") {
		t.Fatalf("error %q does not say the schema is newer", err)
	}
}

// pgtestURL is the URL p was opened with.
func pgtestURL(t *testing.T, p *Postgres) string {
	t.Helper()
	return p.pool.Config().ConnConfig.ConnString()
}
