package audit

import (
	"fmt"

	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/internal/redact"
)

// Kind names what a finding found.
type Kind string

// The kinds of finding. Each names the ARK, and the target, version and
// file where they apply.
const (
	// NotRecorded: an ARK asked for that the inventory does not hold.
	NotRecorded Kind = "not-recorded"
	// InventoryFailed: the inventory could not give the object's record.
	InventoryFailed Kind = "inventory-failed"
	// RecordedTwice: an ARK that two inventories record (the daemon's and
	// a profile's own, or two profiles' own); Recording writes into one.
	RecordedTwice Kind = "recorded-twice"
	// UnknownProfile: the object's profile is not one this daemon has, so
	// its storage targets are not known here.
	UnknownProfile Kind = "unknown-profile"
	// TargetFailed: the target could not be opened or read (out of reach,
	// a damaged OCFL inventory): the object was not audited there.
	TargetFailed Kind = "target-failed"
	// ObjectMissing: the target has no version of the object.
	ObjectMissing Kind = "object-missing"
	// VersionsMissing: the target lacks versions the inventory records
	// (restored from an older backup).
	VersionsMissing Kind = "versions-missing"
	// VersionsUnrecorded: the target has versions the inventory does not
	// record (a job stored them and has not recorded them yet, or the
	// inventory was restored from an older backup).
	VersionsUnrecorded Kind = "versions-unrecorded"
	// ObjectUnrecorded: an object a target holds that no inventory
	// records, found by a walk's listing or asked for by ARK (a job stored
	// it and has not recorded it yet, or the inventory was restored from a
	// backup older than storage).
	ObjectUnrecorded Kind = "object-unrecorded"
	// ObjectUnreadable: an object root of a target, found by a walk's
	// listing, whose inventory.json does not say which object it is (not
	// an OCFL inventory, or an id that belongs at another root): its ARK is
	// not known, so it is audited nowhere until it is mended.
	ObjectUnreadable Kind = "object-unreadable"
	// FileMissing: a recorded file the target's version lacks, or whose
	// stored content is gone.
	FileMissing Kind = "file-missing"
	// FileExtra: a file of the target's version that the record lacks.
	FileExtra Kind = "file-extra"
	// FileDiffers: a file whose size or SHA-256 differs from the record.
	FileDiffers Kind = "file-differs"
	// FixityFailed: a stored file whose bytes no longer hash to its
	// recorded SHA-256 (with fixity).
	FixityFailed Kind = "fixity-failed"
	// FileUnreadable: a stored file that could not be read (with fixity).
	FileUnreadable Kind = "file-unreadable"
	// RecordFailed: the inventory did not take a version's fixity check
	// events (with record); the other findings stand.
	RecordFailed Kind = "record-failed"
)

// Finding is one thing the audit found wrong.
type Finding struct {
	Kind    Kind   `json:"kind"`
	ARK     string `json:"ark"`
	Target  string `json:"target,omitempty"`  // as Target.Name shows it
	Version int    `json:"version,omitempty"` // the version it is about; 0: the object
	File    string `json:"file,omitempty"`    // object-relative
	Message string `json:"message"`           // what was found and what to do, for a person
}

func (f Finding) String() string { return string(f.Kind) + ": " + f.Message }

// recovery is where the README says how to restore an object.
const recovery = `README "Backups and recovery"`

// versionsText is "version 3", or "versions 2 to 4".
func versionsText(from, to int) string {
	if from == to {
		return fmt.Sprintf("version %d", from)
	}
	return fmt.Sprintf("versions %d to %d", from, to)
}

// isAre is "version 3 is", or "versions 2 to 4 are".
func isAre(from, to int) string {
	if from == to {
		return versionsText(from, to) + " is"
	}
	return versionsText(from, to) + " are"
}

// them is "it" for one version, "them" for more.
func them(from, to int) string {
	if from == to {
		return "it"
	}
	return "them"
}

// shown is err's text as a finding shows it, the target's URL redacted.
func (t Target) shown(err error) string { return redact.In(err.Error(), t.URL) }

// fileDigest is a file's size and digest as a message shows them.
func fileDigest(size int64, sha256 string) string {
	if size == storage.Absent {
		return fmt.Sprintf("SHA-256 %s, its content gone", sha256)
	}
	return fmt.Sprintf("%d bytes, SHA-256 %s", size, sha256)
}
