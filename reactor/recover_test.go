package reactor_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Moves another session made without publishing their events (a daemon
// SIGKILLed between its commit and its publish, or a foreign program) are
// published by the daemon that takes the job next, and the jobs' last
// moves by the reporter: each once, marked as recovered, while the moves
// the daemon made itself are not doubled.
func TestMovesWithoutEventsAreRecovered(t *testing.T) {
	e := newEnv(t)
	batches := e.outside("ingestq.batch.>")
	foreign := e.queue(e.session())
	ctx := t.Context()

	b, jobs := foreignBatch(e, foreign, 2)
	// The first job is left in Downloading (its move there has no event),
	// the second in Completed: what a host killed at those moves leaves.
	second := walkWithoutEvents(t, foreign, jobs[1], queue.Completed)
	first := walkWithoutEvents(t, foreign, jobs[0], queue.Downloading)
	foreignProcessing(t, foreign, b, 2)

	e.daemon("host-a")
	if rep := e.waitBatch(batches, b.ID); rep.To != "Completed" {
		t.Fatalf("batch ended %s: %s", rep.To, rep.Message)
	}
	got := jobEvents(t, e.bus, b.ID)
	check := func(j *queue.Job, want []string) {
		t.Helper()
		var states []string
		var rec events.Event
		for _, ev := range got[j.ID] {
			states = append(states, ev.To)
			if ev.To == want[0] {
				rec = ev
			}
		}
		slices.SortFunc(states, func(a, b string) int { return slices.Index(fullTimeline, a) - slices.Index(fullTimeline, b) })
		if !slices.Equal(states, want) {
			t.Fatalf("job %s: events to %v, want %v", j.ID, states, want)
		}
		if rec.RecoveredBy != "host-a" || rec.Host != "" || rec.ID != j.ArrivalID() || rec.Time.IsZero() || rec.From != "" {
			t.Fatalf("job %s: recovered event %+v; want recovered_by host-a, no host, id %s, the move's time, no from (not known)", j.ID, rec, j.ArrivalID())
		}
		for _, ev := range got[j.ID] {
			if ev.To == want[0] {
				continue
			}
			if ev.RecoveredBy != "" || ev.Host != "test" {
				t.Fatalf("job %s: the daemon's own event %+v is marked recovered or lacks its host (the bus's, test)", j.ID, ev)
			}
		}
	}
	check(first, []string{"Downloading", "Processing", "Storing", "Recording", "Notify", "Completed"})
	check(second, []string{"Completed"})
	// The recovered event keeps the move's time to the millisecond, from
	// the status node's mtime (last_modified keeps seconds only), so a
	// replay sorts it among other jobs' events as it happened.
	ended, err := foreign.LoadJob(ctx, second.ID)
	if err != nil {
		t.Fatal(err)
	}
	var rec events.Event
	for _, ev := range got[second.ID] {
		rec = ev
	}
	if want := ended.Status.MovedAt(); !rec.Time.Equal(want) {
		t.Errorf("recovered event of %s at %s, want %s (status node written at %s, last_modified %s)",
			second.ID, rec.Time.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano), ended.Status.Mtime.UTC().Format(time.RFC3339Nano), ended.Status.LastModified)
	}
	// The batch's move to Processing was the foreign intake's: the
	// reporter publishes it, before its own move to Reporting.
	wantBatchEvents(t, e.bus, b.ID, "Processing (recovered by host-a)", "Reporting", "Completed")
	e.clean()
}

// foreignBatch submits a batch of n jobs (profile demo, passthrough:n)
// and has foreign, another program's session, take it and make its jobs,
// publishing nothing. The batch is left acquired, for foreignProcessing.
func foreignBatch(e *env, foreign *queue.Queue, n int) (*queue.Batch, []*queue.Job) {
	t, ctx := e.t, e.t.Context()
	t.Helper()
	payload := fmt.Sprintf("passthrough:%d", n)
	b := e.submit(map[string]any{"profile_name": "demo", "payload_url": payload})
	taken, _, err := foreign.AcquirePendingBatch(ctx, nil)
	if err != nil || taken == nil || taken.ID != b.ID {
		t.Fatalf("acquire batch: %v %v", taken, err)
	}
	var jobs []*queue.Job
	for range n {
		j, err := foreign.CreateJob(ctx, taken, queue.JobSpec{Priority: queue.DefaultPriority, Config: queue.JobConfig{PayloadURL: payload}})
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j)
	}
	return taken, jobs
}

// foreignProcessing moves b, which foreign took, to Processing with its n
// jobs made, and lets it go, publishing nothing.
func foreignProcessing(t *testing.T, foreign *queue.Queue, b *queue.Batch, n int) {
	t.Helper()
	if err := foreign.SetBatchStatus(t.Context(), b, queue.Processing, queue.BatchChange{Release: true, JobCount: &n}); err != nil {
		t.Fatal(err)
	}
}

// walkWithoutEvents moves j from Pending to to through q, publishing
// nothing: what a host killed at each move, or another program, leaves.
func walkWithoutEvents(t *testing.T, q *queue.Queue, j *queue.Job, to queue.State) *queue.Job {
	t.Helper()
	for s := queue.Pending; s != to; {
		got, err := q.TryAcquireJob(t.Context(), s, j.Ref(), queue.Admission{})
		if err != nil || got == nil || got.ID != j.ID {
			t.Fatalf("acquire %s in %s: %v %v", j.ID, s, got, err)
		}
		next, _ := queue.JobMachine.Success(s)
		if s == queue.Pending {
			next = queue.Estimating // the batch handler's start, not a step's success
		}
		if err := q.SetJobStatus(t.Context(), got, next, queue.JobChange{Release: true}); err != nil {
			t.Fatal(err)
		}
		s, j = next, got
	}
	return j
}

// frozenAfter is an Observer that stops the daemon's worker right after
// its commit of a job's move out of from, before anything it does next:
// a daemon SIGKILLed between its commit and its publishes, as far as the
// stream can tell, until release is closed.
type frozenAfter struct {
	reactor.Observer
	from     queue.State
	frozen   chan struct{}
	release  chan struct{}
	stopOnce sync.Once
}

func (o *frozenAfter) Moved(kind string, from queue.State, _ string) {
	if kind == "job" && from == o.from {
		o.stopOnce.Do(func() { close(o.frozen) })
		<-o.release
	}
}
func (*frozenAfter) StepRan(queue.State, reactor.StepResult, time.Duration) {}
func (*frozenAfter) Transferred(reactor.Transfer, int64)                    {}

// The daemon that takes a job whose arrival has no event publishes that
// event before it commits its own move, not after: killed right after its
// commit, it takes only its own move's event with it (which the job's next
// mover recovers), never the one before. Two hosts killed one after the
// other at the same job's moves lost the first move's event (seen in
// TestClusterOfThreeHosts).
func TestArrivalRecoveredBeforeTheNextMove(t *testing.T) {
	e := newEnv(t)
	seen := e.outside("ingestq.job.>")
	foreign := e.queue(e.session())
	b, jobs := foreignBatch(e, foreign, 1)
	j := walkWithoutEvents(t, foreign, jobs[0], queue.Downloading)
	foreignProcessing(t, foreign, b, 1)

	obs := &frozenAfter{from: queue.Downloading, frozen: make(chan struct{}), release: make(chan struct{})}
	defer close(obs.release)
	e.daemon("host-a", func(c *reactor.Config) { c.Observer = obs })
	select {
	case <-obs.frozen:
	case <-time.After(time.Minute):
		t.Fatal("the daemon never moved the job out of Downloading")
	}
	// Frozen after the commit: the stream must have the arrival already.
	for deadline := time.After(30 * time.Second); ; {
		select {
		case ev := <-seen:
			if ev.JobID == j.ID && ev.To == string(queue.Downloading) {
				if ev.RecoveredBy != "host-a" {
					t.Fatalf("event of the move to Downloading %+v, want it recovered by host-a", ev)
				}
				return
			}
		case <-deadline:
			t.Fatalf("job %s: no event of its move to Downloading while the daemon that moved it on is stopped after its commit", j.ID)
		}
	}
}

// A batch whose last move (Completed, Failed) has no event, because its
// reporter stopped before publishing it or is another program, gets it
// from the next daemon that looks at every batch: at its start, and at each
// safety rescan. One that a reporter stopped in Reporting is taken over,
// its move to Reporting published as recovered (decision 222).
func TestBatchMovesWithoutEventsAreRecovered(t *testing.T) {
	e := newEnv(t)
	batches := e.outside("ingestq.batch.>")
	foreign := e.queue(e.session())
	stopped := e.session() // the reporter that stops in Reporting
	ctx := t.Context()
	// A batch with no jobs, taken to Processing and then to Reporting by
	// the given session, without events.
	reporting := func(q *queue.Queue) *queue.Batch {
		b, _ := foreignBatch(e, foreign, 0)
		foreignProcessing(t, foreign, b, 0)
		got, _, err := q.AcquireCompletedBatch(ctx, []string{b.ID}, nil)
		if err != nil || got == nil || got.State() != queue.Reporting {
			t.Fatalf("acquire batch %s for its report: %v %v", b.ID, got, err)
		}
		return got
	}
	ended := reporting(foreign)
	report := &queue.StatusReport{SuccessfulJobs: []string{"jid0000000001", "jid0000000002"}, FailedJobs: []string{}}
	at := time.Now().Add(-time.Minute) // long enough ago for its maker's publish to have been given up
	two := 2
	if err := foreign.SetBatchStatus(ctx, ended, queue.Completed, queue.BatchChange{Release: true, Report: report, JobCount: &two, At: at}); err != nil {
		t.Fatal(err)
	}
	taken := reporting(e.queue(stopped))
	stopped.Close() // its lock goes with its session

	e.daemon("host-a")
	if rep := e.waitBatch(batches, taken.ID); rep.To != "Completed" || rep.Host != "test" {
		t.Fatalf("taken-over batch ended %s by %q: %s", rep.To, rep.Host, rep.Message)
	}
	wantBatchEvents(t, e.bus, taken.ID, "Reporting (recovered by host-a)", "Completed")
	rec := e.waitBatch(batches, ended.ID)
	if rec.To != "Completed" || rec.RecoveredBy != "host-a" || rec.Host != "" || rec.ID != ended.ArrivalID() || rec.Time.Sub(at).Abs() > time.Second {
		t.Fatalf("recovered end %+v; want Completed, recovered_by host-a, no host, id %s, the move's time %v", rec, ended.ArrivalID(), at)
	}
	if rec.Attrs["successful_count"] != 2.0 || rec.Attrs["failed_count"] != 0.0 {
		t.Fatalf("recovered end's attributes %v; want the status-report's counts (2 successful, 0 failed)", rec.Attrs)
	}
	wantBatchEvents(t, e.bus, ended.ID, "Completed (recovered by host-a)")
}

// wantBatchEvents replays the batch's own events and compares their states
// in stream order, a recovered one written "State (recovered by HOST)".
func wantBatchEvents(t *testing.T, bus *events.Bus, bid string, want ...string) {
	t.Helper()
	if err := bus.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got []string
	err := events.Replay(context.Background(), bus.Conn(), "", events.Filter{BatchID: bid}, func(ev events.Event) error {
		switch {
		case ev.Kind != events.KindBatch:
		case ev.RecoveredBy != "":
			got = append(got, ev.To+" (recovered by "+ev.RecoveredBy+")")
		default:
			got = append(got, ev.To)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("batch %s: events %q, want %q", bid, got, want)
	}
}

// The daemon's own moves cost no lookup and publish no recovered event:
// with one daemon, every job's timeline is its own events only.
func TestOwnMovesAreNotRecovered(t *testing.T) {
	e := newEnv(t)
	batches := e.outside("ingestq.batch.>")
	e.daemon("host-a")
	b := e.submit(map[string]any{"profile_name": "demo", "payload_url": "passthrough:20"})
	if rep := e.waitBatch(batches, b.ID); rep.To != "Completed" {
		t.Fatalf("batch ended %s: %s", rep.To, rep.Message)
	}
	if err := e.bus.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := 0
	err := events.Replay(context.Background(), e.bus.Conn(), "", events.Filter{BatchID: b.ID}, func(ev events.Event) error {
		if ev.Kind != events.KindJob {
			return nil
		}
		n++
		if ev.RecoveredBy != "" {
			t.Errorf("job %s: recovered event %+v though this daemon made every move", ev.JobID, ev)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := 20 * len(fullTimeline); n != want {
		t.Fatalf("%d job events, want %d", n, want)
	}
}

// jobEvents replays a batch's job events, by job.
func jobEvents(t *testing.T, bus *events.Bus, bid string) map[string][]events.Event {
	t.Helper()
	if err := bus.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := map[string][]events.Event{}
	err := events.Replay(context.Background(), bus.Conn(), "", events.Filter{BatchID: bid}, func(ev events.Event) error {
		if ev.Kind == events.KindJob {
			got[ev.JobID] = append(got[ev.JobID], ev)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}
