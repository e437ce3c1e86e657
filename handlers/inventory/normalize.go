package inventory

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/ingestq/ingestq/internal/redact"
	"github.com/ingestq/ingestq/internal/sha256hex"
)

// maxVersion keeps version keys (%08d) in numeric order.
const maxVersion = 99_999_999

// eventTypes are the PREMIS event types a record may carry.
var eventTypes = []string{EventIngestion, EventMessageDigestCalculation, EventFixityCheck,
	EventIdentifierAssignment, EventReplication}

// recordWhat names what recording rs (at least one) does, for an error:
// an audit's group holds the versions of several objects.
func recordWhat(rs []Record) string {
	objects := 1
	for i := 1; i < len(rs); i++ {
		if !slices.ContainsFunc(rs[:i], func(r Record) bool { return r.ARK == rs[i].ARK }) {
			objects++
		}
	}
	switch {
	case len(rs) == 1:
		return fmt.Sprintf("record %s version %d", rs[0].ARK, rs[0].Version)
	case objects == 1:
		return fmt.Sprintf("record %d versions of %s", len(rs), rs[0].ARK)
	}
	return fmt.Sprintf("record %d versions of %d objects, %s the first", len(rs), objects, rs[0].ARK)
}

// normalizeAll is normalize of each record: the first bad one is the error.
func normalizeAll(rs []Record) ([]Record, error) {
	out := make([]Record, len(rs))
	for i, r := range rs {
		var err error
		if out[i], err = normalize(r); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// normalize checks r and returns it in canonical form (see [canonical]);
// what no inventory can keep is ErrInvalid.
func normalize(r Record) (Record, error) {
	r.Events = slices.Clone(r.Events)
	for i, e := range r.Events {
		id, err := uuid.Parse(e.ID)
		if err != nil {
			return Record{}, invalid(r, fmt.Sprintf("event id %q is not a UUID", e.ID))
		}
		r.Events[i].ID = id.String()
	}
	r = canonical(r)
	if problem := check(r); problem != "" {
		return Record{}, invalid(r, problem)
	}
	return r, nil
}

func invalid(r Record, problem string) error {
	return fmt.Errorf("inventory: %w record of %q version %d: %s", ErrInvalid, r.ARK, r.Version, problem)
}

// check names the first thing wrong with a canonical r ("" when none).
func check(r Record) string {
	switch {
	case r.ARK == "" || !clean(r.ARK):
		return "ARK is empty, or has a NUL or bad UTF-8"
	case r.Profile == "" || !clean(r.Profile):
		return fmt.Sprintf("profile %q is empty, or has a NUL or bad UTF-8", r.Profile)
	case r.Version < 1 || r.Version > maxVersion:
		return fmt.Sprintf("version is not in 1..%d", maxVersion)
	case !clean(r.Batch, r.Job, r.Who, r.What, r.When, r.Where):
		return "batch, job or ERC has a NUL or bad UTF-8"
	}
	for _, id := range r.LocalIDs {
		if id == "" || !clean(id) {
			return fmt.Sprintf("local id %q is empty, or has a NUL or bad UTF-8", id)
		}
	}
	for _, check := range []func(Record) string{checkFiles, checkReplicas, checkEvents} {
		if problem := check(r); problem != "" {
			return problem
		}
	}
	return ""
}

func checkFiles(r Record) string {
	for i, f := range r.Files {
		switch {
		case f.Name == "" || !clean(f.Name):
			return fmt.Sprintf("file %q: name is empty, or has a NUL or bad UTF-8", f.Name)
		case i > 0 && r.Files[i-1].Name == f.Name:
			return fmt.Sprintf("file %q listed twice", f.Name)
		case f.Size < 0:
			return fmt.Sprintf("file %q has size %d", f.Name, f.Size)
		case !sha256hex.Valid(f.SHA256):
			return fmt.Sprintf("file %q: sha256 %q is not 64 lower-case hex digits", f.Name, f.SHA256)
		}
	}
	return ""
}

func checkReplicas(r Record) string {
	for i, c := range r.Replicas {
		switch {
		case c.Target == "" || c.URL == "" || !clean(c.Target, c.URL):
			return fmt.Sprintf("replica %q at %q: target or URL is empty, or has a NUL or bad UTF-8", redact.Location(c.Target), redact.Location(c.URL))
		case i > 0 && r.Replicas[i-1].Target == c.Target:
			return fmt.Sprintf("replica target %q listed twice", redact.Location(c.Target))
		case c.Verified.IsZero():
			return fmt.Sprintf("replica %q has no verified time", redact.Location(c.Target))
		}
	}
	return ""
}

// checkEvents checks r's events, whose ids normalize made canonical.
func checkEvents(r Record) string {
	ids := make(map[string]bool, len(r.Events))
	for _, e := range r.Events {
		switch {
		case ids[e.ID]:
			return fmt.Sprintf("event %s listed twice", e.ID)
		case !slices.Contains(eventTypes, e.Type):
			return fmt.Sprintf("event %s: type %q is not one of %q", e.ID, e.Type, eventTypes)
		case e.Outcome != OutcomeSuccess && e.Outcome != OutcomeFailure:
			return fmt.Sprintf("event %s: outcome %q is not %q or %q", e.ID, e.Outcome, OutcomeSuccess, OutcomeFailure)
		case e.At.IsZero():
			return fmt.Sprintf("event %s has no time", e.ID)
		case e.Agent == "" || !clean(e.Agent, e.Detail, e.File):
			return fmt.Sprintf("event %s: agent is empty, or agent, detail or file has a NUL or bad UTF-8", e.ID)
		}
		ids[e.ID] = true
	}
	return ""
}

// canonical returns r with its lists sorted (files by name, local ids
// without repeats, replicas by target, events by time then id), empty
// lists nil, and times in UTC to the microsecond (PostgreSQL's precision),
// so that every implementation gives back the same record.
func canonical(r Record) Record {
	r.LocalIDs = slices.Compact(slices.Sorted(slices.Values(r.LocalIDs)))
	r.Files = sortedBy(r.Files, func(f FileRow) string { return f.Name })
	r.Replicas = sortedBy(r.Replicas, func(c Replica) string { return c.Target })
	for i := range r.Replicas {
		r.Replicas[i].Verified = instant(r.Replicas[i].Verified)
	}
	r.Events = slices.Clone(r.Events)
	for i := range r.Events {
		r.Events[i].At = instant(r.Events[i].At)
	}
	slices.SortFunc(r.Events, compareEvents)
	if len(r.Events) == 0 {
		r.Events = nil
	}
	r.Created = instant(r.Created)
	return r
}

func compareEvents(a, b Event) int {
	return cmp.Or(a.At.Compare(b.At), strings.Compare(a.ID, b.ID))
}

// sortedBy returns a sorted copy of s, nil when it is empty.
func sortedBy[T any](s []T, key func(T) string) []T {
	if len(s) == 0 {
		return nil
	}
	s = slices.Clone(s)
	slices.SortFunc(s, func(a, b T) int { return strings.Compare(key(a), key(b)) })
	return s
}

// instant is t as every implementation keeps it.
func instant(t time.Time) time.Time {
	return t.UTC().Truncate(time.Microsecond)
}

// clean tells whether every s is UTF-8 without a NUL, which PostgreSQL's
// text refuses and JSON would silently change.
func clean(ss ...string) bool {
	for _, s := range ss {
		if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
			return false
		}
	}
	return true
}

// checkLookup rejects a lookup that no record could match: NUL would let
// one profile's key pass for another's.
func checkLookup(profile, localID string) error {
	if profile == "" || localID == "" || !clean(profile, localID) {
		return fmt.Errorf("inventory: %w look-up of local id %q in profile %q: empty, or has a NUL or bad UTF-8", ErrInvalid, localID, profile)
	}
	return nil
}

// checkARK rejects an object query no record could match.
func checkARK(ark string) error {
	if ark == "" || !clean(ark) {
		return fmt.Errorf("inventory: %w object %q: empty, or has a NUL or bad UTF-8", ErrInvalid, ark)
	}
	return nil
}

// checkList rejects a page of objects no inventory can give: after must be
// a string an ARK could be ("" for the first page), limit at least 1.
func checkList(after string, limit int) error {
	switch {
	case !clean(after):
		return fmt.Errorf("inventory: %w list of objects after %q: has a NUL or bad UTF-8", ErrInvalid, after)
	case limit < 1:
		return fmt.Errorf("inventory: %w list of objects after %q: limit %d is below 1", ErrInvalid, after, limit)
	}
	return nil
}

// contentDiff names what differs between two normalized records of one
// version ("" when they are the same content). Replicas and events are not
// content: they are added to.
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

// addNew returns the recorded version old with the replicas (by target)
// and events (by id) of r that it lacks; added is false when there were
// none. What old has stays as it is.
func addNew(old, r Record) (merged Record, added bool) {
	newReplicas := missing(old.Replicas, r.Replicas, func(c Replica) string { return c.Target })
	newEvents := missing(old.Events, r.Events, func(e Event) string { return e.ID })
	if len(newReplicas) == 0 && len(newEvents) == 0 {
		return old, false
	}
	old.Replicas = append(slices.Clone(old.Replicas), newReplicas...)
	old.Events = append(slices.Clone(old.Events), newEvents...)
	return canonical(old), true
}

// missing returns the items of add whose key no item of have has.
func missing[T any](have, add []T, key func(T) string) []T {
	keys := make(map[string]bool, len(have))
	for _, x := range have {
		keys[key(x)] = true
	}
	var out []T
	for _, x := range add {
		if !keys[key(x)] {
			out = append(out, x)
		}
	}
	return out
}
