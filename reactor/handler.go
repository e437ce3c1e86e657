package reactor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ingestq/ingestq/reactor/queue"
)

// JobHandler does one state's work for one acquired job. It must be safe to
// run again on the same job: a daemon that dies mid-step leaves the job in
// its state, and another daemon runs the step again (resume, do not redo).
type JobHandler interface {
	Handle(ctx context.Context, s *Step) (Result, error)
}

// JobHandlerFunc adapts a function to JobHandler.
type JobHandlerFunc func(ctx context.Context, s *Step) (Result, error)

// Handle calls f.
func (f JobHandlerFunc) Handle(ctx context.Context, s *Step) (Result, error) { return f(ctx, s) }

// Step is an acquired job as its handler sees it. A step writes to the job
// in two ways only: its Result, with the transition, and Checkpoint, for
// what must be saved before the step ends.
type Step struct {
	Job   *queue.Job // as read at acquisition; a checkpoint updates it
	save  func(ctx context.Context, c queue.JobChange) error
	obs   Observer                  // told of Transferred bytes; nil for none
	doing atomic.Pointer[WaitingOn] // what it waits on now (Doing)
	moved atomic.Int64              // when bytes last moved with it (Moved), in Unix ns; 0: never
	mu    sync.Mutex
	named []string // every back end it waited on: a step that succeeds got an answer from each
}

// WaitingOn is what a running step waits on, and since when. For a step
// that moves bytes with it (Moved: a download), Moving says bytes moved
// within slowStep, however slowly; else NoByteSince says when the last
// came (zero: none ever did). Neither changes while bytes keep moving or
// keep not moving: the host node is rewritten at a change only.
type WaitingOn struct {
	What        string    `json:"what"`
	Since       time.Time `json:"since"`
	Moving      bool      `json:"moving,omitempty"`
	NoByteSince time.Time `json:"no_byte_since,omitzero"`
}

// String says it for an operator: "waits on WHAT since T", with "no byte
// since T2" when bytes had moved, or "moves bytes with WHAT (since T)"
// while they do. A download streaming slowly and one whose server hangs
// read alike before.
func (w WaitingOn) String() string {
	switch {
	case w.Moving:
		return fmt.Sprintf("moves bytes with %s (since %s)", w.What, queue.TextTime(w.Since))
	case !w.NoByteSince.IsZero():
		return fmt.Sprintf("waits on %s since %s, no byte since %s", w.What, queue.TextTime(w.Since), queue.TextTime(w.NoByteSince))
	}
	return fmt.Sprintf("waits on %s since %s", w.What, queue.TextTime(w.Since))
}

// Moved says bytes moved with what the step waits on just now (a
// download's progress), for WaitingOn's Moving and NoByteSince.
func (s *Step) Moved() { s.moved.Store(time.Now().UnixNano()) }

// waitingOn is what the step waits on at now (nil: it named nothing).
func (s *Step) waitingOn(now time.Time) *WaitingOn {
	w := s.doing.Load()
	if w == nil {
		return nil
	}
	out := *w
	if ns := s.moved.Load(); ns != 0 {
		last := time.Unix(0, ns)
		out.Moving = now.Sub(last) < slowStep
		if !out.Moving {
			out.NoByteSince = last.UTC().Truncate(time.Second)
		}
	}
	return &out
}

// Doing says what the step waits on from now on (a back end: "storage
// target s3://…", "the inventory"). It writes nothing: a step that runs
// longer than slowStep is listed with it in its host's node, where
// `ingestq ls jobs --stalled` finds it. A step that succeeds got an answer
// from each back end it named: one this daemon found out is back.
func (s *Step) Doing(what string) {
	// Bytes moved before were another wait's: a job taken over runs its
	// download, then its storage put, in one step.
	s.moved.Store(0)
	s.doing.Store(&WaitingOn{What: what, Since: time.Now().UTC().Truncate(time.Second)})
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.named, what) {
		s.named = append(s.named, what)
	}
}

// backEnds are the back ends the step named with Doing.
func (s *Step) backEnds() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.named)
}

// NewStep is a step of j whose checkpoints save writes (tests, and
// handlers that wrap others).
func NewStep(j *queue.Job, save func(ctx context.Context, c queue.JobChange) error) *Step {
	return &Step{Job: j, save: save}
}

// Checkpoint writes c to the job now, without a change of state and fenced
// as the result will be: what must outlive a crash of this step, such as
// the reason a job waits (c.Message), or the results of earlier steps run
// again on a host taking the job over. what names the checkpoint in its
// error.
func (s *Step) Checkpoint(ctx context.Context, what string, c queue.JobChange) error {
	if err := s.save(ctx, c); err != nil {
		return fmt.Errorf("job %s: saving %s: %w", s.Job.ID, what, err)
	}
	return nil
}

// Result is what a successful step writes with its transition.
type Result struct {
	// Change carries job data to write in the same multi() as the move to
	// the next state: priority, space_needed, identifiers, store, inventory.
	Change queue.JobChange
	// Wait, when positive, means "not yet": the job stays in its state, its
	// lock is released, and it is tried again after Wait (Provisioning).
	// Only this daemon waits: another may take the job at once, unless the
	// step wrote a queue.Deferral into its status (Checkpoint).
	Wait time.Duration
	// Attrs are added to the transition's event.
	Attrs map[string]any
}

// BatchHandler reads an acquired Pending batch's payload: one Object per
// job to make, each with a key unique within the batch. The reactor makes
// the jobs (EnsureJobs; a window at a time past Config.Window objects). It
// runs again after a crash, and on a retry: it must give the same objects.
type BatchHandler interface {
	Objects(ctx context.Context, b *queue.Batch) ([]Object, error)
}

// Noter is a BatchHandler with something to tell the depositor of a batch
// whose objects it read: what of the submission they do not use. The note
// becomes the batch's message with its move to Processing and stays in its
// report's; it fails nothing.
type Noter interface {
	Note(b *queue.Batch, objs []Object) string
}

// Paced is a BatchHandler whose jobs are made in tens, with a pause after
// each ten (the pass-through pipeline's create_pace), so that fault tests
// can stop a daemon while it is making a batch's jobs.
type Paced interface {
	CreatePace(b *queue.Batch) time.Duration
}

// Selective is a pipeline that works only some of a queue's payloads (the
// pass-through pipeline takes only "passthrough:N"). A daemon running it
// passes over other batches and jobs without touching them, for the
// daemons that run the pipeline they belong to.
type Selective interface {
	Takes(payloadURL string) bool
}

// Reporter tells the depositor how a batch went. It may run again for the
// same report if the daemon dies between reporting and recording it. An
// error is retried with the reactor's attempts, unless marked Fatal; then
// the batch ends all the same, Completed or Failed as its jobs say, with
// "report not delivered" and the error in its message.
type Reporter interface {
	Report(ctx context.Context, b *queue.Batch, r Report) error
}

// Report is a batch's outcome.
type Report struct {
	queue.StatusReport
	Messages map[string]string             // failed jid → its message
	Objects  map[string]*queue.Identifiers // completed or failed jid → its object's identifiers (ARK, local ids)
	Update   bool                          // a report asked for again (UpdateReporting)
	Message  string                        // a batch-level failure (its payload could not be read)
	Note     string                        // the batch handler's note (queue.NotePrefix…): no failure
	Stored   queue.StatusReport            // the status-report node as it is stored: bounded, archived jobs left out
	Failure  string                        // how many jobs failed, or the batch-level failure: the Summary before its note
	Summary  string                        // the batch's message as it is stored ("1 of 3 jobs failed; …")
	// Sent names the ways a Reporter delivered this report (its own
	// names), so that a retry of the step sends only what failed.
	Sent map[string]bool
	// Notes gives each job of the report that has a note (queue.Note: names
	// its object holds that another system loses, say) that note, in jid
	// order until statusDetailBudget bytes, an archived job's as its
	// batch's archive keeps it; NotesLeftOut counts the rest.
	Notes        map[string]string
	NotesLeftOut int
}

// Failed tells whether the batch ends Failed: a failed job, or no job at all
// because of a batch-level failure.
func (r Report) Failed() bool { return len(r.FailedJobs) > 0 || r.Message != "" }

// fatalError marks an error that retrying cannot fix.
type fatalError struct{ err error }

func (e fatalError) Error() string { return e.err.Error() }
func (e fatalError) Unwrap() error { return e.err }

// Fatal marks err as fatal: the job goes to Failed at once, without retries
// (a digest mismatch, a corrupt manifest, an id mismatch, bad input).
// Errors not marked are retryable.
func Fatal(err error) error {
	if err == nil {
		return nil
	}
	return fatalError{err}
}

// IsFatal tells whether err (or an error it wraps) was marked Fatal.
func IsFatal(err error) bool {
	var f fatalError
	return errors.As(err, &f)
}

// laterError is a batch handler's "not yet" (Later).
type laterError struct {
	until time.Time
	why   string
}

func (e *laterError) Error() string { return e.why }

// Later is a BatchHandler's error for a batch to be tried again at until,
// as a job step's Result.Wait with a queue.Deferral is: it spends no
// attempt, the batch stays Pending with why as its message and the
// deferral in its status, its lock is let go, and every daemon's batch
// workers pass over it until then, working other batches (a depositor's
// busy payload server, handlers).
func Later(until time.Time, why string) error { return &laterError{until: until, why: why} }
