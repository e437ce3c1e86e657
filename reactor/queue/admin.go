package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// Admin actions take the item's lock for the length of one change, so they
// never race a daemon that is working on it: a locked item is refused with
// ErrLocked. Each change is one fenced multi() that releases the lock.

// withJob locks jid, runs fn, and unlocks unless fn's change released it.
// A job a daemon is working on is refused with what would work for action.
func (q *Queue) withJob(ctx context.Context, jid, action string, fn func(*Job) error) error {
	j, err := q.lockJob(ctx, jid)
	if errors.Is(err, ErrLocked) {
		state, who := State("in the pipeline"), "a daemon is working on it"
		if j, lerr := q.LoadJob(ctx, jid); lerr == nil {
			state, who = j.State(), q.lockHolder(ctx, j)
		}
		cli, api, ui := busyAdvice(action, jid)
		return Advised(busy("job %s is %s and %s", jid, state, who), cli, api, ui)
	}
	if err != nil {
		return err
	}
	defer q.unlockAdminJob(ctx, j)
	return fn(j)
}

// lockHolder says who is working on a locked job, by Holder's words.
func (q *Queue) lockHolder(ctx context.Context, j *Job) string {
	if !j.Locked { // released since
		return "a daemon is working on it"
	}
	return q.SessionHolder(ctx, j.LockSession) + " is working on it"
}

// SessionHolder names who holds a lock that session owns, by Holder's
// words, reading the live hosts for the one whose session it is.
func (q *Queue) SessionHolder(ctx context.Context, session int64) string {
	hosts, _ := q.Hosts(ctx) // none read: the session is named instead
	name := ""
	for _, h := range hosts {
		if h.Session == session {
			name = h.Name
			break
		}
	}
	return Holder(name, session)
}

// Holder names who holds a lock that session owns, in the words every
// reader gives (a busy job's refusal, a stalled reason, locked_by): "host
// NAME" when host, the live ingestq host whose session it is (its host node
// and the lock have the same ephemeral owner), is known; else the session:
// another program's, or a daemon's that died and whose session has not
// expired yet; session 0 is a persistent lock node, which no expiry removes.
func Holder(host string, session int64) string {
	if host != "" {
		return "host " + host
	}
	if session == 0 {
		return "a persistent lock node (another program's: no session holds it, it stays until deleted)"
	}
	return fmt.Sprintf("session 0x%x (no live ingestq host: another program, or a daemon that died)", session)
}

// done tells whether a job has left the pipeline for good: there is
// nothing to stop, and failing it is no edge of the state machine.
func done(s State) bool { return s == Completed || s == Deleted }

// busyAdvice says what an operator can do about a job a daemon holds: at
// the CLI, through the HTTP API, and on the dashboard, whose Fail button
// does not force (so the force is the API's request there).
func busyAdvice(action, jid string) (cli, api, ui string) {
	stop := fmt.Sprintf("`ingestq fail --force %s` stops it (the daemon abandons its step)", jid)
	apiStop := fmt.Sprintf(`POST /api/v1/jobs/%s/fail with {"force": true} stops it (the daemon abandons its step)`, jid)
	switch action {
	case "fail":
		return "`ingestq fail --force " + jid + "` fails it now (the daemon abandons its step)",
			`send {"force": true} in the body to fail it now (the daemon abandons its step)`,
			"try again when its step ends, or " + apiStop
	case "requeue":
		return "only a Failed job can be requeued: " + stop + ", then `ingestq requeue " + jid + "`",
			"only a Failed job can be requeued: " + apiStop + ", then POST /api/v1/jobs/" + jid + "/requeue",
			"only a Failed job can be requeued: " + apiStop + ", then the Requeue button"
	case "delete":
		return stop + ", then `ingestq delete " + jid + "`", apiStop + ", then DELETE /api/v1/jobs/" + jid,
			apiStop + ", then the Delete button"
	case "hold":
		return "only a Pending job can be held; " + stop, "only a Pending job can be held; " + apiStop, ""
	}
	return "try again when its step ends, or " + stop, "try again when its step ends, or " + apiStop, ""
}

func (q *Queue) withBatch(ctx context.Context, bid string, fn func(*Batch) error) error {
	b, err := q.LockBatch(ctx, bid)
	if errors.Is(err, ErrLocked) {
		return busy("a daemon is working on batch %s (making its jobs or its report); try again when it is done", bid)
	}
	if err != nil {
		return err
	}
	defer func() {
		if b.owner {
			q.unlockAdmin(ctx, "batch", b.ID, b, func(ctx context.Context) error { return q.UnlockBatch(ctx, b) })
		}
	}()
	return fn(b)
}

// unlockAdmin releases an admin action's lock of the kind id, which view
// holds, by unlock. It outlives the action's request (an API client gone):
// the lock is the API's long-lived session's, nothing there releases it,
// and every host would wait on it until the daemon restarted. An unlock
// that fails (ZooKeeper silent) unmarks view, so that the lock there, if
// this session's, is an orphan to release once ZooKeeper answers
// (releaseOrphanLater).
func (q *Queue) unlockAdmin(ctx context.Context, kind, id string, view any, unlock func(context.Context) error) {
	if err := unlock(context.WithoutCancel(ctx)); err != nil {
		q.log.Warn("queue: could not release an admin's lock; released once ZooKeeper answers", kind, id, "err", err)
		q.held.CompareAndDelete(id, view)
		go q.releaseOrphanLater(kind, id)
	}
}

// unlockAdminJob is unlockAdmin for an admin's job view j, if it still
// holds the lock (a change that released it did not).
func (q *Queue) unlockAdminJob(ctx context.Context, j *Job) {
	if j.owner {
		q.unlockAdmin(ctx, "job", j.ID, j, func(ctx context.Context) error { return q.UnlockJob(ctx, j) })
	}
}

// HoldJob moves a Pending job to Held. changed is false when it was Held
// already: holding twice is not an error.
func (q *Queue) HoldJob(ctx context.Context, jid string) (changed bool, err error) {
	err = q.withJob(ctx, jid, "hold", func(j *Job) error {
		switch j.State() {
		case Held:
			return nil
		case Pending:
			changed = true
			return q.SetJobStatus(ctx, j, Held, JobChange{Release: true})
		}
		if done(j.State()) {
			return refused("job %s is %s: it is done; only a Pending job can be held", jid, j.State())
		}
		if j.State() == Failed { // no daemon takes it: there is nothing to stop
			return refused("job %s is Failed: no daemon takes it until it is requeued; only a Pending job can be held", jid)
		}
		p := cmp.Or(j.Profile(), "NAME")
		return Advised(refused("job %s is %s: only a Pending job can be held (it then waits before its first step)", jid, j.State()),
			"`ingestq fail "+jid+"` stops it, `ingestq hold collection "+p+"` holds its collection's pending work",
			"POST /api/v1/jobs/"+jid+"/fail stops it, PUT /api/v1/holds/collections/"+p+" holds its collection's pending work",
			"the Fail button stops it, PUT /api/v1/holds/collections/"+p+" holds its collection's pending work")
	})
	return changed, err
}

// ReleaseJob moves a Held job back to Pending; changed is false when it
// was not Held but Pending already.
func (q *Queue) ReleaseJob(ctx context.Context, jid string) (changed bool, err error) {
	err = q.withJob(ctx, jid, "release", func(j *Job) error {
		switch j.State() {
		case Pending:
			return nil
		case Held:
			changed = true
			return q.SetJobStatus(ctx, j, Pending, JobChange{Release: true})
		}
		return refused("job %s is %s, not Held: there is nothing to release", jid, j.State())
	})
	return changed, err
}

// RequeueTarget is where a Failed job resumes: the state after its last
// successful one, or Pending when it never had one.
func RequeueTarget(j *Job) State {
	lss := j.Status.LastSuccessfulStatus
	switch {
	case lss == nil:
		return Pending
	case *lss == Pending:
		return Estimating
	}
	if next, ok := JobMachine.Success(*lss); ok {
		return next
	}
	return Pending
}

// RequeueJob sends a Failed job back to the state after its last successful
// one, adds one to retry_count, and puts it back in batch-processing. Its
// message becomes message ("requeued by an operator" for ""), in place of
// the failure's, until the next move replaces it: as every move of
// mrt-zk's writes a message (its default "").
func (q *Queue) RequeueJob(ctx context.Context, jid, message string) (State, error) {
	message = cmp.Or(message, "requeued by an operator")
	var to State
	err := q.withJob(ctx, jid, "requeue", func(j *Job) error {
		switch {
		case done(j.State()):
			return refused("job %s is %s: it is done; only a Failed job can be requeued (a new deposit makes a new version)", jid, j.State())
		case j.State() == Held: // it has not started: nothing to redo, and a Held job cannot fail
			return Advised(refused("job %s is Held; only a Failed job can be requeued", jid),
				"`ingestq release job "+jid+"` lets it start", "POST /api/v1/jobs/"+jid+"/release lets it start",
				"the Release button lets it start")
		case j.State() != Failed:
			return Advised(refused("job %s is %s; only a Failed job can be requeued", jid, j.State()),
				"`ingestq fail "+jid+"` first, to redo a step", "POST /api/v1/jobs/"+jid+"/fail first, to redo a step",
				"the Fail button first, to redo a step")
		}
		to = RequeueTarget(j)
		return q.SetJobStatus(ctx, j, to, JobChange{Message: message, Release: true, requeue: true})
	})
	return to, err
}

// FailJob moves a job to Failed with message. With force it does so even
// while a daemon holds the job: the daemon's view goes stale, so its own
// commit fails and it abandons the step.
func (q *Queue) FailJob(ctx context.Context, jid, message string, force bool) error {
	if message == "" {
		message = "failed by an operator"
	}
	fail := func(j *Job) error {
		switch s := j.State(); s {
		case Failed:
			return Advised(refused("job %s is Failed already", jid),
				"`ingestq requeue "+jid+"` runs its step again, `ingestq delete "+jid+"` retires it",
				"POST /api/v1/jobs/"+jid+"/requeue runs its step again, DELETE /api/v1/jobs/"+jid+" retires it",
				"the Requeue button runs its step again, the Delete button retires it")
		case Completed, Deleted:
			return refused("job %s is %s: it has left the pipeline, there is nothing to fail", jid, s)
		}
		return q.SetJobStatus(ctx, j, Failed, JobChange{Message: message, Release: j.owner})
	}
	err := q.withJob(ctx, jid, "fail", fail)
	if !force || !errors.Is(err, ErrLocked) {
		return err
	}
	j, err := q.LoadJob(ctx, jid)
	if err != nil {
		return err
	}
	return fail(j)
}

// DeleteJob retires a Held or Failed job: it goes to Deleted, and stays
// listed in its batch's batch-deleted bucket, for the report. With purge, a
// Held, Failed, Completed or Deleted job is removed from ZooKeeper with its
// refs instead. Any other job is refused: it is still in the pipeline.
// changed is false for a job that was Deleted already (without purge).
func (q *Queue) DeleteJob(ctx context.Context, jid string, purge bool) (removed, changed bool, err error) {
	err = q.withJob(ctx, jid, "delete", func(j *Job) error {
		switch s := j.State(); {
		case purge && (s == Held || s == Failed || s == Completed || s == Deleted):
			removed, changed = true, true
			return q.removeJob(ctx, j, true)
		case s == Held || s == Failed:
			changed = true
			return q.SetJobStatus(ctx, j, Deleted, JobChange{Release: true})
		case s == Deleted:
			return nil
		case s == Completed:
			return Advised(refused("job %s is Completed", jid),
				"only `ingestq delete --purge "+jid+"` removes it (and it leaves its batch's report)",
				"only DELETE /api/v1/jobs/"+jid+"?purge=true removes it (and it leaves its batch's report)", "")
		}
		return Advised(refused("job %s is %s, still in the pipeline; only Held, Failed, Completed and Deleted jobs can be deleted", jid, j.State()),
			"`ingestq fail "+jid+"`, then `ingestq delete "+jid+"`",
			"POST /api/v1/jobs/"+jid+"/fail, then DELETE /api/v1/jobs/"+jid, "the Fail button, then the Delete button")
	})
	return removed, changed, err
}

// removeJob deletes a locked job's nodes, its ref and its batch ref in one
// multi(), fenced by its status version. With countDown, the batch's
// job-count (if it has one) drops by one in the same multi(), so that the
// batch's report does not wait for a job that is gone.
func (q *Queue) removeJob(ctx context.Context, j *Job, countDown bool) error {
	kids, err := q.children(ctx, q.jobPath(j.ID))
	if err != nil {
		return err
	}
	ops := []op{fenceCheck(q.jobPath(j.ID, "status"), j.version)}
	if countDown {
		o, err := q.countDown(ctx, j.BatchID)
		if err != nil {
			return err
		}
		ops = append(ops, o...)
	}
	for _, k := range kids {
		if k != "status" && k != "lock" {
			ops = append(ops, del(q.jobPath(j.ID, k)))
		}
	}
	ops = append(ops, del(q.jobPath(j.ID, "status")), delIfThere(q.jobPath(j.ID, "lock")), del(q.jobPath(j.ID)),
		q.delRef(j.State(), j.ref, j.ID), delIfThere(q.batchPath(j.BatchID, "states", Bucket(j.State()), j.ID)))
	if err := q.commit(ctx, ops); err != nil {
		return err
	}
	q.letGoJob(j)
	return nil
}

// letGoJob marks view j as no longer holding the job's lock (a change
// released it or found j stale) and, an admin's view (lockToLoad), no
// longer held here.
func (q *Queue) letGoJob(j *Job) {
	j.owner, j.Locked = false, false
	q.held.CompareAndDelete(j.ID, j)
}

// countDown is the op that lowers a batch's job-count by one, at the
// version read (read again if it moved), or none when it has no count.
func (q *Queue) countDown(ctx context.Context, bid string) ([]op, error) {
	p := q.batchPath(bid, "job-count")
	data, st, err := q.get(ctx, p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	n, err := decodeInt(q.rel(p), data)
	if err != nil {
		return nil, err
	}
	o := set(p, []byte(strconv.FormatInt(max(n-1, 0), 10)), st.Version)
	o.recover = func(_ context.Context, err error) ([]op, error) {
		if errors.Is(err, zk.ErrBadVersion) {
			return q.countDown(ctx, bid)
		}
		if errors.Is(err, zk.ErrNoNode) {
			return nil, nil
		}
		return nil, err
	}
	return []op{o}, nil
}

// HoldBatch moves a Pending batch to Held; changed is false when it was
// Held already.
func (q *Queue) HoldBatch(ctx context.Context, bid string) (changed bool, err error) {
	err = q.withBatch(ctx, bid, func(b *Batch) error {
		switch b.State() {
		case Held:
			return nil
		case Pending:
			changed = true
			return q.SetBatchStatus(ctx, b, Held, BatchChange{Release: true})
		}
		p := cmp.Or(b.Profile(), "NAME")
		return Advised(refused("batch %s is %s: only a Pending batch can be held (before its jobs are made)", bid, b.State()),
			"`ingestq hold collection "+p+"` holds its collection's pending jobs, `ingestq hold job JID` one of them",
			"PUT /api/v1/holds/collections/"+p+" holds its collection's pending jobs, POST /api/v1/jobs/JID/hold one of them", "")
	})
	return changed, err
}

// ReleaseBatch moves a Held batch back to Pending; changed is false when
// it was Pending already.
func (q *Queue) ReleaseBatch(ctx context.Context, bid string) (changed bool, err error) {
	err = q.withBatch(ctx, bid, func(b *Batch) error {
		switch b.State() {
		case Pending:
			return nil
		case Held:
			changed = true
			return q.SetBatchStatus(ctx, b, Pending, BatchChange{Release: true})
		}
		return refused("batch %s is %s, not Held: there is nothing to release", bid, b.State())
	})
	return changed, err
}

// ReportBatch moves a Failed batch to UpdateReporting, so a daemon reports it
// again (after its failed jobs were requeued and finished). Its message
// keeps the batch's note, if any, for the new report. changed is false when
// it was asked already (UpdateReporting).
func (q *Queue) ReportBatch(ctx context.Context, bid string) (changed bool, err error) {
	err = q.withBatch(ctx, bid, func(b *Batch) error {
		switch b.State() {
		case UpdateReporting:
			return nil
		case Failed:
			changed = true
			return q.SetBatchStatus(ctx, b, UpdateReporting, BatchChange{Release: true, Message: Note(b.Status.Message)})
		case Completed:
			return Advised(refused("batch %s is Completed: its report is in its status-report", bid),
				"`ingestq show "+bid+"` shows it", "GET /api/v1/batches/"+bid+" shows it", "")
		}
		again := " asks again for a batch that ended Failed (after its failed jobs were requeued)"
		return Advised(refused("batch %s is %s: it reports by itself when its last job is done", bid, b.State()),
			"`ingestq report "+bid+"`"+again, "POST /api/v1/batches/"+bid+"/report"+again, "")
	})
	return changed, err
}

// DeleteBatch removes a batch with all its jobs: its uuid index, its nodes,
// every job and every ref. Only a batch that is done (Completed, Failed,
// Deleted) or Held, and that has no job still in the pipeline, can go.
func (q *Queue) DeleteBatch(ctx context.Context, bid string) error {
	return q.withBatch(ctx, bid, func(b *Batch) error { return q.removeBatch(ctx, b) })
}

func (q *Queue) removeBatch(ctx context.Context, b *Batch) error {
	switch b.State() {
	case Completed, Failed, Deleted, Held:
	default:
		return refused("batch %s is %s; only Completed, Failed, Deleted or Held batches can be deleted", b.ID, b.State())
	}
	buckets, err := q.BatchJobs(ctx, b.ID)
	if err != nil {
		return err
	}
	var jobs []*Job
	for _, bucket := range Buckets {
		for _, jid := range buckets[bucket] {
			j, err := q.lockJob(ctx, jid)
			if errors.Is(err, ErrNotFound) {
				continue // a ref without a job: removed with the batch below
			}
			if err != nil {
				q.unlockAll(ctx, jobs)
				return fmt.Errorf("batch %s: %w", b.ID, err)
			}
			jobs = append(jobs, j)
			if !slices.Contains([]State{Completed, Failed, Deleted, Held, Pending}, j.State()) {
				q.unlockAll(ctx, jobs)
				return refused("batch %s: job %s is %s, still in the pipeline", b.ID, jid, j.State())
			}
		}
	}
	// One multi() per job keeps each request small; the batch's own ref to a
	// job goes with the job, so a crash midway leaves a consistent batch.
	for _, j := range jobs {
		if err := q.removeJob(ctx, j, false); err != nil { // the batch goes too
			q.unlockAll(ctx, jobs)
			return fmt.Errorf("batch %s: remove job %s: %w", b.ID, j.ID, err)
		}
	}
	return q.removeTree(ctx, q.batchPath(b.ID), fenceCheck(q.batchPath(b.ID, "status"), b.version),
		delIfThere(q.Path("/batch-uuids/"+b.UUID())))
}

func (q *Queue) unlockAll(ctx context.Context, jobs []*Job) {
	for _, j := range jobs {
		q.unlockAdminJob(ctx, j)
	}
}

// removeTree deletes root and everything under it in one multi(), with extra
// ops (fences first).
func (q *Queue) removeTree(ctx context.Context, root string, extra ...op) error {
	var dels []op
	var walk func(p string) error
	walk = func(p string) error {
		kids, err := q.children(ctx, p)
		if err != nil {
			return err
		}
		for _, k := range kids {
			if err := walk(p + "/" + k); err != nil {
				return err
			}
		}
		dels = append(dels, del(p))
		return nil
	}
	if err := walk(root); err != nil {
		return err
	}
	return q.commit(ctx, append(extra, dels...))
}

// Cleanup deletes every Completed batch with its jobs, the empty job and
// batch nodes that creations cut short by a crash left behind, the batch
// uuids whose batch is gone (GoneUUID), and the refs foreign writers left
// beside a job's own (LeftRef). It returns the
// ids of the batches it removed; a batch it could not remove is reported in
// problems and does not stop the sweep.
func (q *Queue) Cleanup(ctx context.Context) (removed []string, problems []error, err error) {
	r, err := q.CleanupWith(ctx, CleanupOptions{})
	return r.Removed, r.Problems, err
}

// CleanupOptions narrow what CleanupWith removes.
type CleanupOptions struct {
	// CompletedBefore, when not zero, keeps the Completed batches that
	// completed (their last_modified) at or after it, and those whose
	// time cannot be read.
	CompletedBefore time.Time
	// DryRun removes nothing: the result says what would be removed.
	DryRun bool
}

// CleanupResult is what CleanupWith removed (or, in a dry run, would).
type CleanupResult struct {
	Removed []string // the Completed batches
	Kept    []string // Completed batches kept by CompletedBefore
	Husks   []string // empty bid/jid nodes, relative to the root
	// UUIDs are the /batch-uuids nodes whose batch is gone, older than
	// huskAge (check's warning): their batchIDs can be used again.
	UUIDs []GoneUUID
	// LeftRefs are the refs foreign writers left (decision 352) that
	// were removed; LeftYoung counts those kept, younger than huskAge or
	// of a locked job.
	LeftRefs  []LeftRef
	LeftYoung int
	Problems  []error // batches not removed, nodes not read; none stops the sweep
}

// CleanupWith is Cleanup, narrowed by o.
func (q *Queue) CleanupWith(ctx context.Context, o CleanupOptions) (CleanupResult, error) {
	var r CleanupResult
	batches, probs, err := q.ListBatches(ctx)
	if err != nil {
		return r, err
	}
	r.Problems = probs
	for _, b := range batches {
		if b.State() != Completed || b.Locked {
			continue
		}
		if !o.CompletedBefore.IsZero() {
			at, err := time.Parse(TimeLayout, b.Status.LastModified)
			if err != nil || !at.Before(o.CompletedBefore) {
				r.Kept = append(r.Kept, b.ID)
				continue
			}
		}
		if o.DryRun {
			r.Removed = append(r.Removed, b.ID)
			continue
		}
		if err := q.DeleteBatch(ctx, b.ID); err != nil {
			if !errors.Is(err, ErrNotFound) {
				r.Problems = append(r.Problems, err)
			}
			continue
		}
		r.Removed = append(r.Removed, b.ID)
	}
	for _, kind := range []string{"/batches", "/jobs"} {
		husks, err := q.removeHusks(ctx, kind, o.DryRun)
		r.Husks = append(r.Husks, husks...)
		if err != nil {
			r.Problems = append(r.Problems, err)
		}
	}
	// After the husks: a bid husk removed (in a dry run, found) just now
	// makes its uuid gone in this same run.
	uuids, err := q.removeGoneUUIDs(ctx, r.Husks, o.DryRun)
	r.UUIDs = uuids
	if err != nil {
		r.Problems = append(r.Problems, err)
	}
	left, young, err := q.findLeftRefs(ctx)
	if err != nil {
		r.Problems = append(r.Problems, fmt.Errorf("left refs not looked for: %w", err))
	}
	r.LeftYoung = young
	for _, l := range left {
		if !o.DryRun {
			if err := q.RemoveLeftRef(ctx, l); err != nil {
				r.Problems = append(r.Problems, err)
				continue
			}
		}
		r.LeftRefs = append(r.LeftRefs, l)
	}
	return r, nil
}

// huskAge is how old an empty bid/jid node must be before Cleanup removes
// it: a younger one may be a creation still between its two steps. A left
// ref waits as long: a younger one may be a move still between its writes.
const huskAge = 10 * time.Minute

// removeHusks deletes childless, dataless bid/jid nodes older than huskAge:
// the leftovers of a creation cut short between its two steps. It returns
// those it removed (dryRun: found, and left).
func (q *Queue) removeHusks(ctx context.Context, folder string, dryRun bool) ([]string, error) {
	kids, err := q.children(ctx, q.Path(folder))
	if err != nil {
		return nil, err
	}
	prefix := map[string]string{"/batches": "bid", "/jobs": "jid"}[folder]
	cutoff := q.huskCutoff()
	var husks []string
	for _, k := range kids {
		if !validName(k, prefix) {
			continue
		}
		p := q.Path(folder + "/" + k)
		ok, st, err := q.zk.exists(ctx, p)
		if err != nil || !ok || st.NumChildren > 0 || st.DataLength > 0 || st.Ctime > cutoff {
			continue
		}
		if !dryRun {
			err := q.zk.delete(ctx, p, st.Version)
			if errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrNotEmpty) {
				continue
			}
			if err != nil {
				return husks, fmt.Errorf("remove empty %s: %w", q.rel(p), err)
			}
		}
		husks = append(husks, q.rel(p))
	}
	return husks, nil
}

// removeGoneUUIDs deletes the /batch-uuids nodes whose batch is gone
// (findGoneUUIDs), each at the version read: one rewritten since is left.
// husks are the nodes removeHusks returned: in a dry run their bids are
// still there, and count as gone. It returns those it removed (dryRun:
// found, and left).
func (q *Queue) removeGoneUUIDs(ctx context.Context, husks []string, dryRun bool) ([]GoneUUID, error) {
	huskBids := map[string]bool{}
	for _, h := range husks {
		if bid, ok := strings.CutPrefix(h, "/batches/"); ok {
			huskBids[bid] = true
		}
	}
	gone, err := q.findGoneUUIDs(ctx, huskBids)
	if err != nil {
		return nil, fmt.Errorf("batch uuids not looked for: %w", err)
	}
	var removed []GoneUUID
	for _, g := range gone {
		if !dryRun {
			err := q.zk.delete(ctx, q.Path(g.Path), g.version)
			if errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrBadVersion) {
				continue
			}
			if err != nil {
				return removed, fmt.Errorf("remove %s: %w", g.Path, err)
			}
		}
		removed = append(removed, g)
	}
	return removed, nil
}

// Cancellable tells whether cancelling a batch stops a job in state s: it
// has not reached Storing, so nothing of it is stored yet.
func Cancellable(s State) bool {
	switch s {
	case Pending, Held, Estimating, Provisioning, Downloading, Processing:
		return true
	}
	return false
}

// CancelJob fails a job that has not reached Storing, with message, even
// while a daemon works on it (as FailJob with force: the daemon's view goes
// stale and it abandons its step). A Held job has no edge to Failed: it goes
// through Pending in the same multi(), so no reader ever sees it Pending
// (where a daemon could take it). A job in Storing or later, or one that is
// done, is left alone: cancelled is false and state says where it is. A job
// that moves on while it is being cancelled is read again.
func (q *Queue) CancelJob(ctx context.Context, jid, message string) (state State, cancelled bool, err error) {
	for range 5 {
		j, lerr := q.lockJob(ctx, jid)
		if errors.Is(lerr, ErrLocked) {
			j, lerr = q.LoadJob(ctx, jid) // written through, fenced by its version
		}
		if lerr != nil {
			return "", false, lerr
		}
		state, err = j.State(), nil
		if !Cancellable(state) {
			q.unlockAdminJob(ctx, j)
			return state, false, nil
		}
		c := JobChange{Message: message, Release: j.owner}
		if state == Held {
			c.via = Pending
		}
		err = q.SetJobStatus(ctx, j, Failed, c)
		q.unlockAdminJob(ctx, j)
		if !errors.Is(err, ErrStale) {
			return state, err == nil, err
		}
	}
	return state, false, err
}

// CancelPendingBatch ends a batch whose jobs are not made yet: a Pending
// batch goes through Held (the machine has no edge from Pending to an
// end) to Deleted in one multi(), a Held one to Deleted, with message. changed is false
// for a batch that was Deleted already; any other state is refused.
func (q *Queue) CancelPendingBatch(ctx context.Context, bid, message string) (changed bool, err error) {
	err = q.withBatch(ctx, bid, func(b *Batch) error {
		switch b.State() {
		case Deleted:
			return nil
		case Pending, Held:
			changed = true
			c := BatchChange{Message: message, Release: true}
			if b.State() == Pending {
				c.via = Held
			}
			return q.SetBatchStatus(ctx, b, Deleted, c)
		}
		return refused("batch %s is %s: its jobs are made; cancel stops them one by one", bid, b.State())
	})
	return changed, err
}
