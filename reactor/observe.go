package reactor

import (
	"fmt"
	"strings"
	"time"

	"github.com/ingestq/ingestq/reactor/queue"
)

// Observer is told what the reactor does, for the daemon's metrics. Its
// methods are called from the workers: they must be quick and never block.
type Observer interface {
	// StepRan is called after each run of a job state's handler.
	StepRan(s queue.State, result StepResult, took time.Duration)
	// Moved is called after each commit of a job's or a batch's (kind)
	// transition out of state from: outcome is the state entered, or
	// what became of the commit (Abandoned, Unknown, NotCommitted).
	Moved(kind string, from queue.State, outcome string)
	// Transferred is called as a step moves bytes (Step.Transferred).
	Transferred(what Transfer, n int64)
}

// StepResult is how one run of a step ended.
type StepResult string

// The results of a step's run.
const (
	StepDone      StepResult = "done"      // the job moves on
	StepWait      StepResult = "wait"      // not yet: tried again later (Provisioning)
	StepRetry     StepResult = "retry"     // a retryable error; tried again after a backoff
	StepFailed    StepResult = "failed"    // a fatal error, or the last attempt: the job fails
	StepCancelled StepResult = "cancelled" // shutdown cut it off
	StepAbandoned StepResult = "abandoned" // the job changed under the step (an operator, another session): no longer this daemon's
)

// What became of a commit that did not land as written.
const (
	Abandoned    = "abandoned"     // another session moved the item first: the result is dropped
	Unknown      = "unknown"       // ZooKeeper's answer was lost or never came: the commit may have landed
	NotCommitted = "not_committed" // ZooKeeper refused or could not be reached: the item stays
)

// Transfer names the bytes a step moves.
type Transfer string

// The transfers a step reports.
const (
	Downloaded Transfer = "downloaded" // fetched from the depositor's URLs
	Stored     Transfer = "stored"     // written to storage, each copy counted
)

// Transferred tells the daemon's observer that the step moved n bytes.
func (s *Step) Transferred(what Transfer, n int64) {
	if s.obs != nil && n > 0 {
		s.obs.Transferred(what, n)
	}
}

// nopObserver is the Observer of a reactor given none.
type nopObserver struct{}

func (nopObserver) StepRan(queue.State, StepResult, time.Duration) {}
func (nopObserver) Moved(string, queue.State, string)              {}
func (nopObserver) Transferred(Transfer, int64)                    {}

// RetryingPrefix starts the status message of a job whose step failed and
// is tried again: the reason is then visible to every reader of the queue
// (`ingestq ls jobs --stalled` tells it from a step that is just slow).
const RetryingPrefix = "retrying after error"

// retryingMessage is a job's status message while its step backs off,
// and a Pending batch's while its intake does (withRetries).
func retryingMessage(attempt, attempts int, err error) string {
	return fmt.Sprintf("%s (attempt %d of %d): %v", RetryingPrefix, attempt, attempts, err)
}

// Retrying tells whether a job's status message says its step is retried.
func Retrying(message string) bool { return strings.HasPrefix(message, RetryingPrefix) }
