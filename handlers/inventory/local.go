package inventory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Local is the built-in inventory: an embedded bbolt database.
type Local struct {
	db   *bolt.DB
	path string
}

var _ Inventory = (*Local)(nil)

// DefaultLockTimeout is how long OpenLocal waits for another process to
// release the database file before giving up.
const DefaultLockTimeout = 2 * time.Second

// ErrLocked is returned (wrapped) when another process holds the database.
var ErrLocked = errors.New("locked by another process")

var (
	bucketObjects  = []byte("objects")
	bucketVersions = []byte("versions")
	bucketLocalIDs = []byte("localids")
)

// OpenLocal opens (creating it if needed) the database file at path.
func OpenLocal(path string) (*Local, error) {
	return OpenLocalTimeout(path, DefaultLockTimeout)
}

// OpenLocalTimeout is OpenLocal waiting at most timeout for the file lock.
func OpenLocalTimeout(path string, timeout time.Duration) (*Local, error) {
	return openLocal(path, timeout, false)
}

// OpenLocalReader opens the database file at path for reading only: the
// file is opened read-only, under a shared lock, and nothing is written to
// it (not even its buckets, nor its modification time). It must exist and
// hold an inventory. A process holding the file to write (a running
// daemon) is waited for at most timeout, then ErrLocked.
func OpenLocalReader(path string, timeout time.Duration) (*Local, error) {
	return openLocal(path, timeout, true)
}

func openLocal(path string, timeout time.Duration, readOnly bool) (*Local, error) {
	if timeout <= 0 {
		timeout = DefaultLockTimeout // bbolt would wait for ever
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout, ReadOnly: readOnly})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("inventory database %s is %w", path, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("inventory database %s: %w", path, err)
	}
	// A writer makes the buckets; a reader finds them, or the file is no
	// inventory.
	buckets := func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketObjects, bucketVersions, bucketLocalIDs} {
			if readOnly && tx.Bucket(name) == nil {
				return fmt.Errorf("holds no ingestq inventory (no %s bucket): %w", name, ErrInvalid)
			}
			if !readOnly {
				if _, err := tx.CreateBucketIfNotExists(name); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if readOnly {
		err = db.View(buckets)
	} else {
		err = db.Update(buckets)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("inventory database %s: %w", path, err)
	}
	return &Local{db: db, path: path}, nil
}

// Close closes the database, releasing its file.
func (l *Local) Close() error {
	if err := l.db.Close(); err != nil {
		return fmt.Errorf("inventory database %s: close: %w", l.path, err)
	}
	return nil
}

func versionKey(ark string, version int) []byte {
	return fmt.Appendf(nil, "%s\x00%08d", ark, version)
}

func localIDKey(profile, localID string) []byte {
	return []byte(profile + "\x00" + localID)
}

// Record writes the object row, the version row and the local-id rows of r
// in one transaction; see [Inventory].
func (l *Local) Record(ctx context.Context, r Record) error {
	return l.RecordVersions(ctx, []Record{r})
}

// RecordVersions writes each of rs as Record does, all in one transaction
// (one commit); see [VersionsRecorder].
func (l *Local) RecordVersions(ctx context.Context, rs []Record) error {
	rs, err := normalizeAll(rs)
	if err != nil || len(rs) == 0 {
		return err
	}
	what := recordWhat(rs)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("inventory: %s: %w", what, err)
	}
	err = l.db.Update(func(tx *bolt.Tx) error {
		for _, r := range rs {
			if err := recordBolt(tx, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrConflict) || errors.Is(err, ErrMismatch) {
			return err
		}
		return fmt.Errorf("inventory database %s: %s: %w", l.path, what, err)
	}
	return nil
}

// recordBolt writes r (normalized) in tx.
func recordBolt(tx *bolt.Tx, r Record) error {
	objects, versions, localIDs := tx.Bucket(bucketObjects), tx.Bucket(bucketVersions), tx.Bucket(bucketLocalIDs)
	vkey := versionKey(r.ARK, r.Version)
	if b := versions.Get(vkey); b != nil {
		var old Record
		if err := json.Unmarshal(b, &old); err != nil {
			return fmt.Errorf("version row %q: %w", vkey, err)
		}
		if diff := contentDiff(old, r); diff != "" {
			return mismatch(old, r, diff)
		}
		if merged, added := addNew(old, r); added {
			return putJSON(versions, vkey, merged)
		}
		return nil // recorded before: nothing to do
	}

	var obj ObjectRow
	if b := objects.Get([]byte(r.ARK)); b != nil {
		if err := json.Unmarshal(b, &obj); err != nil {
			return fmt.Errorf("object row %s: %w", r.ARK, err)
		}
		if obj.Profile != r.Profile {
			return otherProfile(r, obj.Profile)
		}
	}
	for _, id := range r.LocalIDs {
		key := localIDKey(r.Profile, id)
		if got := localIDs.Get(key); got != nil && string(got) != r.ARK {
			return conflict(r, id, string(got))
		}
		if err := localIDs.Put(key, []byte(r.ARK)); err != nil {
			return err
		}
	}

	obj.ARK, obj.Profile = r.ARK, r.Profile
	obj.LocalIDs = append(obj.LocalIDs, r.LocalIDs...)
	slices.Sort(obj.LocalIDs)
	obj.LocalIDs = slices.Compact(obj.LocalIDs)
	if r.Version >= obj.LatestVersion { // an older version recorded late keeps the newest's ERC
		obj.LatestVersion = r.Version
		obj.Who, obj.What, obj.When, obj.Where = r.Who, r.What, r.When, r.Where
	}
	if err := putJSON(objects, []byte(r.ARK), obj); err != nil {
		return err
	}
	return putJSON(versions, vkey, r)
}

func putJSON(b *bolt.Bucket, key []byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(key, data)
}

// LookupLocalID returns the ARK localID maps to within profile.
func (l *Local) LookupLocalID(ctx context.Context, profile, localID string) (string, bool, error) {
	if err := checkLookup(profile, localID); err != nil {
		return "", false, err
	}
	if err := ctx.Err(); err != nil {
		return "", false, fmt.Errorf("inventory: look up local id %q: %w", localID, err)
	}
	var ark string
	err := l.db.View(func(tx *bolt.Tx) error {
		ark = string(tx.Bucket(bucketLocalIDs).Get(localIDKey(profile, localID)))
		return nil
	})
	if err != nil {
		return "", false, fmt.Errorf("inventory database %s: look up local id %q in profile %q: %w", l.path, localID, profile, err)
	}
	return ark, ark != "", nil
}

// Object returns ark's object row and versions; see [Inventory].
func (l *Local) Object(ctx context.Context, ark string) (ObjectDetail, error) {
	var d ObjectDetail
	err := l.view(ctx, ark, "object", func(tx *bolt.Tx, row ObjectRow) error {
		var err error
		d.Object = row
		d.Versions, err = versionsOf(tx, ark)
		return err
	})
	return d, err
}

// Latest returns the record of ark's latest version; see [Inventory].
func (l *Local) Latest(ctx context.Context, ark string) (Record, error) {
	var r Record
	err := l.view(ctx, ark, "latest version of", func(tx *bolt.Tx, row ObjectRow) error {
		v := tx.Bucket(bucketVersions).Get(versionKey(ark, row.LatestVersion))
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("version row %s %d: %w", ark, row.LatestVersion, err)
		}
		r = canonical(r)
		return nil
	})
	return r, err
}

// view runs fn on ark's object row in a read transaction; what names the
// question in messages. An unknown ark is ErrNotFound.
func (l *Local) view(ctx context.Context, ark, what string, fn func(*bolt.Tx, ObjectRow) error) error {
	if err := checkARK(ark); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("inventory: %s %s: %w", what, ark, err)
	}
	err := l.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketObjects).Get([]byte(ark))
		if b == nil {
			return notFound(ark)
		}
		var row ObjectRow
		if err := json.Unmarshal(b, &row); err != nil {
			return fmt.Errorf("object row %s: %w", ark, err)
		}
		return fn(tx, row)
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("inventory database %s: %s %s: %w", l.path, what, ark, err)
	}
	return err
}

// List returns a page of object rows in ARK order; see [Inventory]. The
// objects bucket is keyed by ARK, and bbolt keeps keys in bytewise order.
func (l *Local) List(ctx context.Context, after string, limit int) ([]ObjectRow, error) {
	if err := checkList(after, limit); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("inventory: list objects after %q: %w", after, err)
	}
	var rows []ObjectRow
	err := l.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketObjects).Cursor()
		k, v := c.Seek([]byte(after))
		if k != nil && string(k) == after {
			k, v = c.Next()
		}
		for ; k != nil && len(rows) < limit; k, v = c.Next() {
			var row ObjectRow
			if err := json.Unmarshal(v, &row); err != nil {
				return fmt.Errorf("object row %s: %w", k, err)
			}
			rows = append(rows, row)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("inventory database %s: list objects after %q: %w", l.path, after, err)
	}
	return rows, nil
}

// Versions returns the recorded versions of ark, oldest first; none is not
// an error.
func (l *Local) Versions(ctx context.Context, ark string) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("inventory: versions of %s: %w", ark, err)
	}
	var recs []Record
	err := l.db.View(func(tx *bolt.Tx) error {
		var err error
		recs, err = versionsOf(tx, ark)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("inventory database %s: versions of %s: %w", l.path, ark, err)
	}
	return recs, nil
}

func versionsOf(tx *bolt.Tx, ark string) ([]Record, error) {
	prefix := []byte(ark + "\x00")
	var recs []Record
	c := tx.Bucket(bucketVersions).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var r Record
		if err := json.Unmarshal(v, &r); err != nil {
			return nil, fmt.Errorf("version row %q: %w", k, err)
		}
		recs = append(recs, canonical(r))
	}
	return recs, nil
}
