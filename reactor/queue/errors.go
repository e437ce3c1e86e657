package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrStale means the caller's view of a job, batch or request is out of
	// date: someone else changed its status since it was read. Nothing was written.
	ErrStale = errors.New("stale view")
	// ErrNotFound means the batch, job or request does not exist.
	ErrNotFound = errors.New("not found")
	// ErrIllegalTransition means the state machine has no such edge.
	ErrIllegalTransition = errors.New("illegal transition")
	// ErrCorrupt means a node holds data the queue cannot read.
	ErrCorrupt = errors.New("corrupt node")
	// ErrLocked means another session holds the lock.
	ErrLocked = errors.New("locked by another session")
	// ErrRefused means an admin action does not apply to the item as it is.
	ErrRefused = errors.New("refused")
	// ErrIncomplete means a batch or job has no status yet: a creation
	// under way (mrt-zk writes a new item's nodes one by one), or one that a
	// crash cut short. It is also an ErrCorrupt.
	ErrIncomplete = errors.New("incomplete")
	// ErrCreating is an ErrIncomplete item young enough (under huskAge)
	// that its creation may still be going on: asked again in a moment,
	// it is there whole.
	ErrCreating = errors.New("being created")
	// ErrTooLarge means a request was not sent: it is over the packet
	// ZooKeeper takes (zkconn.MaxPacket). Nothing was written.
	ErrTooLarge = errors.New("too large for ZooKeeper")
	// ErrBatchGone means a batch uuid names a batch that is no more: the
	// uuid's node was left behind. It is also an ErrNotFound.
	ErrBatchGone = errors.New("batch gone")
)

// StaleError says whose view was stale and why.
type StaleError struct {
	Path   string // the node whose version no longer matched
	Reason string
	// MaybeApplied: an earlier try of the same change lost its reply, so
	// that try may have been applied before the other session moved on.
	// The change's outcome is unknown, not known to be refused. Unset when
	// the version the change would have made holds other bytes: no try
	// of it landed.
	MaybeApplied bool
}

func (e *StaleError) Error() string {
	if e.MaybeApplied {
		return fmt.Sprintf("%s: stale view: %s (an earlier try whose reply was lost may have been applied)", e.Path, e.Reason)
	}
	return fmt.Sprintf("%s: stale view: %s", e.Path, e.Reason)
}

// MaybeApplied tells whether err is a stale view whose change may still
// have been applied by an earlier try whose reply was lost.
func MaybeApplied(err error) bool {
	var se *StaleError
	return errors.As(err, &se) && se.MaybeApplied
}

// OutcomeUnknown tells whether a write that returned err may still have
// been applied: ZooKeeper never said no. Its reply was lost (MaybeApplied),
// or the wait for it ended first (an outage, the caller's context), so the
// request may have reached the server. A refusal, a stale view or a
// corrupt node is a known outcome: nothing was written.
func OutcomeUnknown(err error) bool {
	return MaybeApplied(err) || Transient(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// Is makes errors.Is(err, ErrStale) true.
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// CorruptError names a node the queue could not read and what is wrong with it.
type CorruptError struct {
	Path       string
	Reason     string
	incomplete bool // its status is missing
	creating   bool // and its node is young: a creation may be going on
}

func (e *CorruptError) Error() string { return fmt.Sprintf("%s: %s", e.Path, e.Reason) }

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool {
	return target == ErrCorrupt || (e.incomplete && target == ErrIncomplete) || (e.creating && target == ErrCreating)
}

// missingStatus is the error of an item whose status node is not there;
// made is its item node's (nil: not read).
func (q *Queue) missingStatus(path string, made *zk.Stat) error {
	if made != nil && q.young(made.Ctime) {
		return &CorruptError{Path: path, incomplete: true, creating: true,
			Reason: "missing: being created by another program (it writes the item's nodes one by one); ask again in a moment"}
	}
	return &CorruptError{Path: path, Reason: "missing (a creation that did not finish?)", incomplete: true}
}

// young tells whether a node made at ctime (ms) is younger than a
// creation can take (huskAge): a part of it missing may still come.
func (q *Queue) young(ctime int64) bool { return ctime > q.huskCutoff() }

// huskCutoff is the time (ms) a node must be written before to be older
// than huskAge: young's rule, read once for a walk of many nodes.
func (q *Queue) huskCutoff() int64 { return q.now().Add(-huskAge).UnixMilli() }

func corrupt(path, format string, args ...any) error {
	return &CorruptError{Path: path, Reason: fmt.Sprintf(format, args...)}
}

// busyError refuses an item another session holds, saying so once in
// plain words; it is an ErrLocked.
type busyError struct{ msg string }

func (e busyError) Error() string        { return e.msg }
func (e busyError) Is(target error) bool { return target == ErrLocked }

func busy(format string, args ...any) error {
	return busyError{fmt.Sprintf(format, args...)}
}

// missingError says in its own words that something does not exist; it
// is an ErrNotFound without ending in "not found" a second time.
type missingError struct {
	msg  string
	also error // another sentinel it is, or nil
}

func (e missingError) Error() string { return e.msg }
func (e missingError) Is(target error) bool {
	return target == ErrNotFound || e.also != nil && target == e.also
}

// Missing is an ErrNotFound whose message, worded whole, already says so
// ("no such batch", "is not in the inventory").
func Missing(format string, args ...any) error {
	return missingError{msg: fmt.Sprintf(format, args...)}
}

func notFound(kind, id string) error {
	return fmt.Errorf("%s %s: %w", kind, id, ErrNotFound)
}

func refused(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
}

// AdvisedError is a refusal whose advice names what to do next, said once
// for each way of acting on the queue: for a person at the CLI (a command
// line), for a program calling the HTTP API (a request), and for a person
// on the dashboard (its buttons). Error gives the CLI's; ops.Detail gives
// each caller its own.
type AdvisedError struct {
	Err error  // the refusal itself, without advice
	CLI string // e.g. "`ingestq fail --force jid1` stops it"
	API string // e.g. "POST /api/v1/jobs/jid1/fail with {\"force\": true} stops it"
	UI  string // e.g. "Fail (a button of the job's page) first"; "" says API's
}

func (e *AdvisedError) Error() string { return e.Err.Error() + "; " + e.CLI }
func (e *AdvisedError) Unwrap() error { return e.Err }

// Advised adds advice to a refusal, for the CLI, for the API and for the
// dashboard (ui "" when the dashboard has no button for it: the API's
// request is said).
func Advised(err error, cli, api, ui string) error {
	return &AdvisedError{Err: err, CLI: cli, API: api, UI: ui}
}
