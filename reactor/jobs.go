package reactor

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/ingestq/ingestq/reactor/queue"
)

// Object is one object of a batch, to become one job.
type Object = queue.Object

// EnsureJobs creates a job for every object that has none in the batch yet,
// and returns how many jobs the batch has for its objects. Run again after
// a crash or an error, it reads again what exists and creates only the
// missing jobs. Every creation is fenced by b's version, so once another
// session has taken the batch over, this one creates nothing more and gets
// queue.ErrStale: a batch never loses or duplicates a job.
func EnsureJobs(ctx context.Context, q *queue.Queue, b *queue.Batch, objs []Object) (int, error) {
	return ensureJobs(ctx, q, b, objs, nil)
}

// jobStarts is how a batch handler's run starts the jobs it makes before
// their batch is Processing (decisions 189, 213 and 219): it names the gate
// (the first job made, alone) as soon as the gate has an id, before any
// folder lists it; then it is given the gate, made; then each other job as
// it is made.
type jobStarts struct {
	naming func(jid string)
	gate   func(j *queue.Job)
	other  func(j *queue.Job)
}

// ensureJobs is EnsureJobs; given starts, it makes the first missing job
// alone, the gate, then the others, and hands each on as it is made.
func ensureJobs(ctx context.Context, q *queue.Queue, b *queue.Batch, objs []Object, starts *jobStarts) (int, error) {
	if err := uniqueKeys(b.ID, objs); err != nil {
		return 0, err
	}
	have, err := existingKeys(ctx, q, b.ID)
	if err != nil {
		return 0, err
	}
	todo := slices.DeleteFunc(slices.Clone(objs), func(o Object) bool { return have[o.Key] })
	created, err := createJobs(ctx, q, b, todo, starts)
	return len(objs) - len(todo) + created, err
}

// uniqueKeys refuses a batch whose objects share a key.
func uniqueKeys(bid string, objs []Object) error {
	seen := make(map[string]bool, len(objs))
	for _, o := range objs {
		if seen[o.Key] {
			return Fatal(fmt.Errorf("batch %s: object %q is listed twice", bid, o.Key))
		}
		seen[o.Key] = true
	}
	return nil
}

// createJobs creates a job for each object, many at once, and returns how
// many it created; it stops starting more at the first failure. Given
// starts, it creates the first job (the gate) alone, before the others, and
// hands each on as it is made: the gate stays in batch-processing while
// the batch is Pending, so the others may run meanwhile (decisions 36 and
// 300).
func createJobs(ctx context.Context, q *queue.Queue, b *queue.Batch, objs []Object, starts *jobStarts) (int, error) {
	create := func(o Object) (*queue.Job, error) {
		spec := o.Spec
		spec.Config.ObjectKey, spec.RecordID = o.Key, true
		j, err := q.CreateJob(ctx, b, spec)
		if err != nil {
			return nil, fmt.Errorf("object %q: %w", o.Key, err)
		}
		return j, nil
	}
	var (
		mu      sync.Mutex
		created int
	)
	if starts != nil && len(objs) > 0 {
		gate := objs[0]
		gate.Spec.Named = starts.naming
		j, err := create(gate)
		if err != nil {
			return 0, err
		}
		starts.gate(j)
		created, objs = 1, objs[1:]
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16) // ZooKeeper takes concurrent creates far faster than serial ones
	for _, o := range objs {
		if gctx.Err() != nil {
			break // a creation failed (or ctx ended): stop starting more
		}
		g.Go(func() error {
			j, err := create(o)
			if err != nil {
				return err
			}
			if starts != nil {
				starts.other(j)
			}
			mu.Lock()
			created++
			mu.Unlock()
			return nil
		})
	}
	err := g.Wait()
	if err == nil {
		err = ctx.Err()
	}
	return created, err
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
