package inventory

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/ingestq/ingestq/internal/backoff"
	"github.com/ingestq/ingestq/internal/redact"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Postgres is the inventory in a PostgreSQL database shared by every host:
// tables objects, versions, files, local_ids, replicas and events (see
// migrations/), brought up to date by NewPostgres.
type Postgres struct {
	pool    *pgxpool.Pool
	where   string        // host:port/database, for messages (never the password)
	timeout time.Duration // each call's deadline (query_timeout)
}

var _ Inventory = (*Postgres)(nil)

// ErrUnavailable is a database out of reach (wrapped with the cause):
// down, restarting, or the network in between. Trying again later may
// succeed.
var ErrUnavailable = errors.New("unavailable")

// Tries of one call when the database is out of reach: a pool may hand out
// connections that a restart of the server broke; the pool is emptied, and
// the next try gets a new one. Every call is idempotent, so trying again is
// safe.
const (
	tries       = 3
	tryPause    = 50 * time.Millisecond
	tryPauseMax = 500 * time.Millisecond
)

// connectTimeout bounds a connection attempt when the URL sets none
// (connect_timeout), so that a server behind a black hole is found out of
// reach in seconds rather than at the system's TCP timeout.
const connectTimeout = 10 * time.Second

// queryTimeout bounds each call (one statement, or Record's transaction)
// when the URL sets no query_timeout: a server that hangs (stopped,
// swapping, behind a dead link that drops nothing) keeps the connection
// open and never answers, and is then found out of reach. Recording a
// 10,000-file version takes well under a second; a lock another host's
// Record of the same object holds lasts as long.
const queryTimeout = 30 * time.Second

// queryTimeoutParam is the URL's parameter for queryTimeout, read (and
// taken out) by ingestq: PostgreSQL itself would refuse it.
const queryTimeoutParam = "query_timeout"

// NewPostgres connects to the database at url (postgres://…) and applies
// the schema migrations it lacks.
func NewPostgres(ctx context.Context, url string) (*Postgres, error) {
	return connectPrepared(ctx, url, "migrate the schema", migrate)
}

// NewPostgresReader connects to the database at url for reading only: its
// schema is not migrated, and a database without the schema this ingestq
// reads (none at all: a mistyped database name; an older one a daemon of
// this version has not brought up to date) is refused, naming why.
func NewPostgresReader(ctx context.Context, url string) (*Postgres, error) {
	return connectPrepared(ctx, url, "read the schema's version", readable)
}

// connectPrepared makes the pool of the database at url, then runs prepare
// (what, in errors) on it, trying again while the database is out of reach.
func connectPrepared(ctx context.Context, url, what string, prepare func(context.Context, *pgxpool.Pool) error) (*Postgres, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("inventory: %w PostgreSQL URL %s: %s", ErrInvalid, redact.Location(url), parseProblem(err, url))
	}
	cc := cfg.ConnConfig
	if cc.ConnectTimeout == 0 {
		cc.ConnectTimeout = connectTimeout
	}
	p := &Postgres{where: fmt.Sprintf("postgres://%s:%d/%s", cc.Host, cc.Port, cc.Database), timeout: queryTimeout}
	if v, ok := cc.RuntimeParams[queryTimeoutParam]; ok {
		delete(cc.RuntimeParams, queryTimeoutParam)
		if p.timeout, err = time.ParseDuration(v); err != nil || p.timeout <= 0 {
			return nil, fmt.Errorf("inventory: %w PostgreSQL URL: %s=%q: want a duration above zero, such as 30s", ErrInvalid, queryTimeoutParam, v)
		}
	}
	if p.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, fmt.Errorf("inventory database %s: %w", p.where, err)
	}
	if err := p.retry(ctx, what, func(ctx context.Context) error { return prepare(ctx, p.pool) }); err != nil {
		p.pool.Close()
		return nil, err
	}
	return p, nil
}

// parseProblem is what pgx found wrong with url, without url: pgx hides
// only the password's start in a URL url.Parse refuses (of
// "postgres://u:p@ss word@h/db" it shows "u:xxxxx@ss word@h"), and its
// cause quotes the rest ("unexpected spaces found in \"ss word@h\""). The
// cause is given only for a url that holds no secret.
func parseProblem(err error, url string) string {
	var pe *pgconn.ParseConfigError
	if !errors.As(err, &pe) {
		return redact.In(err.Error(), url)
	}
	_, problem, _ := strings.Cut(pe.Error(), "`: ")
	if cause := pe.Unwrap(); cause != nil && redact.Location(url) != url {
		problem = strings.TrimSuffix(problem, " ("+cause.Error()+")")
	}
	return problem
}

// Close closes the pool's connections.
func (p *Postgres) Close() error {
	p.pool.Close()
	return nil
}

// Record writes r in one transaction; see [Inventory].
func (p *Postgres) Record(ctx context.Context, r Record) error {
	return p.RecordVersions(ctx, []Record{r})
}

// RecordVersions writes each of rs in one transaction, in the order of
// their ARKs: two that share objects lock their rows in one order, and
// never wait for each other; see [VersionsRecorder].
func (p *Postgres) RecordVersions(ctx context.Context, rs []Record) error {
	rs, err := normalizeAll(rs)
	if err != nil || len(rs) == 0 {
		return err
	}
	slices.SortStableFunc(rs, func(a, b Record) int { return strings.Compare(a.ARK, b.ARK) })
	return p.retry(ctx, recordWhat(rs), func(ctx context.Context) error {
		err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
			for _, r := range rs {
				if err := recordTx(ctx, tx, r); err != nil {
					return err
				}
			}
			return nil
		})
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && (strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "23")) {
			return fmt.Errorf("%w: %w", ErrInvalid, err) // a data exception or integrity violation: the record's fault
		}
		return err
	})
}

// retry runs fn, each time within the call's deadline, until it succeeds,
// fails for a reason other than the database being out of reach, ctx
// ends, or tries run out. The refusals of the inventory (ErrConflict, …)
// come back as they are; the database out of reach, or not answering
// within the deadline, is ErrUnavailable.
func (p *Postgres) retry(ctx context.Context, what string, fn func(context.Context) error) error {
	var err error
	for try := 1; ; try++ {
		callCtx, cancel := context.WithTimeout(ctx, p.timeout)
		err = fn(callCtx)
		silent := err != nil && callCtx.Err() != nil && ctx.Err() == nil
		cancel()
		if silent { // not tried again: a hung server would keep the step tries times as long
			return fmt.Errorf("inventory database %s: %s: %w: no answer in %v (%s): %w", p.where, what, ErrUnavailable, p.timeout, queryTimeoutParam, err)
		}
		if err == nil || !unreachable(err) || try == tries {
			break
		}
		p.pool.Reset() // what broke one connection (a restart, the network) likely broke them all
		if !backoff.Sleep(ctx, backoff.Delay(tryPause, tryPauseMax, try)) {
			break
		}
	}
	switch {
	case err == nil || errors.Is(err, ErrConflict) || errors.Is(err, ErrMismatch) || errors.Is(err, ErrNotFound):
		return err
	case unreachable(err):
		return fmt.Errorf("inventory database %s: %s: %w: %w", p.where, what, ErrUnavailable, err)
	}
	return fmt.Errorf("inventory database %s: %s: %w", p.where, what, err)
}

// unreachable tells whether err means the database could not be reached
// or went away: no answer (a network error, a closed connection), or the
// server saying it is shutting down, starting, or out of connections.
func unreachable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return pgconn.Timeout(err) // a deadline met while dialling or waiting for an answer
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		code := pgErr.Code
		return strings.HasPrefix(code, "08") || strings.HasPrefix(code, "57P") || code == "53300"
	}
	var netErr net.Error
	var connectErr *pgconn.ConnectError
	return errors.As(err, &netErr) || errors.As(err, &connectErr) || pgconn.SafeToRetry(err) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
