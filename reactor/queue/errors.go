package queue

import (
	"errors"
	"fmt"
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
)

// StaleError says whose view was stale and why.
type StaleError struct {
	Path   string // the node whose version no longer matched
	Reason string
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("%s: stale view: %s", e.Path, e.Reason)
}

// Is makes errors.Is(err, ErrStale) true.
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// CorruptError names a node the queue could not read and what is wrong with it.
type CorruptError struct {
	Path   string
	Reason string
}

func (e *CorruptError) Error() string { return fmt.Sprintf("%s: %s", e.Path, e.Reason) }

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

func corrupt(path, format string, args ...any) error {
	return &CorruptError{Path: path, Reason: fmt.Sprintf(format, args...)}
}

func notFound(kind, id string) error {
	return fmt.Errorf("%s %s: %w", kind, id, ErrNotFound)
}

func refused(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
}
