package queue_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/ingestq/ingestq/reactor/queue"
)

// A reader racing a writer's creation sees a batch or a job whole or not
// at all: never a status without the nodes written beside it. (Concurrent
// reads of one item's nodes may reach ZooKeeper in any order; read before
// the creation, a submission looked missing while the status, read after,
// said Pending, and the batch handler failed a sound batch for its profile
// "".)
func TestReaderNeverSeesHalfACreation(t *testing.T) {
	const n = 200
	r := newRun(t)
	_, reader := r.second()
	t.Run("batches", func(t *testing.T) {
		readAsCreated(t, n, func(ctx context.Context, i int) error {
			sub := queue.SubmissionOf(map[string]any{"profile_name": "demo", "payload_url": fmt.Sprintf("http://x/%d", i)})
			_, err := r.q.CreateBatch(ctx, sub)
			return err
		}, func(ctx context.Context, i int) (string, error) {
			b, err := reader.LoadBatch(ctx, fmt.Sprintf("bid%010d", i))
			if err != nil {
				return "", err
			}
			return b.Profile(), nil
		})
	})
	t.Run("jobs", func(t *testing.T) {
		b := r.processing(true)
		// /jobs has other children, so the first jid is not 0: count on from one made here.
		first, err := r.q.CreateJob(t.Context(), b, queue.JobSpec{Config: queue.JobConfigOf(map[string]any{"profile_name": "demo"})})
		r.ok(err)
		var base int
		if _, err := fmt.Sscanf(first.ID, "jid%d", &base); err != nil {
			t.Fatal(err)
		}
		readAsCreated(t, n, func(ctx context.Context, i int) error {
			_, err := r.q.CreateJob(ctx, b, queue.JobSpec{Config: queue.JobConfigOf(map[string]any{"profile_name": "demo"})})
			return err
		}, func(ctx context.Context, i int) (string, error) {
			j, err := reader.LoadJob(ctx, fmt.Sprintf("jid%010d", base+1+i))
			if err != nil {
				return "", err
			}
			return j.Profile(), nil
		})
	})
}

// readAsCreated creates n items one after another while reading item i
// again and again until it is there; each must read with profile "demo".
func readAsCreated(t *testing.T, n int, create func(context.Context, int) error, load func(context.Context, int) (string, error)) {
	done := make(chan error, 1)
	go func() {
		for i := range n {
			if err := create(t.Context(), i); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	created := false
	for i := 0; i < n; {
		profile, err := load(t.Context(), i)
		switch {
		case !created && (errors.Is(err, queue.ErrNotFound) || errors.Is(err, queue.ErrIncomplete)):
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
				created = true // item i must be there now
			default:
			}
			continue // not there yet: read again at once, to meet the creation
		case err != nil:
			t.Fatalf("item %d: %v", i, err)
		case profile != "demo":
			t.Fatalf("item %d read with a status but profile %q: half a creation", i, profile)
		}
		i++
	}
}
