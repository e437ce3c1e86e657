package inventory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// FileRow is one file of a recorded version.
type FileRow struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
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

// Inventory records stored versions and maps local ids to ARKs.
type Inventory interface {
	// Record writes one stored version. Recording the same (ARK, Version)
	// again changes nothing; different content for it is an error.
	Record(ctx context.Context, r Record) error
	// LookupLocalID returns the ARK localID maps to within profile; ok is
	// false when there is none.
	LookupLocalID(ctx context.Context, profile, localID string) (ark string, ok bool, err error)
}

var (
	// ErrConflict is a local id already mapped to another ARK in the same
	// profile (wrapped; the message names the id and both ARKs).
	ErrConflict = errors.New("local id conflict")
	// ErrMismatch is a record that contradicts what is recorded: other
	// content for a recorded version, or another profile for an object.
	ErrMismatch = errors.New("contradicts the inventory")
)

// maxVersion keeps version keys (%08d) in numeric order.
const maxVersion = 99_999_999

// normalize checks r and returns it in canonical form: files sorted by name,
// local ids sorted without repeats, created in UTC.
func normalize(r Record) (Record, error) {
	bad := func(format string, a ...any) (Record, error) {
		return Record{}, fmt.Errorf("inventory: record of %q version %d: %s", r.ARK, r.Version, fmt.Sprintf(format, a...))
	}
	switch {
	case r.ARK == "" || strings.ContainsRune(r.ARK, 0):
		return bad("ARK is empty or has a NUL")
	case r.Profile == "" || strings.ContainsRune(r.Profile, 0):
		return bad("profile %q is empty or has a NUL", r.Profile)
	case r.Version < 1 || r.Version > maxVersion:
		return bad("version is not in 1..%d", maxVersion)
	}
	ids := slices.Clone(r.LocalIDs)
	for _, id := range ids {
		if id == "" || strings.ContainsRune(id, 0) {
			return bad("local id %q is empty or has a NUL", id)
		}
	}
	slices.Sort(ids)
	r.LocalIDs = slices.Compact(ids)

	r.Files = slices.Clone(r.Files)
	slices.SortFunc(r.Files, func(a, b FileRow) int { return strings.Compare(a.Name, b.Name) })
	for i, f := range r.Files {
		switch {
		case f.Name == "":
			return bad("a file has no name")
		case i > 0 && r.Files[i-1].Name == f.Name:
			return bad("file %q listed twice", f.Name)
		case f.Size < 0:
			return bad("file %q has size %d", f.Name, f.Size)
		case !validDigest(f.SHA256):
			return bad("file %q: sha256 %q is not 64 lower-case hex digits", f.Name, f.SHA256)
		}
	}
	r.Created = r.Created.UTC()
	return r, nil
}

// checkLookup rejects a lookup that no record could match: NUL would let
// one profile's key pass for another's.
func checkLookup(profile, localID string) error {
	if profile == "" || localID == "" || strings.ContainsRune(profile+localID, 0) {
		return fmt.Errorf("inventory: look up local id %q in profile %q: empty or has a NUL", localID, profile)
	}
	return nil
}

func validDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// contentDiff names what differs between two normalized records of one
// version ("" when they are the same content).
func contentDiff(a, b Record) string {
	var diff []string
	if a.Profile != b.Profile {
		diff = append(diff, fmt.Sprintf("profile %q vs %q", a.Profile, b.Profile))
	}
	if !slices.Equal(a.LocalIDs, b.LocalIDs) {
		diff = append(diff, fmt.Sprintf("local ids %q vs %q", a.LocalIDs, b.LocalIDs))
	}
	if !slices.Equal(a.Files, b.Files) {
		diff = append(diff, fmt.Sprintf("files (%d vs %d)", len(a.Files), len(b.Files)))
	}
	return strings.Join(diff, ", ")
}

// mismatch describes a record whose content differs from the recorded one,
// naming both by their origin.
func mismatch(old, r Record, diff string) error {
	return fmt.Errorf("inventory: %s version %d recorded from batch %q job %q differs from the record from batch %q job %q: %s: %w",
		r.ARK, r.Version, old.Batch, old.Job, r.Batch, r.Job, diff, ErrMismatch)
}
