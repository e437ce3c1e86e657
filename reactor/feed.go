package reactor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ingestq/ingestq/internal/backoff"

	"github.com/ingestq/ingestq/reactor/queue"
)

// A batch of more than Config.Window objects is windowed (decision 174): its
// objects are kept in the batch, and its jobs are made a chunk at a time,
// while fewer than Window of its jobs are unfinished; its Completed jobs are
// archived into the batch, a group at a time. So no state folder or
// bucket lists more than a few Windows of refs, far below the 1 MB listing
// a Java ZooKeeper client can read.
//
// A chunk (the jobs made in one go) is a fifth of the window; Completed jobs
// are archived a chunk at a time, at most maxArchiveGroup in one multi().
const maxArchiveGroup = 200

func chunkOf(window int) int { return max(1, window/5) }

func archiveGroupOf(window int) int { return min(maxArchiveGroup, chunkOf(window)) }

// sigFeed wakes the feed pool, with the batch to look at.
const sigFeed = "watch.batch.feed"

// feeds is what this daemon knows of windowed batches: which batches are
// (and are not) windowed, and the batches to look at next.
type feeds struct {
	mu       sync.Mutex
	windowed map[string]bool // bid → windowed, once read
	changes  map[string]int  // bid → batch-processing changes since its last look
	next     []string        // batches to look at, first come first
}

func newFeeds() *feeds { return &feeds{windowed: map[string]bool{}, changes: map[string]int{}} }

// note queues bid to be looked at.
func (f *feeds) note(bid string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Contains(f.next, bid) {
		f.next = append(f.next, bid)
	}
}

func (f *feeds) pop() (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.next) == 0 {
		return "", false
	}
	bid := f.next[0]
	f.next = f.next[1:]
	return bid, true
}

// known says whether bid is windowed, and whether that is known yet.
func (f *feeds) known(bid string) (windowed, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	windowed, ok = f.windowed[bid]
	return
}

func (f *feeds) set(bid string, windowed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.windowed[bid] = windowed
}

func (f *feeds) forget(bid string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.windowed, bid)
	delete(f.changes, bid)
}

// changed counts a change of bid's batch-processing bucket, now holding
// count jobs, and tells whether the batch is worth a look: it may have room
// for more jobs, or enough Completed jobs to archive. A batch not known to
// be windowed is worth one look, to find out.
func (f *feeds) changed(bid string, count, window int) bool {
	chunk, group := chunkOf(window), archiveGroupOf(window)
	f.mu.Lock()
	defer f.mu.Unlock()
	windowed, ok := f.windowed[bid]
	if ok && !windowed {
		return false
	}
	f.changes[bid]++
	if !ok || count+chunk <= window || f.changes[bid] >= group {
		f.changes[bid] = 0
		return true
	}
	return false
}

// makeJobs makes a batch's jobs for its objects: all of them, or, past
// Config.Window objects, the batch's first window.
func (r *Reactor) makeJobs(ctx context.Context, b *queue.Batch, objs []Object) (int, error) {
	if err := uniqueKeys(b.ID, objs); err != nil {
		return 0, err
	}
	if len(objs) <= r.cfg.Window {
		return r.ensureJobs(ctx, b, objs)
	}
	f, err := r.q.WriteObjects(ctx, b, objs, chunkOf(r.cfg.Window))
	if err != nil {
		return 0, err
	}
	r.feeds.set(b.ID, true)
	if err := r.feed(ctx, b, f); err != nil {
		return 0, err
	}
	return f.Objects, nil
}

// ensureJobs is EnsureJobs, in tens with a pause after each for a Paced
// handler that asks for it.
func (r *Reactor) ensureJobs(ctx context.Context, b *queue.Batch, objs []Object) (int, error) {
	var made []string
	var mu sync.Mutex
	starts := &jobStarts{
		// The gate is passed over by the Pending pool until the batch is
		// Processing (it would only read it to find its batch Pending),
		// from before any folder lists it; its view then goes to that
		// pool, which acquires it without reading it (pendingBatchStep).
		naming: func(jid string) { r.gated.Store(jid, b.ID) },
		gate: func(j *queue.Job) {
			v, _ := r.gates.LoadOrStore(b.ID, &[]*queue.Job{})
			mu.Lock()
			*v.(*[]*queue.Job) = append(*v.(*[]*queue.Job), j)
			mu.Unlock()
		},
		other: func(j *queue.Job) {
			mu.Lock()
			made = append(made, j.ID)
			mu.Unlock()
			r.startEarly(j)
		},
	}
	defer func() { // the batch's move to Processing releases the jobs not yet started
		mu.Lock()
		defer mu.Unlock()
		for _, jid := range made {
			r.early.Delete(jid)
		}
	}()
	var pace time.Duration
	if p, ok := r.cfg.Batches.(Paced); ok {
		pace = p.CreatePace(b)
	}
	if pace <= 0 {
		return ensureJobs(ctx, r.q, b, objs, starts)
	}
	const ten = 10
	for end := ten; ; end += ten {
		n, err := ensureJobs(ctx, r.q, b, objs[:min(end, len(objs))], starts)
		if err != nil || end >= len(objs) {
			return n, err
		}
		if !backoff.Sleep(ctx, pace) {
			return n, ctx.Err()
		}
	}
}

// feedStep looks at one windowed batch: archives its Completed jobs and
// makes more of its jobs when it has room.
func (r *Reactor) feedStep(ctx context.Context) (bool, error) {
	bid, ok := r.feeds.pop()
	if !ok {
		return false, nil
	}
	if windowed, known := r.feeds.known(bid); known && !windowed {
		return true, nil
	}
	f, err := r.q.LoadFeed(ctx, bid)
	if err != nil {
		return true, err
	}
	r.feeds.set(bid, f != nil)
	if f == nil {
		return true, nil
	}
	counts, err := r.q.BucketCounts(ctx, bid)
	if err != nil {
		return true, err
	}
	if counts["batch-completed"] < archiveGroupOf(r.cfg.Window) && !r.hasRoom(counts, f) {
		return true, nil // nothing to do: no look at the batch itself
	}
	b, waits, err := r.q.AcquireFeed(ctx, bid)
	if err != nil || b == nil {
		// Locked: its holder may have looked before the change that woke
		// this one; look again once the lock goes.
		for _, w := range waits {
			r.waits.on(r.work, w, sigFeed, func() { r.feeds.note(bid); r.wake(sigFeed) })
		}
		return true, err
	}
	defer r.unlockBatch(b)
	if err := r.archive(ctx, b); err != nil {
		return true, err
	}
	if f, err = r.q.LoadFeed(ctx, bid); err != nil || f == nil {
		return true, err
	}
	return true, r.feed(ctx, b, f)
}

// hasRoom tells whether a windowed batch may have another chunk of jobs
// made, by its bucket counts alone.
func (r *Reactor) hasRoom(counts map[string]int, f *queue.Feed) bool {
	return !f.Done() && counts[queue.BucketProcessing]+f.Chunk <= r.cfg.Window
}

// feed makes a locked windowed batch's jobs, a chunk at a time, while it
// has room: fewer than Window unfinished jobs, and, unless it has almost
// none left, fewer than four Windows unfinished in the whole queue (other
// batches' too). A batch with Window failed jobs stops: something is wrong
// with all of it, and its report says how many objects had no job.
func (r *Reactor) feed(ctx context.Context, b *queue.Batch, f *queue.Feed) error {
	for !f.Done() {
		counts, err := r.q.BucketCounts(ctx, b.ID)
		if err != nil {
			return err
		}
		if failed := counts["batch-failed"]; failed >= r.cfg.Window {
			why := fmt.Sprintf("%d of its jobs failed; %d of its %d objects were given no job",
				failed, f.Objects-f.MadeObjects(), f.Objects)
			r.log.Warn("reactor: windowed batch stops making jobs", "batch", b.ID, "why", why)
			return r.q.StopFeed(ctx, b, f, why)
		}
		if !r.hasRoom(counts, f) {
			return nil
		}
		if counts[queue.BucketProcessing] >= f.Chunk {
			states, err := r.q.StateCounts(ctx)
			if err != nil {
				return err
			}
			unfinished := 0
			for _, s := range JobStates {
				unfinished += states[s]
			}
			if unfinished+f.Chunk > 4*r.cfg.Window {
				return nil // other batches' jobs fill the queue: wait for them
			}
		}
		if err := r.feedChunk(ctx, b, f); err != nil {
			return err
		}
	}
	return nil
}

// feedChunk makes the jobs of a windowed batch's next chunk of objects. A
// chunk whose making was cut short (Feed.Making) is made again without the
// objects that have a job, live or archived.
func (r *Reactor) feedChunk(ctx context.Context, b *queue.Batch, f *queue.Feed) error {
	objs, err := r.q.ObjectChunk(ctx, b.ID, f.Made)
	if err != nil {
		return err
	}
	if f.Making {
		if objs, err = r.withoutJobs(ctx, b.ID, objs); err != nil {
			return err
		}
	} else {
		f.Making = true
		if err := r.q.SetFeed(ctx, b, f); err != nil {
			return err
		}
	}
	if _, err := createJobs(ctx, r.q, b, objs, nil); err != nil {
		return err
	}
	f.Made, f.Making = f.Made+1, false
	return r.q.SetFeed(ctx, b, f)
}

// withoutJobs drops from objs those that have a job in the batch, live or
// archived.
func (r *Reactor) withoutJobs(ctx context.Context, bid string, objs []Object) ([]Object, error) {
	have, err := existingKeys(ctx, r.q, bid)
	if err != nil {
		return nil, err
	}
	archived, err := r.q.ArchivedJobs(ctx, bid)
	if err != nil {
		return nil, err
	}
	for _, a := range archived {
		have[a.Key] = true
	}
	return slices.DeleteFunc(objs, func(o Object) bool { return have[o.Key] }), nil
}

// archive archives a locked windowed batch's Completed jobs, a group at a
// time, oldest first; a last group of fewer stays live.
func (r *Reactor) archive(ctx context.Context, b *queue.Batch) error {
	jids, err := r.q.BatchJobs(ctx, b.ID)
	if err != nil {
		return err
	}
	done, group := jids[queue.Bucket(queue.Completed)], archiveGroupOf(r.cfg.Window)
	for len(done) >= group {
		if err := r.q.ArchiveJobs(ctx, b, done[:group]); err != nil {
			if errors.Is(err, queue.ErrStale) {
				return err
			}
			r.log.Warn("reactor: Completed jobs not archived; tried again later", "batch", b.ID, "err", err)
			return nil
		}
		done = done[group:]
	}
	return nil
}
