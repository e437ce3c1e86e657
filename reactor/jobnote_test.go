package reactor_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// A step's note to the depositor stays in the job's message through the
// later steps: a checkpoint's message (a wait's reason) and a retry's keep
// it after theirs, and the moves on to Completed keep it alone.
func TestJobNoteStaysThroughLaterSteps(t *testing.T) {
	const note = queue.NotePrefix + "two names are one elsewhere"
	e := newEnv(t)
	batches := e.outside("ingestq.batch.>")
	seen := make(chan string, 2) // the job's message after Storing's checkpoint, then at Recording's retry
	var recordingTries int
	e.daemon("host-a", func(c *reactor.Config) {
		c.Backoff = time.Millisecond
		processing, storing, recording := c.Jobs[queue.Processing], c.Jobs[queue.Storing], c.Jobs[queue.Recording]
		message := func(ctx context.Context, s *reactor.Step) error {
			j, err := e.q.LoadJob(ctx, s.Job.ID)
			if err == nil {
				seen <- j.Status.Message
			}
			return err
		}
		c.Jobs[queue.Processing] = reactor.JobHandlerFunc(func(ctx context.Context, s *reactor.Step) (reactor.Result, error) {
			res, err := processing.Handle(ctx, s)
			res.Change.Message = note
			return res, err
		})
		c.Jobs[queue.Storing] = reactor.JobHandlerFunc(func(ctx context.Context, s *reactor.Step) (reactor.Result, error) {
			if err := s.Checkpoint(ctx, "why it waits", queue.JobChange{Message: "waiting for the object's lock"}); err != nil {
				return reactor.Result{}, err
			}
			if err := message(ctx, s); err != nil {
				return reactor.Result{}, err
			}
			return storing.Handle(ctx, s)
		})
		c.Jobs[queue.Recording] = reactor.JobHandlerFunc(func(ctx context.Context, s *reactor.Step) (reactor.Result, error) {
			if recordingTries++; recordingTries == 1 {
				return reactor.Result{}, errors.New("the inventory answered 503")
			}
			if err := message(ctx, s); err != nil {
				return reactor.Result{}, err
			}
			return recording.Handle(ctx, s)
		})
	})
	b := e.submit(map[string]any{"profile_name": "demo", "payload_url": "passthrough:1"})
	if rep := e.waitBatch(batches, b.ID); rep.To != "Completed" {
		t.Fatalf("batch ended %s: %s", rep.To, rep.Message)
	}
	if msg := <-seen; msg != "waiting for the object's lock; "+note {
		t.Errorf("message after a checkpoint: %q, want its reason, then the note", msg)
	}
	if msg := <-seen; !reactor.Retrying(msg) || queue.Note(msg) != note {
		t.Errorf("message while retrying: %q, want the retry's, then the note", msg)
	}
	j := e.firstCompleted(b.ID)
	if j.Status.Message != note {
		t.Errorf("completed job's message %q, want the note alone", j.Status.Message)
	}
}

// firstCompleted is the first job a reported batch lists as completed.
func (e *env) firstCompleted(bid string) *queue.Job {
	e.t.Helper()
	b, err := e.q.LoadBatch(e.t.Context(), bid)
	if err != nil {
		e.t.Fatal(err)
	}
	if len(b.Report.SuccessfulJobs) == 0 {
		e.t.Fatalf("batch %s: no completed job in its report %+v", bid, b.Report)
	}
	j, err := e.q.LoadJob(e.t.Context(), b.Report.SuccessfulJobs[0])
	if err != nil {
		e.t.Fatal(err)
	}
	return j
}
