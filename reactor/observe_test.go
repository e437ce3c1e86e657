package reactor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// tally is an Observer that counts what it is told.
type tally struct {
	mu    sync.Mutex
	steps map[string]int // "state result"
	moves map[string]int // "kind from→outcome"
	bytes map[reactor.Transfer]int64
}

func (o *tally) StepRan(s queue.State, r reactor.StepResult, took time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.steps[fmt.Sprintf("%s %s", s, r)]++
}

func (o *tally) Moved(kind string, from queue.State, outcome string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.moves[fmt.Sprintf("%s %s→%s", kind, from.Folder(), outcome)]++
}

func (o *tally) Transferred(what reactor.Transfer, n int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.bytes[what] += n
}

// The daemon tells its observer of every step's run and result, every
// commit and the bytes a step reports; a step that fails and is retried
// says so in the job's status message (what `ls jobs --stalled` shows)
// while it backs off, and as the job's progress event (as a wait's message
// is), and the next transition clears it.
func TestObserverAndRetryMessage(t *testing.T) {
	e := newEnv(t)
	batches := e.outside("ingestq.batch.>")
	progress := e.outside("ingestq.job.progress.>")
	obs := &tally{steps: map[string]int{}, moves: map[string]int{}, bytes: map[reactor.Transfer]int64{}}
	var tries atomic.Int32
	seen := make(chan string, 1) // the job's status message at the second try
	e.daemon("host-a", func(c *reactor.Config) {
		c.Observer = obs
		c.Backoff = time.Millisecond
		pass := c.Jobs[queue.Downloading]
		c.Jobs[queue.Downloading] = reactor.JobHandlerFunc(func(ctx context.Context, s *reactor.Step) (reactor.Result, error) {
			if tries.Add(1) == 1 {
				s.Transferred(reactor.Downloaded, 100)
				return reactor.Result{}, errors.New("GET https://example.org/f: 503 Service Unavailable")
			}
			j, err := e.q.LoadJob(ctx, s.Job.ID)
			if err != nil {
				return reactor.Result{}, err
			}
			seen <- j.Status.Message
			s.Transferred(reactor.Downloaded, 50)
			s.Transferred(reactor.Stored, 0) // nothing: not counted
			return pass.Handle(ctx, s)
		})
	})
	b := e.submit(map[string]any{"profile_name": "demo", "payload_url": "passthrough:1"})
	if rep := e.waitBatch(batches, b.ID); rep.To != "Completed" {
		t.Fatalf("batch ended %s: %s", rep.To, rep.Message)
	}
	msg := <-seen
	if !reactor.Retrying(msg) || !strings.Contains(msg, "(attempt 1 of 3): GET https://example.org/f: 503") {
		t.Errorf("status message while retrying: %q", msg)
	}
	select {
	case ev := <-progress:
		next, _ := ev.Attrs["next_try"].(string)
		if ev.Message != msg || ev.BatchID != b.ID || ev.To != string(queue.Downloading) || ev.Attrs["waiting"] != true || next == "" {
			t.Errorf("the retry's progress event %+v; want its status message %q, in Downloading, waiting until a next try", ev, msg)
		}
	case <-time.After(30 * time.Second):
		t.Error("no progress event said the retry")
	}
	j := e.firstCompleted(b.ID)
	if j.Status.Message != "" {
		t.Errorf("completed job's message %q: the retry's should be gone", j.Status.Message)
	}

	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.steps["Downloading retry"] != 1 || obs.steps["Downloading done"] != 1 || obs.steps["Notify done"] != 1 || len(obs.steps) != 8 {
		t.Errorf("steps %v: want Downloading retried once, then each of Estimating…Notify done once", obs.steps)
	}
	for _, m := range []string{"job pending→estimating", "job downloading→processing", "job notify→completed",
		"batch pending→processing", "batch reporting→completed"} {
		if obs.moves[m] != 1 {
			t.Errorf("moves %v: want %s once", obs.moves, m)
		}
	}
	if obs.bytes[reactor.Downloaded] != 150 || len(obs.bytes) != 1 {
		t.Errorf("bytes %v, want 150 downloaded and nothing else", obs.bytes)
	}
}
