package reactor_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor/queue"
)

// The job-level path of a collection hold: a batch taken before the hold
// (Processing, its jobs Pending) sees its Pending jobs go to Held, not
// Estimating, while another profile's batch runs to Completed; once the
// operator releases the collection and the held jobs, they complete and the
// batch reports Completed, once.
func TestCollectionHoldSendsPendingJobsToHeld(t *testing.T) {
	const (
		frozen = "frozen"
		n      = 4
	)
	e := newEnv(t)
	heldEvents := e.outside("ingestq.job.held.*")
	jobEvents := e.outside("ingestq.job.>")
	batches := e.outside("ingestq.batch.>")
	canaries := e.outside("ingestq.batch.>")

	// The batch is taken before the hold, as a daemon takes it: acquired,
	// its jobs created, moved to Processing. Each job's lock stays with the
	// operator's session, so no daemon can start a job before it has seen
	// the hold: the jobs are Pending, in a Processing batch, when it comes.
	b := e.submit(map[string]any{"profile_name": frozen, "payload_url": fmt.Sprintf("passthrough:%d", n)})
	taken, _, err := e.q.AcquirePendingBatch(context.Background(), nil)
	if err != nil || taken == nil || taken.ID != b.ID {
		t.Fatalf("acquire the pending batch: %v %v, want %s", taken, err, b.ID)
	}
	locked := make([]*queue.Job, n)
	jids := make([]string, n)
	for i := range n {
		j, err := e.q.CreateJob(t.Context(), taken, queue.JobSpec{Priority: queue.DefaultPriority, Config: queue.JobConfigOf(map[string]any{
			"profile_name": frozen, "payload_url": fmt.Sprintf("passthrough:%d", n), "object_key": fmt.Sprintf("obj-%06d", i)})})
		if err != nil {
			t.Fatal(err)
		}
		if locked[i], err = e.q.LockJob(t.Context(), j.ID); err != nil {
			t.Fatal(err)
		}
		jids[i] = j.ID
	}
	if err := e.q.SetBatchStatus(t.Context(), taken, queue.Processing, queue.BatchChange{Release: true}); err != nil {
		t.Fatal(err)
	}

	e.daemon("host-a")
	if _, err := e.q.HoldCollection(t.Context(), frozen); err != nil {
		t.Fatal(err)
	}
	holdCanaries := awaitCollectionView(e, canaries, frozen, true)
	open := e.submit(map[string]any{"profile_name": "open", "payload_url": "passthrough:3"})

	for i, j := range locked {
		got, err := e.q.LoadJob(t.Context(), j.ID)
		if err != nil || got.State() != queue.Pending {
			t.Fatalf("job %s before its unlock: %v %v, want Pending", j.ID, got, err)
		}
		if err := e.q.UnlockJob(t.Context(), locked[i]); err != nil {
			t.Fatal(err)
		}
	}

	// Every job of the held collection goes Pending → Held.
	heldSeen := map[string]bool{}
	for len(heldSeen) < n {
		ev := nextEvent(e, heldEvents, func(events.Event) bool { return true }, "a job to go Held")
		if ev.BatchID != b.ID || !slices.Contains(jids, ev.JobID) {
			t.Fatalf("unexpected Held event: job %s of batch %s", ev.JobID, ev.BatchID)
		}
		if ev.From != "Pending" || ev.To != "Held" || heldSeen[ev.JobID] {
			t.Fatalf("job %s: %s → %s (seen before: %v), want one Pending → Held", ev.JobID, ev.From, ev.To, heldSeen[ev.JobID])
		}
		heldSeen[ev.JobID] = true
	}
	// Meanwhile the other profile's batch runs to its end.
	if rep := e.waitBatch(batches, open.ID); rep.To != "Completed" {
		t.Fatalf("batch of another profile during the hold: %s (%s)", rep.To, rep.Message)
	}

	refs, problems, err := e.q.Refs(t.Context(), queue.Held)
	if err != nil || len(problems) > 0 {
		t.Fatalf("held refs: %v %v", problems, err)
	}
	for _, jid := range jids {
		j, err := e.q.LoadJob(t.Context(), jid)
		if err != nil {
			t.Fatal(err)
		}
		if j.State() != queue.Held || j.Locked || !slices.Contains(refs, j.Ref()) {
			t.Fatalf("job %s: %s, locked %v, ref %s in held %v: want Held, unlocked, listed in held", jid, j.State(), j.Locked, j.Ref(), refs)
		}
	}
	if got, err := e.q.LoadBatch(t.Context(), b.ID); err != nil || got.State() != queue.Processing {
		t.Fatalf("batch with Held jobs: %v %v, want Processing", got, err)
	}
	for drained := false; !drained; {
		select {
		case ev := <-jobEvents:
			if ev.BatchID == b.ID && ev.To != "Held" {
				t.Fatalf("job %s of the held collection went %s → %s", ev.JobID, ev.From, ev.To)
			}
		default:
			drained = true
		}
	}

	// The operator lifts the hold, then releases the held jobs one by one.
	if _, err := e.q.ReleaseCollection(t.Context(), frozen); err != nil {
		t.Fatal(err)
	}
	releaseCanaries := awaitCollectionView(e, canaries, frozen, false)
	for _, jid := range jids {
		if _, err := e.q.ReleaseJob(t.Context(), jid); err != nil {
			t.Fatalf("release job %s: %v", jid, err)
		}
	}
	if rep := e.waitBatch(batches, b.ID); rep.To != "Completed" {
		t.Fatalf("batch after the release: %s (%s)", rep.To, rep.Message)
	}
	got, err := e.q.LoadBatch(t.Context(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State() != queue.Completed || got.Report == nil || !slices.Equal(got.Report.SuccessfulJobs, jids) || len(got.Report.FailedJobs) != 0 {
		t.Fatalf("batch %s, report %+v, want Completed with %v", got.State(), got.Report, jids)
	}

	if err := e.bus.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	timelines := map[string][]string{}
	var batchSteps []string
	err = events.Replay(context.Background(), e.bus.Conn(), "", events.Filter{BatchID: b.ID}, func(ev events.Event) error {
		switch ev.Kind {
		case events.KindJob:
			timelines[ev.JobID] = append(timelines[ev.JobID], ev.From+"→"+ev.To)
		case events.KindBatch:
			batchSteps = append(batchSteps, ev.From+"→"+ev.To)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Pending→Held", "Pending→Estimating"}
	for i := 1; i < len(fullTimeline); i++ {
		want = append(want, fullTimeline[i-1]+"→"+fullTimeline[i])
	}
	if len(timelines) != n {
		t.Fatalf("replay has %d jobs of the batch, want %d", len(timelines), n)
	}
	for jid, tl := range timelines {
		if !slices.Equal(tl, want) {
			t.Fatalf("job %s timeline %v, want %v", jid, tl, want)
		}
	}
	// Moved to Processing by the test itself, the batch has that move
	// recovered by the reporter (no "from"), then its report's.
	if wantSteps := []string{"→Processing", "Processing→Reporting", "Reporting→Completed"}; !slices.Equal(batchSteps, wantSteps) {
		t.Fatalf("batch timeline %v, want %v (one report)", batchSteps, wantSteps)
	}

	// The probes that went Held are deleted; the others completed.
	for _, bid := range append(holdCanaries, releaseCanaries...) {
		if err := e.q.DeleteBatch(t.Context(), bid); err != nil {
			t.Fatalf("delete held probe batch %s: %v", bid, err)
		}
	}
	e.clean()
}

// awaitCollectionView submits empty batches of profile until the daemon
// shows, in how it treats one, that it has seen the collection's hold
// (held) or its release: a Pending batch goes to Held only while the
// daemon knows of the hold, and to Processing only once it knows of none.
// No daemon can tell otherwise: the hold is a node it watches and nothing
// is published when its view changes. It returns the probes that went to
// Held, for the caller to delete once they are of no more use.
func awaitCollectionView(e *env, ch chan events.Event, profile string, held bool) (heldProbes []string) {
	e.t.Helper()
	want := queue.Processing
	if held {
		want = queue.Held
	}
	for try := 1; ; try++ {
		c := e.submit(map[string]any{"profile_name": profile, "payload_url": "passthrough:0"})
		ev := nextEvent(e, ch, func(ev events.Event) bool { return ev.BatchID == c.ID }, "probe batch "+c.ID+" to be taken")
		if ev.From != string(queue.Pending) || (ev.To != string(queue.Held) && ev.To != string(queue.Processing)) {
			e.t.Fatalf("probe batch %s went %s → %s, want Pending → Held or Processing", c.ID, ev.From, ev.To)
		}
		if ev.To == string(queue.Held) {
			heldProbes = append(heldProbes, c.ID)
		}
		if ev.To == string(want) {
			e.t.Logf("collection %s held=%v: shown by the daemon at probe %d", profile, held, try)
			return heldProbes
		}
		if try == 100 {
			e.t.Fatalf("after %d probes the daemon still does not show the collection %s held=%v", try, profile, held)
		}
	}
}

// nextEvent returns the next event on ch that match accepts.
func nextEvent(e *env, ch chan events.Event, match func(events.Event) bool, what string) events.Event {
	e.t.Helper()
	deadline := time.After(2 * time.Minute)
	for {
		select {
		case ev := <-ch:
			if match(ev) {
				return ev
			}
		case <-deadline:
			e.t.Fatalf("waited in vain for %s", what)
		}
	}
}
