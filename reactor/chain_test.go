package reactor_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// lockSeen records, from inside each step, which lock node the job held:
// its creation zxid, read by a session of its own.
type lockSeen struct {
	mu    sync.Mutex
	czxid map[string]map[queue.State]int64 // jid → state → the lock's czxid
}

func (l *lockSeen) wrap(t *testing.T, root string, jobs map[queue.State]reactor.JobHandler) {
	conn := zktest.Connect(t)
	l.czxid = map[string]map[queue.State]int64{}
	for s, h := range jobs {
		jobs[s] = reactor.JobHandlerFunc(func(ctx context.Context, step *reactor.Step) (reactor.Result, error) {
			_, st, err := conn.Get(root + "/jobs/" + step.Job.ID + "/lock")
			if err != nil {
				t.Errorf("job %s in %s: its lock: %v", step.Job.ID, s, err)
				return reactor.Result{}, err
			}
			l.mu.Lock()
			if l.czxid[step.Job.ID] == nil {
				l.czxid[step.Job.ID] = map[queue.State]int64{}
			}
			l.czxid[step.Job.ID][s] = st.Czxid
			l.mu.Unlock()
			return h.Handle(ctx, step)
		})
	}
}

// A daemon that works every state, with workers waiting, runs a job's
// steps one after another on the lock it took for the first (decision
// 211): no acquisition per state. Every transition is still committed
// and published, and the tree checks clean.
func TestStepsRunOnOneLock(t *testing.T) {
	e := newEnv(t)
	batches := e.outside("ingestq.batch.>")
	jobsEv := e.outside("ingestq.job.>")
	var seen lockSeen
	e.daemon("host-a", func(c *reactor.Config) { seen.wrap(t, e.root, c.Jobs) })
	b := e.submit(map[string]any{"profile_name": "demo", "payload_url": "passthrough:3"})
	if rep := e.waitBatch(batches, b.ID); rep.To != "Completed" {
		t.Fatalf("batch %s", rep.To)
	}
	seen.mu.Lock()
	defer seen.mu.Unlock()
	if len(seen.czxid) != 3 {
		t.Fatalf("%d jobs ran steps, want 3", len(seen.czxid))
	}
	for jid, by := range seen.czxid {
		if len(by) != len(reactor.JobStates)-1 {
			t.Errorf("job %s ran %d steps, want %d", jid, len(by), len(reactor.JobStates)-1)
		}
		first := by[queue.Estimating]
		for s, z := range by {
			if z != first {
				t.Errorf("job %s: %s ran under lock czxid %d, Estimating under %d: acquired again", jid, s, z, first)
			}
		}
	}
	timelines := map[string][]string{}
	for len(timelines) < 3 || slices.ContainsFunc(mapsValues(timelines), func(tl []string) bool { return len(tl) < len(fullTimeline) }) {
		ev := <-jobsEv
		if ev.BatchID == b.ID && ev.From != "" {
			timelines[ev.JobID] = append(timelines[ev.JobID], ev.To)
		}
	}
	for jid, tl := range timelines {
		if !slices.Equal(tl, fullTimeline) {
			t.Errorf("job %s published %v, want %v", jid, tl, fullTimeline)
		}
	}
	e.clean()
}

func mapsValues(m map[string][]string) [][]string {
	var out [][]string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// With no worker of the next state waiting, a move releases the job's
// lock: the job waits its turn in the folder, unlocked, where an operator
// or another daemon can see it free.
func TestMoveReleasesWhenNoWorkerWaits(t *testing.T) {
	e := newEnv(t)
	batches := e.outside("ingestq.batch.>")
	moved := e.outside("ingestq.job.>")
	busy, free := make(chan string, 2), make(chan struct{})
	e.daemon("host-a", func(c *reactor.Config) {
		c.Workers = map[queue.State]int{queue.Processing: 1}
		pass := c.Jobs[queue.Processing]
		c.Jobs[queue.Processing] = reactor.JobHandlerFunc(func(ctx context.Context, s *reactor.Step) (reactor.Result, error) {
			busy <- s.Job.ID
			<-free
			return pass.Handle(ctx, s)
		})
	})
	b := e.submit(map[string]any{"profile_name": "demo", "payload_url": "passthrough:2"})
	first := <-busy // the one Processing worker is on this job
	var other string
	for other == "" {
		ev := <-moved
		if ev.BatchID == b.ID && ev.To == string(queue.Processing) && ev.JobID != first {
			other = ev.JobID
		}
	}
	// Its lock goes while the worker is still busy (a move that raced the
	// other's for the worker may have kept it a moment longer).
	conn := zktest.Connect(t)
	for {
		there, _, gone, err := conn.ExistsW(e.root + "/jobs/" + other + "/lock")
		if err != nil {
			t.Fatal(err)
		}
		if !there {
			break
		}
		select {
		case <-gone:
		case <-time.After(time.Minute):
			t.Fatalf("job %s stayed locked in Processing while no worker could take it", other)
		}
	}
	if j, err := e.q.LoadJob(t.Context(), other); err != nil || j.State() != queue.Processing {
		t.Fatalf("job %s: %v %v, want Processing", other, j, err)
	}
	close(free)
	if got := <-busy; got != other {
		t.Fatalf("the worker took %s next, want %s", got, other)
	}
	if rep := e.waitBatch(batches, b.ID); rep.To != "Completed" {
		t.Fatalf("batch %s", rep.To)
	}
	e.clean()
}
