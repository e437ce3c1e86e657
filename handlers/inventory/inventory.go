package inventory

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/ingestq/ingestq/internal/redact"
)

// FileRow is one file of a recorded version.
type FileRow struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Replica is one verified copy of a version in a storage target.
type Replica struct {
	Target   string    `json:"target"` // the storage target's name or URL, as the profile names it
	URL      string    `json:"url"`    // where the copy is
	Verified time.Time `json:"verified"`
}

// PREMIS event types (the Library of Congress vocabulary,
// id.loc.gov/vocabulary/preservation/eventType) that ingest records.
const (
	EventIngestion                = "ingestion"
	EventMessageDigestCalculation = "message digest calculation"
	EventFixityCheck              = "fixity check"
	EventIdentifierAssignment     = "identifier assignment"
	EventReplication              = "replication"
)

// PREMIS event outcomes.
const (
	OutcomeSuccess = "success"
	OutcomeFailure = "failure"
)

// Event is one PREMIS event of a version.
type Event struct {
	ID      string    `json:"id"`   // a UUID, kept in its canonical lower-case form
	Type    string    `json:"type"` // one of the Event* constants
	At      time.Time `json:"at"`
	Outcome string    `json:"outcome"` // OutcomeSuccess or OutcomeFailure
	Agent   string    `json:"agent"`   // e.g. "ingestq v1.2.3 on host1"
	Detail  string    `json:"detail"`
	File    string    `json:"file,omitempty"` // object-relative file name, when the event is about one file
}

// Record is one stored version, as the inventory keeps it.
type Record struct {
	ARK      string    `json:"ark"`
	Profile  string    `json:"profile"` // collection; local ids are unique within it
	LocalIDs []string  `json:"local_ids"`
	Version  int       `json:"version"`
	Created  time.Time `json:"created"`
	Files    []FileRow `json:"files"`
	Batch    string    `json:"batch"` // where the record came from
	Job      string    `json:"job"`
	Who      string    `json:"who"` // ERC
	What     string    `json:"what"`
	When     string    `json:"when"`
	Where    string    `json:"where"`
	Replicas []Replica `json:"replicas"` // by target; added to by later records
	Events   []Event   `json:"events"`   // by time; added to by later records
}

// ObjectRow is one object, for listings.
type ObjectRow struct {
	ARK           string   `json:"ark"`
	Profile       string   `json:"profile"`
	LocalIDs      []string `json:"local_ids"` // of every version, sorted
	LatestVersion int      `json:"latest_version"`
	Who           string   `json:"who"` // ERC of the latest version
	What          string   `json:"what"`
	When          string   `json:"when"`
	Where         string   `json:"where"`
}

// ObjectDetail is an object with every recorded version, oldest first.
type ObjectDetail struct {
	Object   ObjectRow `json:"object"`
	Versions []Record  `json:"versions"`
}

// Shown is d as the API, the dashboard and `ingestq object` show it: each
// copy's target and URL, and the events that name them, with any password
// masked. The inventory keeps them as written: Storing matches copies by
// them.
func (d ObjectDetail) Shown() ObjectDetail {
	d.Versions = slices.Clone(d.Versions)
	for i := range d.Versions {
		v := &d.Versions[i]
		var places []string
		v.Replicas = slices.Clone(v.Replicas)
		for j := range v.Replicas {
			c := &v.Replicas[j]
			places = append(places, c.Target, c.URL)
			c.Target, c.URL = redact.Location(c.Target), redact.Location(c.URL)
		}
		v.Events = slices.Clone(v.Events)
		for j := range v.Events {
			v.Events[j].Detail = redact.In(v.Events[j].Detail, places...)
		}
	}
	return d
}

// Inventory records stored versions and maps local ids to ARKs.
type Inventory interface {
	// Record writes one stored version. Recording the same (ARK, Version)
	// again changes nothing but adding the replicas and events not
	// recorded yet; different content for it is an error.
	Record(ctx context.Context, r Record) error
	// LookupLocalID returns the ARK localID maps to within profile; ok is
	// false when there is none.
	LookupLocalID(ctx context.Context, profile, localID string) (ark string, ok bool, err error)
	// Object returns ark's object row and versions; an unknown ark is
	// ErrNotFound (wrapped).
	Object(ctx context.Context, ark string) (ObjectDetail, error)
	// Latest returns the record of ark's latest version alone (Storing
	// asks it of every object it writes); an unknown ark is ErrNotFound
	// (wrapped).
	Latest(ctx context.Context, ark string) (Record, error)
	// List returns, in ARK order (bytewise), at most limit objects whose
	// ARK sorts after after ("" from the first): a page of a walk over
	// every object. An empty page ends the walk. A limit below 1 is ErrInvalid.
	List(ctx context.Context, after string, limit int) ([]ObjectRow, error)
}

// VersionsRecorder is an inventory that records several versions in one
// transaction, one commit (bbolt, PostgreSQL): the fixity check events of
// the objects whose audits ended together.
type VersionsRecorder interface {
	// RecordVersions records each of rs as Record does, in one
	// transaction: on an error none is recorded.
	RecordVersions(ctx context.Context, rs []Record) error
}

// Recorder is the part of an Inventory that records.
type Recorder interface {
	Record(ctx context.Context, r Record) error
}

// RecordAll records rs into inv: in one transaction when inv is a
// VersionsRecorder, else each in turn up to the first error (those before
// it stay recorded, and recording them again changes nothing).
func RecordAll(ctx context.Context, inv Recorder, rs []Record) error {
	if vr, ok := inv.(VersionsRecorder); ok {
		return vr.RecordVersions(ctx, rs)
	}
	for _, r := range rs {
		if err := inv.Record(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

var (
	// ErrConflict is a local id already mapped to another ARK in the same
	// profile (wrapped; the message names the id and both ARKs).
	ErrConflict = errors.New("local id conflict")
	// ErrMismatch is a record that contradicts what is recorded: other
	// content for a recorded version, or another profile for an object.
	ErrMismatch = errors.New("contradicts the inventory")
	// ErrInvalid is a record or a question no inventory can take: an
	// empty ARK, a bad digest, a string with a NUL or not UTF-8, …
	ErrInvalid = errors.New("invalid")
	// ErrNotFound is an object the inventory does not hold.
	ErrNotFound = errors.New("not in the inventory")
)

// Refused tells whether err is one that trying again cannot change: a
// refusal by an inventory service (a 4xx answer other than 409), a record
// that contradicts the inventory ([ErrMismatch]) or is invalid
// ([ErrInvalid]). [ErrConflict] is told apart by errors.Is. Other errors
// (a database or service out of reach, a 5xx answer) may pass.
func Refused(err error) bool {
	var answer *answerError
	return errors.As(err, &answer) && answer.refused || errors.Is(err, ErrMismatch) || errors.Is(err, ErrInvalid)
}

// ObjectByLocalID returns the object localID maps to within profile; an
// unknown local id is ErrNotFound (wrapped).
func ObjectByLocalID(ctx context.Context, inv Inventory, profile, localID string) (ObjectDetail, error) {
	ark, ok, err := inv.LookupLocalID(ctx, profile, localID)
	if err != nil {
		return ObjectDetail{}, err
	}
	if !ok {
		return ObjectDetail{}, fmt.Errorf("inventory: local id %q in profile %q: %w", localID, profile, ErrNotFound)
	}
	return inv.Object(ctx, ark)
}

// Lister is what a walk over the objects reads of an inventory.
type Lister interface {
	List(ctx context.Context, after string, limit int) ([]ObjectRow, error)
}

// Objects yields every object of inv in ARK order, asking [Inventory.List]
// for pages of pageSize; an error ends it, yielded with a zero row.
func Objects(ctx context.Context, inv Lister, pageSize int) iter.Seq2[ObjectRow, error] {
	return ObjectsAfter(ctx, inv, "", pageSize)
}

// ObjectsAfter is [Objects] from the first ARK after after: a walk taken
// up where another stopped.
func ObjectsAfter(ctx context.Context, inv Lister, after string, pageSize int) iter.Seq2[ObjectRow, error] {
	return func(yield func(ObjectRow, error) bool) {
		for from := after; ; { // after stays: the sequence may be walked again
			page, err := inv.List(ctx, from, pageSize)
			if err != nil {
				yield(ObjectRow{}, err)
				return
			}
			if len(page) == 0 {
				return
			}
			for _, row := range page {
				if !yield(row, nil) {
					return
				}
			}
			from = page[len(page)-1].ARK
		}
	}
}

// The messages every implementation gives for the same refusal.

// mismatch describes a record whose content differs from the recorded one,
// naming both by their origin.
func mismatch(old, r Record, diff string) error {
	return fmt.Errorf("inventory: %s version %d recorded from batch %q job %q differs from the record from batch %q job %q: %s: %w",
		r.ARK, r.Version, old.Batch, old.Job, r.Batch, r.Job, diff, ErrMismatch)
}

// otherProfile is a record of an object that is in another profile.
func otherProfile(r Record, recorded string) error {
	return fmt.Errorf("inventory: %s is in profile %q, not %q (batch %q job %q): %w",
		r.ARK, recorded, r.Profile, r.Batch, r.Job, ErrMismatch)
}

// conflict is a local id of r that maps to another ARK.
func conflict(r Record, localID, other string) error {
	return fmt.Errorf("inventory: local id %q in profile %q maps to %s, not %s: %w",
		localID, r.Profile, other, r.ARK, ErrConflict)
}

func notFound(ark string) error {
	return fmt.Errorf("inventory: object %s: %w", ark, ErrNotFound)
}
