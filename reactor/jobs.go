package reactor

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/ingestq/ingestq/reactor/queue"
)

// Object is one object of a batch, to become one job.
type Object struct {
	Key  string // unique within the batch: a manifest line, a file name
	Spec queue.JobSpec
}

// EnsureJobs creates a job for every object that has none in the batch yet,
// and returns how many jobs the batch has for its objects. Run again after
// a crash or an error, it reads again what exists and creates only the
// missing jobs. Every creation is fenced by b's version, so once another
// session has taken the batch over, this one creates nothing more and gets
// queue.ErrStale: a batch never loses or duplicates a job.
func EnsureJobs(ctx context.Context, q *queue.Queue, b *queue.Batch, objs []Object) (int, error) {
	have, err := existingKeys(ctx, q, b.ID)
	if err != nil {
		return 0, err
	}
	var todo []Object
	seen := map[string]bool{}
	for _, o := range objs {
		if seen[o.Key] {
			return 0, Fatal(fmt.Errorf("batch %s: object %q is listed twice", b.ID, o.Key))
		}
		seen[o.Key] = true
		if !have[o.Key] {
			todo = append(todo, o)
		}
	}
	var (
		mu      sync.Mutex
		created int
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16) // ZooKeeper takes concurrent creates far faster than serial ones
	for _, o := range todo {
		if gctx.Err() != nil {
			break // a creation failed (or ctx ended): stop starting more
		}
		g.Go(func() error {
			spec := o.Spec
			spec.Config.ObjectKey, spec.RecordID = o.Key, true
			if _, err := q.CreateJob(ctx, b, spec); err != nil {
				return fmt.Errorf("object %q: %w", o.Key, err)
			}
			mu.Lock()
			created++
			mu.Unlock()
			return nil
		})
	}
	err = g.Wait()
	if err == nil {
		err = ctx.Err()
	}
	return len(objs) - len(todo) + created, err
}

// existingKeys reads the object keys of a batch's jobs.
func existingKeys(ctx context.Context, q *queue.Queue, bid string) (map[string]bool, error) {
	buckets, err := q.BatchJobs(ctx, bid)
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, jids := range buckets {
		for _, jid := range jids {
			j, err := q.LoadJob(ctx, jid)
			if err != nil {
				return nil, fmt.Errorf("batch %s: read its job %s: %w", bid, jid, err)
			}
			if k := j.Config.ObjectKey; k != "" {
				have[k] = true
			}
		}
	}
	return have, nil
}
