package queue

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// CheckOptions tune CheckAll.
type CheckOptions struct {
	// LockAge is the age past which a job, batch, object or access
	// request lock is reported as a warning (a step that long may be
	// stuck). Default 1 hour.
	LockAge time.Duration
}

// CheckAll is Check, plus what is consistent but wants a look (warnings):
// a batch whose jobs are all done that no session is reporting, a Failed
// batch with requeued jobs, a lock held longer than opts.LockAge, a
// finished batch with fewer jobs than its job-count (Merritt's tools
// deleted some). Besides
// the job invariant, its violations cover batches: a job whose object
// (object_key) has another job in its batch, a Completed batch with a job
// still in batch-processing, a status-report that
// disagrees with the buckets, more jobs than the batch's job-count.
func (q *Queue) CheckAll(ctx context.Context, opts CheckOptions) (violations, warnings []Violation, err error) {
	if opts.LockAge <= 0 {
		opts.LockAge = time.Hour
	}
	violations, err = q.Check(ctx)
	if err != nil {
		return nil, nil, err
	}
	bids, err := q.BatchIDs(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, bid := range bids {
		v, w, err := q.checkBatch(ctx, bid)
		if err != nil {
			return nil, nil, err
		}
		violations, warnings = append(violations, v...), append(warnings, w...)
	}
	w, err := q.oldLocks(ctx, opts.LockAge)
	if err != nil {
		return nil, nil, err
	}
	warnings = append(warnings, w...)
	w, err = q.goneBatchUUIDs(ctx)
	if err != nil {
		return nil, nil, err
	}
	warnings = append(warnings, w...)
	for _, l := range [][]Violation{violations, warnings} {
		slices.SortFunc(l, func(a, b Violation) int { return strings.Compare(a.Path, b.Path) })
	}
	return violations, warnings, nil
}

// goneBatchUUIDs names each /batch-uuids node whose batch is gone
// (findGoneUUIDs): a warning, as no worker reads it, but its batchID is
// refused as already used.
func (q *Queue) goneBatchUUIDs(ctx context.Context) ([]Violation, error) {
	gone, err := q.findGoneUUIDs(ctx, nil)
	if err != nil {
		return nil, err
	}
	out := make([]Violation, len(gone))
	for i, g := range gone {
		out[i] = Violation{Path: g.Path, Problem: fmt.Sprintf(
			"names %s, which is gone (a creation cut short, or a batch removed without its uuid): batchID %s is refused as already used while this node is there (`ingestq cleanup` removes it)",
			g.BID, g.UUID)}
	}
	return out, nil
}

// GoneUUID is a /batch-uuids node whose batch is gone.
type GoneUUID struct {
	Path    string `json:"path"` // relative to the root
	UUID    string `json:"uuid"` // the batchID it refuses
	BID     string `json:"bid"`  // the batch it names
	version int32  // as read: cleanup deletes it at this version
}

// findGoneUUIDs finds the /batch-uuids nodes whose batch is gone. It is
// left by a creation cut short (mrt-zk writes the uuid right after the bid
// node) whose empty bid node cleanup removed, or by a batch removed
// without it. A young one is passed (a creation or removal may be under
// way), and so is one gone or made again by the time its batch is found
// gone, and one whose content is no bid. A bid in assumeGone counts as
// gone: the husks a dry run of cleanup would remove.
func (q *Queue) findGoneUUIDs(ctx context.Context, assumeGone map[string]bool) ([]GoneUUID, error) {
	uuids, err := q.children(ctx, q.Path("/batch-uuids"))
	if err != nil {
		return nil, err
	}
	slices.Sort(uuids)
	uuidPath := func(i int) string { return q.Path("/batch-uuids/" + uuids[i]) }
	// Each pass reads a chunk at a time (scan): a queue keeps a uuid per
	// batch ever made, and one read of them all outlasted the request
	// timeout (100,000: "no answer from ZooKeeper within 5s").
	type named struct {
		i       int // in uuids
		bid     string
		czxid   int64
		version int32
	}
	var old, gone []named
	err = q.scan(ctx, len(uuids), uuidPath, func(i int, r read) error {
		switch {
		case errors.Is(r.err, zk.ErrNoNode):
			return nil
		case r.err != nil:
			return fmt.Errorf("read %s: %w", q.rel(uuidPath(i)), r.err)
		}
		if bid := strings.TrimSpace(string(r.data)); validName(bid, "bid") && !q.young(r.stat.Ctime) {
			old = append(old, named{i, bid, r.stat.Czxid, r.stat.Version})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = q.scan(ctx, len(old), func(k int) string { return q.batchPath(old[k].bid) }, func(k int, r read) error {
		switch {
		case errors.Is(r.err, zk.ErrNoNode) || r.err == nil && assumeGone[old[k].bid]:
			gone = append(gone, old[k])
		case r.err != nil:
			return fmt.Errorf("read %s: %w", q.rel(q.batchPath(old[k].bid)), r.err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []GoneUUID
	err = q.scan(ctx, len(gone), func(k int) string { return uuidPath(gone[k].i) }, func(k int, r read) error {
		switch u := gone[k]; {
		case errors.Is(r.err, zk.ErrNoNode) || r.err == nil && r.stat.Czxid != u.czxid:
			return nil // removed with its batch, or made again, meanwhile
		case r.err != nil:
			return fmt.Errorf("read %s: %w", q.rel(uuidPath(u.i)), r.err)
		default:
			out = append(out, GoneUUID{Path: q.rel(uuidPath(u.i)), UUID: uuids[u.i], BID: u.bid, version: u.version})
			return nil
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// checkBatch compares a batch with its jobs. What a daemon may be changing
// is read twice, and reported only if the batch's status did not move in
// between.
func (q *Queue) checkBatch(ctx context.Context, bid string) (violations, warnings []Violation, err error) {
	for range 5 {
		b, err := q.LoadBatch(ctx, bid)
		switch {
		case errors.Is(err, ErrNotFound):
			return nil, nil, nil // gone
		case errors.Is(err, ErrIncomplete):
			return q.checkHusk(ctx, q.batchPath(bid), "batch"), nil, nil
		case errors.Is(err, ErrCorrupt):
			return []Violation{{Path: q.rel(q.batchPath(bid)), Problem: err.Error()}}, nil, nil
		}
		if err != nil {
			return nil, nil, err
		}
		buckets, err := q.BatchJobs(ctx, bid)
		if err != nil {
			return nil, nil, err
		}
		v, w, err := q.batchProblems(ctx, b, buckets)
		if err != nil {
			return nil, nil, err
		}
		again, err := q.LoadBatch(ctx, bid)
		if err == nil && again.version == b.version && again.Locked == b.Locked {
			return v, w, nil
		}
	}
	return nil, nil, nil // it moves: not stuck
}

func (q *Queue) batchProblems(ctx context.Context, b *Batch, buckets map[string][]string) (violations, warnings []Violation, err error) {
	at := q.rel(q.batchPath(b.ID))
	bad := func(format string, args ...any) {
		violations = append(violations, Violation{Path: at, Problem: fmt.Sprintf(format, args...)})
	}
	warn := func(format string, args ...any) {
		warnings = append(warnings, Violation{Path: at, Problem: fmt.Sprintf(format, args...)})
	}
	processing := buckets[BucketProcessing]
	total, err := q.Archived(ctx, b.ID) // a windowed batch's archived jobs (decision 174)
	if err != nil {
		return nil, nil, err
	}
	for _, jids := range buckets {
		total += len(jids)
	}
	switch b.State() {
	case Completed:
		// Reporting is not checked so: Merritt's batch handler moves a
		// batch there as soon as it has made the jobs, which then run.
		if len(processing) > 0 {
			bad("%s, but %d of its jobs are still in batch-processing: %s", b.State(), len(processing), strings.Join(first(processing), ", "))
		}
	case Failed:
		// A job requeued after the report was listed as failed in it (or,
		// without a report, was requeued: its retry count grew); any other
		// job in batch-processing was unfinished when the batch reported.
		var requeued, unfinished []string
		for _, jid := range processing {
			if b.Report != nil && slices.Contains(b.Report.FailedJobs, jid) || b.Report == nil && q.retried(ctx, jid) {
				requeued = append(requeued, jid)
			} else {
				unfinished = append(unfinished, jid)
			}
		}
		if len(unfinished) > 0 {
			bad("Failed, but %d of its jobs were unfinished when it reported: %s", len(unfinished), strings.Join(first(unfinished), ", "))
		}
		if len(requeued) > 0 {
			warn("Failed, with %d requeued jobs in batch-processing: `ingestq report %s` once they are done", len(requeued), b.ID)
		}
	case Processing, Reporting, UpdateReporting:
		if len(processing) == 0 && total > 0 && !b.Locked && (b.JobCount < 0 || total >= b.JobCount) {
			warn("%s with all %d jobs done, and no session is reporting it (is a daemon running?)", b.State(), total)
		}
	}
	if b.JobCount >= 0 {
		switch done := b.State() == Completed || b.State() == Failed; {
		case total > b.JobCount:
			bad("%d jobs in its buckets, but its handler made %d (job-count)", total, b.JobCount)
		case done && total != b.JobCount:
			// Fewer: what Merritt's tools leave when they delete a done job.
			warn("%s with %d jobs in its buckets, but its handler made %d (job-count): the others were deleted "+
				"by a tool that leaves job-count as it was (mrt-zk's Job.delete, Batch.deleteDeletedJobs)", b.State(), total, b.JobCount)
		}
	}
	if b.Report != nil && (b.State() == Completed || b.State() == Failed) {
		removed, err := q.removedJobs(ctx, b, buckets)
		if err != nil {
			return nil, nil, err
		}
		violations = append(violations, reportProblems(at, b, buckets, removed)...)
	}
	dups, err := q.duplicateObjects(ctx, b.ID, buckets)
	if err != nil {
		return nil, nil, err
	}
	for _, d := range dups {
		bad("%s", d)
	}
	return violations, warnings, nil
}

// removedJobs finds the jobs b's status-report names that were removed
// from the queue since it reported: `ingestq delete --purge` of a done job,
// or mrt-zk's delete of a Completed one, takes the job's nodes and refs and
// leaves the report as it was sent (decision 248). Such a job has no node
// under /jobs and is in none of the batch's buckets, and its number is one
// the /jobs sequence has given out (jids are never used again), where a
// report naming a job that never was stays a violation.
func (q *Queue) removedJobs(ctx context.Context, b *Batch, buckets map[string][]string) (map[string]bool, error) {
	inBucket := JobSet(buckets)
	var missing []string
	for _, jid := range slices.Concat(b.Report.SuccessfulJobs, b.Report.FailedJobs) {
		if !inBucket[jid] && validName(jid, "jid") {
			missing = append(missing, jid)
		}
	}
	if len(missing) == 0 {
		return nil, nil
	}
	ok, st, err := q.zk.exists(ctx, q.Path("/jobs"))
	if err != nil || !ok {
		return nil, err
	}
	removed := map[string]bool{}
	for _, jid := range missing {
		if !givenOut(jid, st) {
			continue // never made
		}
		there, _, err := q.zk.exists(ctx, q.jobPath(jid))
		if err != nil {
			return nil, err
		}
		if !there {
			removed[jid] = true
		}
	}
	return removed, nil
}

// reportProblems compares a finished batch's status-report with its
// buckets. Completed: the report's lists are the completed and failed
// buckets. Failed: jobs may have been requeued since, so each job the
// report names must still be in the batch, and each done job in it. A job
// removed since the report (removed) is no finding: the report stands as
// it was sent.
func reportProblems(at string, b *Batch, buckets map[string][]string, removed map[string]bool) []Violation {
	var out []Violation
	live := func(jids []string) []string {
		return slices.DeleteFunc(slices.Clone(jids), func(jid string) bool { return removed[jid] })
	}
	in := func(jid string, names ...string) bool {
		for _, n := range names {
			if slices.Contains(buckets[n], jid) {
				return true
			}
		}
		return false
	}
	reported := live(slices.Concat(b.Report.SuccessfulJobs, b.Report.FailedJobs))
	if b.State() == Completed {
		if !sameSet(live(b.Report.SuccessfulJobs), buckets["batch-completed"]) || !sameSet(live(b.Report.FailedJobs), buckets["batch-failed"]) {
			out = append(out, Violation{Path: at + "/status-report", Problem: fmt.Sprintf("lists %d successful and %d failed jobs, its buckets hold %d completed and %d failed",
				len(b.Report.SuccessfulJobs), len(b.Report.FailedJobs), len(buckets["batch-completed"]), len(buckets["batch-failed"]))})
		}
		return out
	}
	for _, jid := range reported {
		if !in(jid, Buckets...) {
			out = append(out, Violation{Path: at + "/status-report", Problem: "names " + jid + ", which is in none of the batch's buckets"})
		}
	}
	for _, jid := range slices.Concat(buckets["batch-completed"], buckets["batch-failed"]) {
		if !slices.Contains(reported, jid) {
			out = append(out, Violation{Path: at + "/status-report", Problem: "does not name " + jid + ", a done job of the batch"})
		}
	}
	return out
}

func sameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// retried tells whether a job's retry count is above 0 (it was requeued).
func (q *Queue) retried(ctx context.Context, jid string) bool {
	j, err := q.LoadJob(ctx, jid)
	return err == nil && j.Status.RetryCount > 0
}

// duplicateObjects finds the objects (object_key) that have more than one
// job in the batch. Deleted jobs do not count: failing and deleting one of
// two jobs is how an operator clears a duplicate.
func (q *Queue) duplicateObjects(ctx context.Context, bid string, buckets map[string][]string) ([]string, error) {
	var jids []string
	for _, b := range Buckets {
		if b != "batch-deleted" {
			jids = append(jids, buckets[b]...)
		}
	}
	keys := make([]string, len(jids))
	each(len(jids), 32, func(i int) {
		data, _, err := q.zk.get(ctx, q.jobPath(jids[i], "configuration"))
		var cfg JobConfig
		if err == nil && decodeJSON("", data, &cfg) == nil {
			keys[i] = cfg.ObjectKey
		}
	})
	byKey := map[string][]string{}
	for i, k := range keys {
		if k != "" {
			byKey[k] = append(byKey[k], jids[i])
		}
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		if js := byKey[k]; len(js) > 1 {
			slices.Sort(js)
			out = append(out, fmt.Sprintf("object %q has %d jobs: %s", k, len(js), strings.Join(js, ", ")))
		}
	}
	return out, nil
}

// oldLocks lists the job and batch locks, and the per-object locks
// (storage, inventory, local id), older than age. An object lock no session
// holds is persistent: mrt-zk's Java storage lock is made so
// (MerrittLocks.lockObjectStorage), and one its service left when it
// stopped holds back every store of the object until it is deleted.
func (q *Queue) oldLocks(ctx context.Context, age time.Duration) ([]Violation, error) {
	var paths []string
	// An access request's lock too: an assembly stuck that long holds its
	// request Processing, and no other daemon takes it while the lock lives.
	dirs := []string{"/jobs", "/batches", "/locks/storage", "/locks/inventory", "/locks/localid"}
	for _, name := range AccessQueues {
		dirs = append(dirs, "/access/"+name)
	}
	for _, dir := range dirs {
		kids, err := q.children(ctx, q.Path(dir))
		if errors.Is(err, zk.ErrNoNode) && dir != "/jobs" && dir != "/batches" {
			continue // a tree Merritt's Ruby made has no /locks/localid, nor maybe access queues
		}
		if err != nil {
			return nil, err
		}
		for _, k := range kids {
			switch {
			case strings.HasPrefix(dir, "/locks/"):
				paths = append(paths, q.Path(dir+"/"+k))
			case validName(k, "jid") || validName(k, "bid") || validName(k, "qid"):
				paths = append(paths, q.Path(dir+"/"+k+"/lock"))
			}
		}
	}
	var out []Violation
	for i, r := range q.getAll(ctx, paths...) {
		if r.err != nil {
			if !errors.Is(r.err, zk.ErrNoNode) {
				return nil, r.err
			}
			continue
		}
		since := time.UnixMilli(r.stat.Ctime)
		if q.now().Sub(since) <= age {
			continue
		}
		by := fmt.Sprintf("session 0x%x", r.stat.EphemeralOwner)
		if r.stat.EphemeralOwner == 0 {
			by = "no session: a persistent lock (as Merritt's storage service takes one); it stays until deleted"
		}
		out = append(out, Violation{Path: q.rel(paths[i]), Since: since,
			Problem: fmt.Sprintf("held for %s by %s", q.now().Sub(since).Round(time.Second), by)})
	}
	return out, nil
}

func first(s []string) []string { return s[:min(len(s), 5)] }
