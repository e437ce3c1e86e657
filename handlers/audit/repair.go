package audit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/storage"
)

// The repair (Options.Repair): after the inventory was restored from a
// backup older than storage, record from storage what it lost. For each
// object no inventory records (object-unrecorded) and each object whose
// primary target holds versions the inventory does not record
// (versions-unrecorded), it records those versions as the primary target
// of the object's profile holds them, oldest first: each version's files
// with their sizes and SHA-256 (the target's OCFL inventory), its created
// time, what the deposit wrote into it (Auditor.FromStorage), a copy at
// each target whose version holds the same files, and an ingestion event
// saying the audit made the record from storage. A version the inventory
// records stays as it is: only versions it lacks are recorded, and the
// inventory refuses other content for a recorded one. The object is then
// compared again, so what the repair left is a finding.

// RepairFailed: a version the repair could not record from storage (the
// message says why); later versions of the object are left unrecorded.
const RepairFailed Kind = "repair-failed"

// ErrNotHeld refuses a repair while the ingest queue runs: a deposit
// racing it could make a second object of a lost one's local id, or
// record its version over the versions being repaired.
var ErrNotHeld = errors.New("the ingest queue is not held")

// Repaired is a version the repair recorded from storage.
type Repaired struct {
	ARK     string `json:"ark"`
	Target  string `json:"target"` // the primary target it was read from, as Target.Name shows it
	Version int    `json:"version"`
	Job     string `json:"job,omitempty"` // as its version message names them
	Batch   string `json:"batch,omitempty"`
	Message string `json:"message"` // what was recorded, for a person
}

func (r Repaired) String() string { return "repaired: " + r.Message }

// CheckRepair refuses opt.Repair unless the ingest queue is held. The API
// asks it before its answer starts; Run asks it too.
func (a *Auditor) CheckRepair(ctx context.Context, opt Options) error {
	if !opt.Repair {
		return nil
	}
	if a.IngestHeld == nil || a.FromStorage == nil {
		return fmt.Errorf("audit: %w: repair: this auditor cannot record from storage", inventory.ErrInvalid)
	}
	held, err := a.IngestHeld(ctx)
	if err != nil {
		return fmt.Errorf("audit: repair: is the ingest queue held: %w", err)
	}
	if !held {
		// Why (decision 547) is said in words: a user has no decisions file.
		return fmt.Errorf("audit: repair refused: %w: a deposit meanwhile could make a second object of a lost object's "+
			"local id, or record its version over the versions being repaired; hold it first with "+
			"`ingestq hold queue`, and release it with `ingestq release queue` once an audit is clean", ErrNotHeld)
	}
	return nil
}

// repairUnrecorded records an object no inventory records, as the profile
// whose primary target holds it: on success the object is then audited as
// a recorded one (o.src set, o.unrecordedAt cleared).
func (w *walk) repairUnrecorded(ctx context.Context, o *audited) {
	profiles := slices.Compact(slices.Sorted(slices.Values(o.primaryOf)))
	var at []string
	for _, t := range o.unrecordedAt {
		at = append(at, t.Name)
	}
	switch len(profiles) {
	case 0:
		o.findings = append(o.findings, Finding{Kind: RepairFailed, ARK: o.ark, Message: fmt.Sprintf("%s was not "+
			"recorded from storage: it is stored at %s, which is no profile's primary target, and a repair records from "+
			"the primary (the profile that names it there is not this daemon's, or the primary lost it: restore it there, "+
			"%s)", o.ark, strings.Join(at, ", "), recovery)})
		return
	case 1:
	default:
		o.findings = append(o.findings, Finding{Kind: RepairFailed, ARK: o.ark, Message: fmt.Sprintf("%s was not "+
			"recorded from storage: profiles %q share the primary target that holds it, and storage does not say whose "+
			"object it is", o.ark, profiles)})
		return
	}
	prof := profiles[0]
	targets, err := w.targets(ctx, prof)
	if err != nil {
		return // listed from these targets: cannot fail here
	}
	src := w.recordingSource(prof)
	if w.repair(ctx, o, src, prof, targets, nil) > 0 {
		o.src, o.unrecordedAt = src, nil
	}
}

// recordingSource is the inventory profile's Recording writes into.
func (w *walk) recordingSource(profile string) *source {
	name := w.a.recordsInto(profile)
	for _, s := range w.srcs {
		if s.name == name && s.holds(profile) {
			return s
		}
	}
	return w.srcs[0]
}

// unrecordedAt tells whether findings say the primary holds versions the
// inventory does not record.
func unrecordedAt(findings []Finding, primary Target) bool {
	return slices.ContainsFunc(findings, func(f Finding) bool {
		return f.Kind == VersionsUnrecorded && f.Target == primary.Name
	})
}

// repair records into src the versions targets[0], the primary, holds
// that recorded lacks, oldest first, and returns how many it recorded. The
// first that fails is a repair-failed finding, and the versions after it
// stay unrecorded: recording them would leave a hole in the record.
func (w *walk) repair(ctx context.Context, o *audited, src *source, prof string, targets []Target, recorded []inventory.Record) int {
	o.repairTried = true
	primary := targets[0]
	failed := func(version int, format string, args ...any) {
		what := o.ark
		if version > 0 {
			what = fmt.Sprintf("version %d of %s", version, o.ark)
		}
		o.findings = append(o.findings, Finding{Kind: RepairFailed, ARK: o.ark, Target: primary.Name, Version: version,
			Message: fmt.Sprintf("%s was not recorded from primary target %s: %s; the versions after it are left "+
				"unrecorded (the findings after this say what is left); put it right and run `ingestq audit --repair` again",
				what, primary.Name, fmt.Sprintf(format, args...))})
	}
	stored, err := survey(ctx, primary, o.ark)
	if err != nil {
		failed(0, "%s", primary.shown(err))
		return 0
	}
	copies := make([]storage.Stored, len(targets)) // nil where the target gave nothing
	copies[0] = stored
	for i, t := range targets[1:] {
		copies[i+1], _ = survey(ctx, t, o.ark) // a copy is recorded where the target shows it
	}
	n := 0
	for _, v := range stored.Versions() {
		if slices.ContainsFunc(recorded, func(r inventory.Record) bool { return r.Version == v.Number }) {
			continue
		}
		if i := slices.IndexFunc(v.Files, func(f storage.File) bool { return f.Size == storage.Absent }); i >= 0 {
			failed(v.Number, "the content of its file %q is gone there (restore the object there first, %s)", v.Files[i].Name, recovery)
			return n
		}
		v.ARK = o.ark // a service's answer may leave it out
		rec, err := w.a.FromStorage(ctx, stored, v)
		if err != nil {
			failed(v.Number, "%s", primary.shown(err))
			return n
		}
		rec.ARK, rec.Profile, rec.Version, rec.Created = o.ark, prof, v.Number, v.Created
		rec.Files = nil
		for _, f := range v.Files {
			rec.Files = append(rec.Files, inventory.FileRow{Name: f.Name, Size: f.Size, SHA256: f.SHA256})
		}
		at := time.Now().UTC()
		var names []string
		for i, c := range copies {
			if c == nil || len(c.Versions()) < v.Number || c.Versions()[v.Number-1].URL == "" ||
				!storage.SameContent(c.Versions()[v.Number-1].Files, v.Files) {
				continue
			}
			rec.Replicas = append(rec.Replicas, inventory.Replica{Target: targets[i].URL, URL: c.Versions()[v.Number-1].URL, Verified: at})
			names = append(names, targets[i].Name)
		}
		rec.Events = []inventory.Event{{ID: uuid.NewString(), Type: inventory.EventIngestion, At: at,
			Outcome: inventory.OutcomeSuccess, Agent: w.a.Agent, Detail: fmt.Sprintf("recorded from storage by ingestq "+
				"audit --repair, as primary target %s holds version %d (the inventory had no record of it: restored from a "+
				"backup older than storage): its files, sizes and SHA-256 from the target's OCFL inventory, not read back; "+
				"the job and batch from its version message %q; local ids and ERC from its system files; copies at %s, "+
				"each holding the same files", primary.Name, v.Number, v.Message, strings.Join(names, ", "))}}
		if err := src.inv.Record(ctx, rec); err != nil {
			if ctx.Err() != nil {
				return n
			}
			why := ""
			if errors.Is(err, inventory.ErrConflict) {
				why = " (a deposit since the restore made another object of that local id: compare the two with " +
					"`ingestq object ARK`; ingestq removes no record)"
			}
			failed(v.Number, "%s refused it: %v%s", src.name, err, why)
			return n
		}
		n++
		o.repaired = append(o.repaired, Repaired{ARK: o.ark, Target: primary.Name, Version: v.Number, Job: rec.Job,
			Batch: rec.Batch, Message: fmt.Sprintf("version %d of %s (profile %q) recorded in %s from primary target %s: "+
				"%d files, local ids %q, from job %q of batch %q, created %s; copies at %s",
				v.Number, o.ark, prof, src.name, primary.Name, len(rec.Files), rec.LocalIDs, rec.Job, rec.Batch,
				v.Created.UTC().Format(time.RFC3339), strings.Join(names, ", "))})
	}
	return n
}

// survey reads every version of ark at t.
func survey(ctx context.Context, t Target, ark string) (storage.Stored, error) {
	if t.Err != nil {
		return nil, t.Err
	}
	s, ok := t.Store.(storage.Surveyor)
	if !ok {
		return nil, fmt.Errorf("storage target %s cannot give each version of an object", t.Name)
	}
	return s.Survey(ctx, ark)
}
