package inventory

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The schema's migrations, applied in order: migrations/NNNN_name.sql,
// numbered from 0001 without gaps. A migration once released is never
// changed; a change of schema is a new file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

type migration struct {
	version int
	name    string // the file name
	sql     string
}

// migrationLock is the advisory lock key that serialises migrations
// between daemons sharing a database ("ingestq" in ASCII).
const migrationLock int64 = 0x696e6765737471

// migrations returns the embedded migrations in order, checking that they
// are numbered 1, 2, … without gaps.
func migrations() ([]migration, error) {
	entries, err := migrationFiles.ReadDir("migrations") // sorted by name
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries {
		number, _, _ := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(number)
		if err != nil || v != len(ms)+1 || len(number) != 4 {
			return nil, fmt.Errorf("inventory: migration %s: want %04d_<name>.sql", e.Name(), len(ms)+1)
		}
		sql, err := migrationFiles.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(sql)})
	}
	return ms, nil
}

// migrate brings the database's schema up to date: each migration not yet
// applied runs in its own transaction holding migrationLock, and is
// entered in schema_migrations in the same transaction, so daemons that
// start at once apply each exactly once. A schema newer than this program
// knows is an error: an older daemon must not write into it.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	var applied int
	err = inLockedTx(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version integer PRIMARY KEY,
			name    text NOT NULL,
			applied timestamptz NOT NULL DEFAULT now())`)
		if err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&applied)
	})
	if err != nil {
		return fmt.Errorf("schema_migrations: %w", err)
	}
	if applied > len(ms) {
		return fmt.Errorf("the schema is at version %d, newer than this ingestq knows (%d): run a newer ingestq", applied, len(ms))
	}
	for _, m := range ms[applied:] {
		if err := inLockedTx(ctx, pool, func(tx pgx.Tx) error { return apply(ctx, tx, m) }); err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
	}
	return nil
}

// readable checks, without writing, that the database holds the schema
// this ingestq reads: every migration it knows applied.
func readable(ctx context.Context, pool *pgxpool.Pool) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	var applied int
	err = pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&applied)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42P01": // undefined_table
		return errors.New("it holds no ingestq inventory (no schema_migrations table; a daemon given it as --inventory makes it): is the URL right?")
	case err != nil:
		return fmt.Errorf("schema_migrations: %w", err)
	case applied < len(ms):
		return fmt.Errorf("its schema is at version %d, older than this ingestq's %d: a daemon of this version brings it up to date", applied, len(ms))
	case applied > len(ms):
		return fmt.Errorf("its schema is at version %d, newer than this ingestq knows (%d): use a newer ingestq", applied, len(ms))
	}
	return nil
}

// apply runs m unless another daemon did while this one waited for the lock.
func apply(ctx context.Context, tx pgx.Tx, m migration) error {
	var done bool
	err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`, m.version).Scan(&done)
	if err != nil || done {
		return err
	}
	if _, err := tx.Exec(ctx, m.sql); err != nil { // no arguments: several statements are fine
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name)
	return err
}

// inLockedTx runs fn in a transaction that first takes migrationLock,
// released when the transaction ends.
func inLockedTx(ctx context.Context, pool *pgxpool.Pool, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
			return err
		}
		return fn(tx)
	})
}
