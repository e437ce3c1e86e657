package inventory

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// recordTx writes r (normalized) in tx. It locks the object's row first,
// so records of one ARK (from any host) take turns, and claims local ids
// in sorted order, so records of different ARKs wanting the same ids wait
// for each other in one order and never deadlock; the local_ids primary
// key decides which ARK gets an id.
func recordTx(ctx context.Context, tx pgx.Tx, r Record) error {
	tag, err := tx.Exec(ctx, `INSERT INTO objects (ark, profile, latest_version, who, what, "when", "where")
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (ark) DO NOTHING`,
		r.ARK, r.Profile, r.Version, r.Who, r.What, r.When, r.Where)
	if err != nil {
		return err
	}
	isNew := tag.RowsAffected() == 1
	profile := r.Profile
	if !isNew {
		err := tx.QueryRow(ctx, `SELECT profile FROM objects WHERE ark = $1 FOR UPDATE`, r.ARK).Scan(&profile)
		if err != nil {
			return err
		}
		olds, err := loadVersions(ctx, tx, r.ARK, profile, r.Version)
		if err != nil {
			return err
		}
		if len(olds) == 1 { // recorded before: the same content, perhaps new replicas and events
			if diff := contentDiff(olds[0], r); diff != "" {
				return mismatch(olds[0], r, diff)
			}
			return insertPreservation(ctx, tx, r)
		}
		if profile != r.Profile {
			return otherProfile(r, profile)
		}
	}
	if err := claimLocalIDs(ctx, tx, r); err != nil {
		return err
	}
	if err := insertVersion(ctx, tx, r); err != nil {
		return err
	}
	if !isNew { // an older version recorded late keeps the newest's ERC
		_, err = tx.Exec(ctx, `UPDATE objects SET latest_version = $2, who = $3, what = $4, "when" = $5, "where" = $6
			WHERE ark = $1 AND latest_version <= $2`, r.ARK, r.Version, r.Who, r.What, r.When, r.Where)
	}
	return err
}

// claimLocalIDs maps r's local ids (sorted) to r.ARK, or finds the first
// one mapped to another ARK. A no-op update on conflict returns the ARK
// the id has, waiting for a transaction that claimed it to end.
func claimLocalIDs(ctx context.Context, tx pgx.Tx, r Record) error {
	for _, id := range r.LocalIDs {
		var ark string
		err := tx.QueryRow(ctx, `INSERT INTO local_ids (profile, local_id, ark) VALUES ($1, $2, $3)
			ON CONFLICT (profile, local_id) DO UPDATE SET ark = local_ids.ark RETURNING ark`,
			r.Profile, id, r.ARK).Scan(&ark)
		if err != nil {
			return err
		}
		if ark != r.ARK {
			return conflict(r, id, ark)
		}
	}
	return nil
}

func insertVersion(ctx context.Context, tx pgx.Tx, r Record) error {
	_, err := tx.Exec(ctx, `INSERT INTO versions (ark, version, created, local_ids, batch, job, who, what, "when", "where")
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		r.ARK, r.Version, r.Created, nonNil(r.LocalIDs), r.Batch, r.Job, r.Who, r.What, r.When, r.Where)
	if err != nil {
		return err
	}
	var names, digests []string
	var sizes []int64
	for _, f := range r.Files {
		names, sizes, digests = append(names, f.Name), append(sizes, f.Size), append(digests, f.SHA256)
	}
	_, err = tx.Exec(ctx, `INSERT INTO files (ark, version, name, size, sha256)
		SELECT $1, $2, * FROM unnest($3::text[], $4::bigint[], $5::text[])`,
		r.ARK, r.Version, names, sizes, digests)
	if err != nil {
		return err
	}
	return insertPreservation(ctx, tx, r)
}

// insertPreservation adds r's replicas and events that its version lacks
// (by target, by id); those it has stay as they are.
func insertPreservation(ctx context.Context, tx pgx.Tx, r Record) error {
	var targets, urls []string
	var verified []time.Time
	for _, c := range r.Replicas {
		targets, urls, verified = append(targets, c.Target), append(urls, c.URL), append(verified, c.Verified)
	}
	_, err := tx.Exec(ctx, `INSERT INTO replicas (ark, version, target, url, verified)
		SELECT $1, $2, * FROM unnest($3::text[], $4::text[], $5::timestamptz[])
		ON CONFLICT DO NOTHING`, r.ARK, r.Version, targets, urls, verified)
	if err != nil {
		return err
	}
	var ids, types, outcomes, agents, details, files []string
	var ats []time.Time
	for _, e := range r.Events {
		ids, types, outcomes = append(ids, e.ID), append(types, e.Type), append(outcomes, e.Outcome)
		agents, details, files = append(agents, e.Agent), append(details, e.Detail), append(files, e.File)
		ats = append(ats, e.At)
	}
	_, err = tx.Exec(ctx, `INSERT INTO events (ark, version, id, type, at, outcome, agent, detail, file)
		SELECT $1, $2, id::uuid, type, at, outcome, agent, detail, file
		FROM unnest($3::text[], $4::text[], $5::timestamptz[], $6::text[], $7::text[], $8::text[], $9::text[])
			AS e (id, type, at, outcome, agent, detail, file)
		ON CONFLICT DO NOTHING`, r.ARK, r.Version, ids, types, ats, outcomes, agents, details, files)
	return err
}

// nonNil is s, or an empty slice for a NOT NULL array column.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
