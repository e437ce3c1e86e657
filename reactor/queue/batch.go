package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/google/uuid"
)

func (q *Queue) batchPath(bid string, child ...string) string {
	return q.Path("/batches/" + strings.Join(append([]string{bid}, child...), "/"))
}

// CreateBatch creates a Pending batch with the given submission. Its
// "batchID" is the batch's uuid; one is generated when it is missing.
func (q *Queue) CreateBatch(ctx context.Context, sub Submission) (*Batch, error) {
	id := sub.BatchUUID
	if id == "" {
		id = uuid.NewString()
		sub.BatchUUID = id
	}
	if strings.Contains(id, "/") {
		return nil, fmt.Errorf("batchID %q: must not contain '/'", id)
	}
	uuidPath := q.Path("/batch-uuids/" + id)
	if ok, _, err := q.zk.exists(ctx, uuidPath); err != nil {
		return nil, fmt.Errorf("check %s: %w", q.rel(uuidPath), err)
	} else if ok {
		return nil, refused("batchID %s is already used", id)
	}
	// The sequential name is only known once created, so the children follow
	// in a second, atomic step; an empty /batches/bidN left by a crash between
	// the two is skipped by readers and removed by Cleanup.
	p, err := q.zk.create(ctx, q.Path("/batches/bid"), nil, zk.FlagSequence)
	if err != nil {
		return nil, fmt.Errorf("create batch: %w", err)
	}
	bid := path2name(p)
	b := &Batch{ID: bid, Submission: sub, Status: BatchStatus{Status: Pending, LastModified: q.stamp()}, JobCount: -1}
	status := create(q.batchPath(bid, "status"), mustJSON(b.Status))
	status.witness = true
	err = q.commit(ctx, []op{
		create(q.batchPath(bid, "submission"), mustJSON(sub)),
		status,
		create(uuidPath, []byte(bid)),
	})
	if err != nil {
		_ = q.zk.delete(ctx, p, -1)
		if errors.Is(err, zk.ErrNodeExists) {
			return nil, refused("batchID %s is already used", id)
		}
		return nil, fmt.Errorf("create batch %s: %w", bid, err)
	}
	b.version = 0
	return b, nil
}

func path2name(p string) string { return p[strings.LastIndex(p, "/")+1:] }

// LoadBatch reads a batch.
func (q *Queue) LoadBatch(ctx context.Context, bid string) (*Batch, error) {
	b, _, err := q.loadBatchWith(ctx, bid)
	return b, err
}

// loadBatchWith reads a batch and, in the same round trip, the nodes at
// paths besides.
func (q *Queue) loadBatchWith(ctx context.Context, bid string, paths ...string) (*Batch, []read, error) {
	if !validName(bid, "bid") {
		return nil, nil, fmt.Errorf("%q is not a batch id (want bid followed by digits)", bid)
	}
	r := q.getAllAfter(ctx, 1, append([]string{q.batchPath(bid), q.batchPath(bid, "status"), q.batchPath(bid, "submission"),
		q.batchPath(bid, "status-report"), q.batchPath(bid, "states"), q.batchPath(bid, "lock"),
		q.batchPath(bid, "job-count")}, paths...)...)
	b, err := q.decodeBatch(bid, r[:7])
	return b, r[7:], err
}

// decodeBatch makes a batch of its nodes as loadBatchWith read them.
func (q *Queue) decodeBatch(bid string, r []read) (*Batch, error) {
	if errors.Is(r[0].err, zk.ErrNoNode) {
		return nil, notFound("batch", bid)
	}
	for _, x := range r {
		if x.err != nil && !errors.Is(x.err, zk.ErrNoNode) {
			return nil, fmt.Errorf("load batch %s: %w", bid, x.err)
		}
	}
	statusPath := q.rel(q.batchPath(bid, "status"))
	if r[1].err != nil {
		return nil, q.missingStatus(statusPath, r[0].stat)
	}
	b := &Batch{ID: bid, version: r[1].stat.Version, Acquired: r[4].err == nil, Locked: r[5].err == nil,
		lockHere: r[5].err == nil && q.zk.owns(r[5].stat), JobCount: -1}
	if b.Locked {
		b.LockSession = r[5].stat.EphemeralOwner
	}
	if b.lockHere {
		b.lockMade = r[5].stat.Czxid // an admin's lock, loaded in its turn (lockToLoad)
	}
	var err error
	if r[6].err == nil {
		n, err := decodeInt(q.rel(q.batchPath(bid, "job-count")), r[6].data)
		if err != nil {
			return nil, err
		}
		b.JobCount = int(n)
	}
	if b.Status, err = decodeBatchStatus(BatchMachine, statusPath, r[1].data); err != nil {
		return nil, err
	}
	b.Status.Mtime = time.UnixMilli(r[1].stat.Mtime)
	b.Arrival = b.Status
	if r[2].err == nil {
		if err := decodeJSON(q.rel(q.batchPath(bid, "submission")), r[2].data, &b.Submission); err != nil {
			return nil, err
		}
	}
	if r[3].err == nil && len(r[3].data) > 0 {
		b.Report = new(StatusReport)
		if err := decodeJSON(q.rel(q.batchPath(bid, "status-report")), r[3].data, b.Report); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// FindBatch looks a batch up by its uuid (submission.batchID).
func (q *Queue) FindBatch(ctx context.Context, id string) (*Batch, error) {
	if checkNodeName("batch uuid", id) != nil { // no node can have that name ("", ".", a '/' or a NUL)
		return nil, notFound("batch uuid", fmt.Sprintf("%q", id))
	}
	data, _, err := q.get(ctx, q.Path("/batch-uuids/"+id))
	if errors.Is(err, zk.ErrNoNode) {
		return nil, notFound("batch uuid", id)
	}
	if err != nil {
		return nil, err
	}
	bid := strings.TrimSpace(string(data))
	b, err := q.LoadBatch(ctx, bid)
	if errors.Is(err, ErrNotFound) {
		return nil, missingError{also: ErrBatchGone, msg: fmt.Sprintf(
			"batch uuid %s names %s, which is gone (a creation cut short, or a batch removed without its uuid)", id, bid)}
	}
	return b, err
}

// BatchIDs lists the batch ids in creation order.
func (q *Queue) BatchIDs(ctx context.Context) ([]string, error) {
	kids, err := q.children(ctx, q.Path("/batches"))
	if err != nil {
		return nil, err
	}
	kids = slices.DeleteFunc(kids, func(s string) bool { return !validName(s, "bid") })
	slices.Sort(kids)
	return kids, nil
}

// ListBatches reads every batch. A batch that cannot be read is reported in
// problems, with its path, and left out; it never stops the listing.
func (q *Queue) ListBatches(ctx context.Context) (batches []*Batch, problems []error, err error) {
	ids, err := q.BatchIDs(ctx)
	if err != nil {
		return nil, nil, err
	}
	out := make([]*Batch, len(ids))
	errs := make([]error, len(ids))
	each(len(ids), 32, func(i int) { out[i], errs[i] = q.LoadBatch(ctx, ids[i]) })
	for i := range ids {
		if errs[i] != nil {
			if !errors.Is(errs[i], ErrNotFound) { // deleted while listing
				problems = append(problems, errs[i])
			}
			continue
		}
		batches = append(batches, out[i])
	}
	return batches, problems, nil
}

// A Wait is a node whose change may make work that was passed over
// acquirable: the lock of a batch another session holds (it goes when that
// session ends or lets go), the status of a batch still being created, the
// buckets a job of a batch is moving into. The reactor watches them once.
type Wait struct {
	Path     string
	Present  bool  // the node was there when read
	Children bool  // watch its children too (a bucket)
	Cversion int32 // the children's version when read
	Data     bool  // a change of its data counts too (Version)
	Version  int32 // with Data: the data's version when read
}

// BatchStatusWait is the wait for a change of b's status since b was read:
// a release (Held → Pending) or a new report asked (Failed →
// UpdateReporting) rewrites the status alone, and Merritt's tools announce
// it to no one.
func (q *Queue) BatchStatusWait(b *Batch) Wait {
	return Wait{Path: q.batchPath(b.ID, "status"), Present: true, Data: true, Version: b.version}
}

// AcquirePendingBatch locks the oldest unlocked Pending batch and marks it
// acquired (its `states` child). It returns nil when there is none, with
// the nodes to watch for one that may become acquirable. A Pending batch
// that has `states` was acquired by a session that died before it
// finished; it is taken again, and its handler resumes it.
//
// admit (nil admits all) may pass over a batch after reading it, before
// anything is written: a daemon that works only some payloads.
func (q *Queue) AcquirePendingBatch(ctx context.Context, admit func(*Batch) bool) (*Batch, []Wait, error) {
	return q.AcquirePendingBatchOf(ctx, nil, admit, nil)
}

// AcquirePendingBatchOf is AcquirePendingBatch over the batches ids (in
// creation order; nil: all), for a daemon that knows which batches may
// still be Pending: it reads only those. started (nil: none) is told of
// every batch it read that is past Pending for good (neither Pending nor
// Held), so that the caller can leave it out of its next look.
func (q *Queue) AcquirePendingBatchOf(ctx context.Context, ids []string, admit func(*Batch) bool, started func(bid string)) (*Batch, []Wait, error) {
	var ready func(*Batch, []read) (bool, []Wait)
	if admit != nil {
		ready = func(b *Batch, _ []read) (bool, []Wait) { return admit(b), nil }
	}
	if ids != nil {
		ids = slices.DeleteFunc(slices.Clone(ids), func(s string) bool { return !validName(s, "bid") })
	}
	var passed func(*Batch)
	if started != nil {
		passed = func(b *Batch) {
			if b.State() != Held {
				started(b.ID)
			}
		}
	}
	return q.acquireBatch(ctx, ids, []State{Pending}, ready, nil, passed, "")
}

// BatchState reads only a batch's status.
func (q *Queue) BatchState(ctx context.Context, bid string) (State, error) {
	p := q.batchPath(bid, "status")
	data, _, err := q.get(ctx, p)
	if errors.Is(err, zk.ErrNoNode) {
		return "", notFound("batch", bid)
	}
	if err != nil {
		return "", err
	}
	st, err := decodeBatchStatus(BatchMachine, q.rel(p), data)
	return st.Status, err
}

// AcquireCompletedBatch locks a batch that is ready to report (see
// readyToReport) and moves it to Reporting. A batch in Reporting is
// returned as it is once its jobs are done, as mrt-zk's reporter takes it:
// its reporter died, or Merritt's batch handler (mrt-ingest's
// BatchConsumer) moved it there as soon as it had made its jobs. ids
// narrows the search to the given batches (nil: all), for a daemon that
// knows which batch just emptied. It
// returns nil when there is none, with the nodes to watch.
// passed (nil: none) is told of each batch read that is in no state to
// report (Pending, Held, Completed, …).
func (q *Queue) AcquireCompletedBatch(ctx context.Context, only []string, passed func(*Batch)) (*Batch, []Wait, error) {
	var buckets func(bid string) []string
	if only != nil {
		// A batch named is most likely one to report: its buckets are read
		// with it, in one round trip, not after it.
		buckets = q.bucketPaths
	}
	return q.acquireBatch(ctx, only, []State{Processing, Reporting, UpdateReporting},
		func(b *Batch, pre []read) (bool, []Wait) { return q.readyToReport(ctx, b, pre, only == nil) }, buckets, passed, Reporting)
}

// bucketPaths are the paths of a batch's buckets, in the order of Buckets.
func (q *Queue) bucketPaths(bid string) []string {
	paths := make([]string, len(Buckets))
	for i, bucket := range Buckets {
		paths[i] = q.batchPath(bid, "states", bucket)
	}
	return paths
}

// settle is how long an empty batch-processing of a batch without a
// recorded job count must stay unchanged before it is believed: mrt-zk
// moves a job's batch ref by a delete then a create, so the folder is empty
// for an instant on every step of a job it drives. Refs left in
// batch-processing (leftRefs) and buckets short of their count
// (jobsDeleted) are believed after it too.
const settle = 500 * time.Millisecond

// readyToReport tells whether the jobs of a batch in Processing, Reporting
// or UpdateReporting (an operator asked for a new report, maybe right after
// requeueing jobs) are all done: when no job is in
// batch-processing and, where the batch handler recorded how many jobs it
// made, that many are in the other buckets: a job between mrt-zk's delete
// and create is in no bucket, so an empty folder alone proves nothing.
// Without a count (a batch whose jobs another library made), the folder
// must exist, and stay empty and unchanged for settle, and no job naming
// the batch be outside its buckets (noJobOutside). Refs a foreign
// writer left in batch-processing do not count in a look at every batch
// (every: leftRefs), nor, in the count, jobs Merritt's tools deleted
// (jobsDeleted).
// The buckets are read unless pre holds them already (read with the batch).
// Each rule that believes a folder as read waits settle for it; a look
// waits at most once: batch-processing is among the folders of each.
func (q *Queue) readyToReport(ctx context.Context, b *Batch, pre []read, every bool) (bool, []Wait) {
	paths := q.bucketPaths(b.ID)
	r := pre
	if len(r) != len(paths) {
		r = q.getAll(ctx, paths...)
	}
	processing := slices.Index(Buckets, BucketProcessing)
	procPath, procRead := paths[processing:processing+1], r[processing:processing+1]
	done, left := 0, false
	for i, x := range r {
		switch {
		case x.err != nil && !errors.Is(x.err, zk.ErrNoNode):
			return false, nil
		case x.err != nil:
		case i == processing && x.stat.NumChildren > 0:
			// Left refs are looked for only in a look at every batch (at
			// start and at each safety rescan): a look at a batch named
			// follows each of its jobs' moves, and reading every job's
			// status then would cost a batch of N jobs N² reads.
			if !every || !q.leftRefs(ctx, paths[i]) {
				return false, nil // its watch fires when it empties
			}
			left = true // believed once batch-processing settles, below
		case i != processing:
			done += int(x.stat.NumChildren)
		}
	}
	if b.JobCount >= 0 {
		if done < b.JobCount { // a windowed batch's archived jobs are done too
			n, err := q.Archived(ctx, b.ID)
			if err != nil {
				return false, nil
			}
			done += n
		}
		if done >= b.JobCount {
			return !left || q.settled(ctx, procPath, procRead), nil
		}
		if q.jobsDeleted(ctx, b, paths, r) { // its settle of every bucket settles left refs too
			return true, nil
		}
		return false, doneBucketWaits(paths, r)
	}
	if r[processing].err != nil {
		// No folder and no count: a batch whose jobs another library is
		// still making (mrt-zk moves a batch to Processing first). Wait
		// for the folder, as mrt-zk's own reporter does.
		return false, []Wait{{Path: paths[processing]}}
	}
	// Empty, or holding left refs alone; a job still naming the batch but
	// in none of its buckets is between a foreign mover's delete and create
	// of its ref (or its mover died there): waited for, however long. On
	// its last step the ref comes back in a done bucket, which no folder
	// watch follows: watched here.
	if !q.settled(ctx, procPath, procRead) {
		return false, nil
	}
	if !q.noJobOutside(ctx, b.ID) {
		return false, doneBucketWaits(paths, r)
	}
	return true, nil
}

// doneBucketWaits are the waits for a job's ref to come into one of a
// batch's done buckets (paths, read as r, in the order of Buckets).
func doneBucketWaits(paths []string, r []read) []Wait {
	var waits []Wait
	for i, bucket := range Buckets {
		if bucket != BucketProcessing {
			w := Wait{Path: paths[i], Children: true, Present: r[i].err == nil}
			if w.Present {
				w.Cversion = r[i].stat.Cversion
			}
			waits = append(waits, w)
		}
	}
	return waits
}

// jobsDeleted tells whether the jobs a batch lacks (fewer done than its
// job-count, none in batch-processing but left refs) were deleted by
// Merritt's tools (mrt-zk's Job.delete and deleteDeletedJobs leave
// job-count as it was):
// all its jobs are made (a job count is recorded when they are, and a
// windowed batch's feed is done), its buckets stay unchanged for settle
// (mrt-zk's delete, refs then nodes, is over by then), and no job of the
// batch is left outside them: a job between mrt-zk's delete and create of
// its batch ref, or left there by a mover that died, still has its node,
// and the batch waits for it (decisions 36-37); a deleted job has none.
func (q *Queue) jobsDeleted(ctx context.Context, b *Batch, paths []string, r []read) bool {
	f, err := q.LoadFeed(ctx, b.ID)
	return err == nil && (f == nil || f.Done()) && q.settled(ctx, paths, r) && q.noJobOutside(ctx, b.ID)
}

// noJobOutside tells whether every job of batch bid still in the queue has
// its ref in one of the batch's buckets. It reads the bid node of every
// other job: the price of telling a deleted job from a moving one, paid
// only by a batch short of its count.
func (q *Queue) noJobOutside(ctx context.Context, bid string) bool {
	buckets, err := q.BatchJobs(ctx, bid)
	if err != nil {
		return false
	}
	in := JobSet(buckets)
	all, err := q.JobIDs(ctx)
	if err != nil {
		return false
	}
	var paths []string
	for _, jid := range all {
		if !in[jid] {
			paths = append(paths, q.jobPath(jid, "bid"))
		}
	}
	for _, x := range q.getAll(ctx, paths...) {
		switch {
		case errors.Is(x.err, zk.ErrNoNode): // a job being removed, or made by another library
		case x.err != nil, strings.TrimSpace(string(x.data)) == bid:
			return false
		}
	}
	return true
}

// leftRefs tells whether every ref in a batch's batch-processing (at dir)
// is one a foreign writer left behind: of a job that is gone or done.
// mrt-zk's default Job.load (which Batch.deleteDeletedJobs calls on every
// job) writes the refs of the state it read when they are missing, so a
// load racing ingestq's move of the job writes back the refs the move
// removed. A live mrt-zk move to a done state writes the status before the
// refs, and is over within settle: the caller believes leftRefs only once
// dir stays as it read it for that long.
func (q *Queue) leftRefs(ctx context.Context, dir string) bool {
	jids, err := q.children(ctx, dir)
	if err != nil {
		return false
	}
	paths := make([]string, len(jids))
	for i, jid := range jids {
		paths[i] = q.jobPath(jid, "status")
	}
	for i, x := range q.getAll(ctx, paths...) {
		if errors.Is(x.err, zk.ErrNoNode) {
			continue // the job is gone
		}
		if x.err != nil {
			return false
		}
		st, err := decodeJobStatus(q.rel(paths[i]), x.data)
		if err != nil || Bucket(st.Status) == BucketProcessing {
			return false
		}
	}
	return true
}

// settled tells whether the folders at paths, read as r, are still as read
// after settle: there or not, made by the same create, with the same
// children's version.
func (q *Queue) settled(ctx context.Context, paths []string, r []read) bool {
	t := time.NewTimer(settle)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	}
	after := q.getAll(ctx, paths...)
	for i, a := range after {
		switch {
		case a.err != nil && !errors.Is(a.err, zk.ErrNoNode), (a.err == nil) != (r[i].err == nil):
			return false
		case a.err == nil && (a.stat.Cversion != r[i].stat.Cversion || a.stat.Czxid != r[i].stat.Czxid):
			return false
		}
	}
	return true
}

// acquireBatch locks the first batch in one of states that is ready (nil:
// any), and in the same multi() moves it to "to" (if set and it is
// Processing) or rewrites its status
// unchanged, at the version read: either way the lock is taken only if the
// batch has not moved, and the status version moves on, so a session that
// held the batch before and lost its lock can no longer commit. When it
// finds none it returns what to watch for one: the locks of batches held
// elsewhere, the status of batches still being created, and ready's waits.
// A lock of this session that no view of this Queue holds is an orphan,
// released (releaseOrphan).
// The nodes at also(bid) (nil: none) are read with each batch, for ready;
// passed (nil: none) is told of each batch read that is in none of states.
func (q *Queue) acquireBatch(ctx context.Context, batchIDs []string, states []State, ready func(*Batch, []read) (bool, []Wait),
	also func(bid string) []string, passed func(*Batch), to State) (*Batch, []Wait, error) {
	if batchIDs == nil {
		var err error
		if batchIDs, err = q.BatchIDs(ctx); err != nil {
			return nil, nil, err
		}
	}
	var waits []Wait
	for _, bid := range batchIDs {
		// A daemon's batch workers share its session, so a lock whose
		// create's reply was lost is known as this session's, not as this
		// worker's (applied): two of them reading and locking one batch at
		// once could each take it for its own. So they take turns; the
		// second reads after the first's commit, and sees its lock.
		done, err := q.turn(ctx, bid)
		if err != nil {
			return nil, nil, err
		}
		b, w, err := q.tryBatch(ctx, bid, states, ready, also, passed, to)
		done()
		if b != nil || err != nil {
			return b, nil, err
		}
		waits = append(waits, w...)
	}
	return nil, waits, nil
}

// unreadableRepeat is how often tryBatch says again that a batch it
// skips is unreadable the same way: a look a second would say it 3,600
// times an hour (a walk beside Merritt counted 14 lines a batch in 2 minutes).
const unreadableRepeat = 10 * time.Minute

// tryBatch is acquireBatch's look at batch bid: the batch, acquired, or
// what to watch for it.
func (q *Queue) tryBatch(ctx context.Context, bid string, states []State, ready func(*Batch, []read) (bool, []Wait),
	also func(bid string) []string, passed func(*Batch), to State) (*Batch, []Wait, error) {
	var extra []string
	if also != nil {
		extra = also(bid)
	}
	b, pre, err := q.loadBatchWith(ctx, bid, extra...)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, nil, nil
	case errors.Is(err, ErrIncomplete):
		// Created in steps (mrt-zk writes its nodes one by one): its
		// status is what makes it a batch.
		return nil, []Wait{{Path: q.batchPath(bid, "status")}}, nil
	case err != nil:
		// Every look at the queue reads it again: one line a period, not one a look.
		said := bid + "\x00" + err.Error() + "\x00" + strconv.FormatInt(q.now().UnixNano()/int64(unreadableRepeat), 10)
		if !q.badBatches.has(said) {
			q.badBatches.saw(said)
			q.log.Warn("queue: skipping unreadable batch", "err", err, "repeats", "when it changes, or every "+unreadableRepeat.String())
		}
		return nil, nil, nil
	}
	if !slices.Contains(states, b.State()) {
		var waits []Wait
		if b.State() == Held && slices.Contains(states, Pending) || b.State() == Failed && slices.Contains(states, UpdateReporting) {
			waits = append(waits, q.BatchStatusWait(b))
		}
		if passed != nil {
			passed(b)
		}
		return nil, waits, nil
	}
	if b.Locked && b.lockHere && !q.holds(bid) {
		released, err := q.releaseOrphan(ctx, "batch", bid, nil)
		if err != nil {
			q.log.Warn("queue: could not release an orphaned lock of this session", "batch", bid, "err", err)
		}
		b.Locked = !released
	}
	if b.Locked {
		return nil, []Wait{{Path: q.batchPath(bid, "lock"), Present: true}}, nil
	}
	var waits []Wait
	if ready != nil {
		ok, w := ready(b, pre)
		if waits = append(waits, w...); !ok {
			return nil, waits, nil
		}
	}
	st := b.Status
	if to != "" && b.State() == Processing {
		// The message of a batch that failed before it had jobs is kept
		// for its report.
		st = BatchStatus{Status: to, LastModified: q.stamp(), Message: b.Status.Message, Extra: b.Status.Extra}
	}
	ops := []op{lockOp(q.batchPath(bid, "lock")), fenceSet(q.batchPath(bid, "status"), mustJSON(st), b.version)}
	if b.State() == Pending && !b.Acquired {
		ops = append(ops, createRef(q.batchPath(bid, "states")))
	}
	made, err := q.commitLanded(ctx, ops, false)
	if errors.Is(err, ErrLocked) {
		return nil, append(waits, Wait{Path: q.batchPath(bid, "lock"), Present: true}), nil
	}
	if errors.Is(err, ErrStale) {
		return nil, waits, nil
	}
	if err != nil {
		return nil, nil, err
	}
	b.owner, b.Locked, b.lockMade = true, true, made
	b.Status, b.version, b.Acquired = st, b.version+1, b.Acquired || b.State() == Pending
	q.held.Store(bid, b) // in the turn: no look here sees the lock unmarked
	return b, nil, nil
}

// LockBatch takes a batch's lock for an admin action, or fails with
// ErrLocked (lockToLoad).
func (q *Queue) LockBatch(ctx context.Context, bid string) (*Batch, error) {
	b, err := lockToLoad(ctx, q, "batch", bid, q.LoadBatch)
	if err != nil {
		return nil, err
	}
	b.owner, b.Locked = true, true
	return b, nil
}

// UnlockBatch releases a lock this session took (unlockHeld). A stale view
// releases nothing but the session's own lock node.
func (q *Queue) UnlockBatch(ctx context.Context, b *Batch) error {
	if err := q.unlockHeld(ctx, "batch", b.ID, b, b.owner, &b.lockMade); err != nil {
		return err
	}
	b.owner, b.Locked = false, false
	return nil
}

// NoteBatch writes msg as the message of a batch this view holds, its
// state and last_modified kept (so its arrival ID too): why its intake is
// tried again, for every reader of the queue, until its next move writes
// its own. mrt-zk's Batch reads the status node's status alone, and writes
// it with a message of its own at each move. deferred (nil: none) is
// written with it (BatchStatus.Deferred); a note without drops the one
// before. Fenced by the status read; a stale view lets go of this
// session's lock, as a move's does.
func (q *Queue) NoteBatch(ctx context.Context, b *Batch, msg string, deferred *Deferral) error {
	st := b.Status
	st.Message, st.Deferred = truncate(msg, maxMessage), deferred
	if err := q.commit(ctx, []op{fenceSet(q.batchPath(b.ID, "status"), mustJSON(st), b.version)}); err != nil {
		return q.letGoIfStale(ctx, b, err)
	}
	b.Status, b.version = st, b.version+1
	return nil
}

// letGoIfStale lets go of b's lock when err is a fenced write's that found
// b's view stale (the batch is no longer this view's to hold), and returns
// err. The lock there may be another view's of this session: b's went with
// a move that landed unconfirmed (MaybeApplied), or with an expired
// session, and an acquisition here took the batch since. So only the view
// still marked as the holder deletes it, in the batch's turn (an
// acquisition marks its view in its own, after its commit).
func (q *Queue) letGoIfStale(ctx context.Context, b *Batch, err error) error {
	if !errors.Is(err, ErrStale) || !b.owner {
		return err
	}
	b.owner = false
	done, terr := q.turn(ctx, b.ID)
	if q.held.CompareAndDelete(b.ID, b) && terr == nil {
		_ = q.releaseOwnLock(ctx, q.batchPath(b.ID, "lock")) // failing, an orphan for the next look
	}
	if terr == nil {
		done()
	}
	return err
}

// BatchChange is what a batch transition writes besides the status.
type BatchChange struct {
	Message  string
	JobCount *int          // how many jobs the batch handler made: written to job-count
	Report   *StatusReport // written to status-report in the same multi()
	Release  bool          // delete the lock in the same multi()
	At       time.Time     // stamps the change; zero means now (see JobChange.At)
	Retried  bool          // an earlier try may have landed (see JobChange.Retried)
	via      State         // passed through in the same multi() (see JobChange.via)
}

// SetBatchStatus moves a batch to another state in one multi(), fenced by the
// version of the status this view was read at.
func (q *Queue) SetBatchStatus(ctx context.Context, b *Batch, to State, c BatchChange) error {
	from, left := b.State(), b.State()
	if c.via != "" {
		if err := BatchMachine.Check(b.ID, from, c.via); err != nil {
			return err
		}
		from = c.via
	}
	if err := BatchMachine.Check(b.ID, from, to); err != nil {
		return err
	}
	st := BatchStatus{Status: to, LastModified: q.stampAt(c.At), Message: truncate(c.Message, maxMessage), Extra: b.Status.Extra}
	ops := []op{fenceSet(q.batchPath(b.ID, "status"), mustJSON(st), b.version)}
	if c.Report != nil {
		ops = append(ops, upsert(q.batchPath(b.ID, "status-report"), mustJSON(c.Report), b.Report != nil))
	}
	if c.JobCount != nil {
		ops = append(ops, upsert(q.batchPath(b.ID, "job-count"), []byte(strconv.Itoa(*c.JobCount)), b.JobCount >= 0))
	}
	if c.Release && b.owner {
		ops = append(ops, delIfThere(q.batchPath(b.ID, "lock")))
	}
	if _, err := q.commitLanded(ctx, ops, c.Retried); err != nil {
		return q.letGoIfStale(ctx, b, err)
	}
	b.Status, b.version = st, b.version+1
	if c.Report != nil {
		b.Report = c.Report
	}
	if c.JobCount != nil {
		b.JobCount = *c.JobCount
	}
	if c.Release {
		b.owner, b.Locked = false, false
		q.held.CompareAndDelete(b.ID, b)
	}
	moved := *b
	tellMoved(ctx, Moved{Batch: &moved, From: left})
	return nil
}

// BatchJobs lists the jids in each of a batch's buckets, one bucket after
// another in the order of Buckets, which is the order jobs move in: a job
// that moves on meanwhile is listed once or twice, never missed.
func (q *Queue) BatchJobs(ctx context.Context, bid string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, bucket := range Buckets {
		kids, err := q.children(ctx, q.batchPath(bid, "states", bucket))
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, err
		}
		slices.Sort(kids)
		out[bucket] = kids
	}
	return out, nil
}

// JobSet is the jids in a batch's buckets as BatchJobs lists them, each
// once: a job listed in two (it moved on between listings) is one job.
func JobSet(buckets map[string][]string) map[string]bool {
	set := map[string]bool{}
	for _, jids := range buckets {
		for _, jid := range jids {
			set[jid] = true
		}
	}
	return set
}

// validName tells whether s is prefix followed by one or more digits.
func validName(s, prefix string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || rest == "" {
		return false
	}
	for _, c := range rest {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
