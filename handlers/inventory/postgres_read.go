package inventory

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// querier is what reads need of a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// LookupLocalID returns the ARK localID maps to within profile.
func (p *Postgres) LookupLocalID(ctx context.Context, profile, localID string) (string, bool, error) {
	if err := checkLookup(profile, localID); err != nil {
		return "", false, err
	}
	var ark string
	err := p.retry(ctx, fmt.Sprintf("look up local id %q in profile %q", localID, profile), func(ctx context.Context) error {
		err := p.pool.QueryRow(ctx, `SELECT ark FROM local_ids WHERE profile = $1 AND local_id = $2`,
			profile, localID).Scan(&ark)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
	return ark, ark != "" && err == nil, err
}

// Object returns ark's object row and versions, read in one snapshot.
func (p *Postgres) Object(ctx context.Context, ark string) (ObjectDetail, error) {
	return p.object(ctx, ark, "object", false)
}

// Latest returns the record of ark's latest version; see [Inventory].
func (p *Postgres) Latest(ctx context.Context, ark string) (Record, error) {
	d, err := p.object(ctx, ark, "latest version of", true)
	if err == nil && len(d.Versions) == 0 {
		err = fmt.Errorf("inventory database %s: object %s: its latest version, %d, has no row", p.where, ark, d.Object.LatestVersion)
	}
	if err != nil {
		return Record{}, err
	}
	return d.Versions[0], nil
}

// object reads ark's object row and versions (only the latest when latest
// is true) in one read-only snapshot; what names the question in messages.
func (p *Postgres) object(ctx context.Context, ark, what string, latest bool) (ObjectDetail, error) {
	if err := checkARK(ark); err != nil {
		return ObjectDetail{}, err
	}
	var d ObjectDetail
	err := p.retry(ctx, what+" "+ark, func(ctx context.Context) error {
		opts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
		return pgx.BeginTxFunc(ctx, p.pool, opts, func(tx pgx.Tx) error {
			var err error
			d, err = loadObject(ctx, tx, ark, latest)
			return err
		})
	})
	return d, err
}

// List returns a page of object rows in bytewise ARK order, read by one
// statement; see [Inventory]. COLLATE "C" makes the order bytewise in a
// database of any locale, and the objects_ark_bytewise index serves it.
func (p *Postgres) List(ctx context.Context, after string, limit int) ([]ObjectRow, error) {
	if err := checkList(after, limit); err != nil {
		return nil, err
	}
	var page []ObjectRow
	err := p.retry(ctx, fmt.Sprintf("list objects after %q", after), func(ctx context.Context) error {
		rows, _ := p.pool.Query(ctx, listPage, after, limit)
		var err error
		page, err = pgx.CollectRows(rows, scanObjectRow)
		return err
	})
	return page, err
}

// selectObjectRows selects object rows as scanObjectRow reads them, each
// with its local ids.
const selectObjectRows = `SELECT ark, profile, latest_version, who, what, "when", "where",
	ARRAY(SELECT local_id FROM local_ids WHERE local_ids.ark = objects.ark) FROM objects`

// listPage selects the limit ($2) object rows after the ARK $1, bytewise.
const listPage = selectObjectRows + ` WHERE ark COLLATE "C" > $1 ORDER BY ark COLLATE "C" LIMIT $2`

func scanObjectRow(row pgx.CollectableRow) (ObjectRow, error) {
	var o ObjectRow
	err := row.Scan(&o.ARK, &o.Profile, &o.LatestVersion, &o.Who, &o.What, &o.When, &o.Where, &o.LocalIDs)
	o.LocalIDs = sortedBy(o.LocalIDs, func(s string) string { return s })
	return o, err
}

func loadObject(ctx context.Context, q querier, ark string, latest bool) (ObjectDetail, error) {
	rows, _ := q.Query(ctx, selectObjectRows+` WHERE ark = $1`, ark)
	o, err := pgx.CollectExactlyOneRow(rows, scanObjectRow)
	if errors.Is(err, pgx.ErrNoRows) {
		return ObjectDetail{}, notFound(ark)
	}
	if err != nil {
		return ObjectDetail{}, err
	}
	version := 0 // all
	if latest {
		version = o.LatestVersion
	}
	versions, err := loadVersions(ctx, q, ark, o.Profile, version)
	return ObjectDetail{Object: o, Versions: versions}, err
}

// loadVersions reads the versions of ark (in profile), oldest first: all of
// them, or only the one numbered version when it is not 0.
func loadVersions(ctx context.Context, q querier, ark, profile string, version int) ([]Record, error) {
	const which = ` WHERE ark = $1 AND ($2::integer = 0 OR version = $2::integer)`
	rows, _ := q.Query(ctx, `SELECT version, created, local_ids, batch, job, who, what, "when", "where"
		FROM versions`+which+` ORDER BY version`, ark, version)
	recs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Record, error) {
		r := Record{ARK: ark, Profile: profile}
		err := row.Scan(&r.Version, &r.Created, &r.LocalIDs, &r.Batch, &r.Job, &r.Who, &r.What, &r.When, &r.Where)
		return r, err
	})
	if err != nil || len(recs) == 0 {
		return nil, err
	}
	byVersion := func(v int) *Record {
		i, _ := slices.BinarySearchFunc(recs, v, func(r Record, v int) int { return r.Version - v })
		return &recs[i] // every row below belongs to a version read above, in the same snapshot
	}
	var v int
	var f FileRow
	rows, _ = q.Query(ctx, `SELECT version, name, size, sha256 FROM files`+which, ark, version)
	_, err = pgx.ForEachRow(rows, []any{&v, &f.Name, &f.Size, &f.SHA256}, func() error {
		r := byVersion(v)
		r.Files = append(r.Files, f)
		return nil
	})
	if err != nil {
		return nil, err
	}
	var c Replica
	rows, _ = q.Query(ctx, `SELECT version, target, url, verified FROM replicas`+which, ark, version)
	_, err = pgx.ForEachRow(rows, []any{&v, &c.Target, &c.URL, &c.Verified}, func() error {
		r := byVersion(v)
		r.Replicas = append(r.Replicas, c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	var e Event
	rows, _ = q.Query(ctx, `SELECT version, id::text, type, at, outcome, agent, detail, file FROM events`+which, ark, version)
	_, err = pgx.ForEachRow(rows, []any{&v, &e.ID, &e.Type, &e.At, &e.Outcome, &e.Agent, &e.Detail, &e.File}, func() error {
		r := byVersion(v)
		r.Events = append(r.Events, e)
		return nil
	})
	for i := range recs {
		recs[i] = canonical(recs[i])
	}
	return recs, err
}
