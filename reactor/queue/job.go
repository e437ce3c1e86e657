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
)

// JobCreated is when job jid's node was made (ZooKeeper's clock), as
// LoadJob gives it in Job.Created: for a view that was handed on, not read.
func (q *Queue) JobCreated(ctx context.Context, jid string) (time.Time, error) {
	ok, st, err := q.zk.exists(ctx, q.jobPath(jid))
	switch {
	case err != nil:
		return time.Time{}, fmt.Errorf("job %s: %w", jid, err)
	case !ok:
		return time.Time{}, notFound("job", jid)
	}
	return time.UnixMilli(st.Ctime), nil
}

func (q *Queue) jobPath(jid string, child ...string) string {
	return q.Path("/jobs/" + strings.Join(append([]string{jid}, child...), "/"))
}

func (q *Queue) refPath(s State, ref string) string {
	return q.Path("/jobs/states/" + s.Folder() + "/" + ref)
}

// JobSpec is what a new job starts with.
type JobSpec struct {
	Priority    int          `json:"priority"` // 0..99, lower runs first; DefaultPriority is 5
	SpaceNeeded int64        `json:"space_needed,omitempty"`
	Config      JobConfig    `json:"configuration"`
	Identifiers *Identifiers `json:"identifiers,omitempty"`
	Metadata    *Metadata    `json:"metadata,omitempty"`
	// RecordID writes the job's id into its configuration (jobID), as
	// Merritt's ingest service does for the jobs it makes: mrt-zk's
	// Job.jid() and Merritt's consumers read it from there.
	RecordID bool `json:"record_id,omitempty"`
	// Named, if not nil, is called with the job's id once it is allocated,
	// before any folder lists the job: for a caller that must know the job
	// as its own before anyone can find it.
	Named func(jid string) `json:"-"`
}

// CreateJob creates a Pending job in batch b, listed in pending and in the
// batch's batch-processing bucket. The creation is fenced by b's status
// version, as a step is by a job's: once another session has taken the
// batch over (its acquisition moves the version on), a stale view creates
// nothing, so a paused batch handler cannot add jobs behind the new owner.
func (q *Queue) CreateJob(ctx context.Context, b *Batch, spec JobSpec) (*Job, error) {
	bid := b.ID
	if err := checkPriority(spec.Priority); err != nil {
		return nil, fmt.Errorf("create job in %s: %w", bid, err)
	}
	// As for batches: the sequential create comes first, its children in one
	// multi() after; an empty /jobs/jidN left by a crash is skipped by readers.
	p, err := q.zk.create(ctx, q.Path("/jobs/jid"), nil, zk.FlagSequence)
	if err != nil {
		return nil, fmt.Errorf("create job: %w", err)
	}
	jid := path2name(p)
	if spec.Named != nil {
		spec.Named(jid)
	}
	if spec.RecordID {
		spec.Config.JobID = jid
	}
	j := &Job{
		ID: jid, BatchID: bid, Priority: spec.Priority, SpaceNeeded: spec.SpaceNeeded, Config: spec.Config,
		Status:      JobStatus{Status: Pending, LastModified: q.stamp()},
		Identifiers: spec.Identifiers, Metadata: spec.Metadata, ref: refName(spec.Priority, jid),
	}
	status := create(q.jobPath(jid, "status"), mustJSON(j.Status))
	status.witness = true
	ops := []op{
		create(q.jobPath(jid, "bid"), []byte(bid)),
		create(q.jobPath(jid, "priority"), []byte(strconv.Itoa(spec.Priority))),
		create(q.jobPath(jid, "space_needed"), []byte(strconv.FormatInt(spec.SpaceNeeded, 10))),
		create(q.jobPath(jid, "configuration"), mustJSON(spec.Config)),
		status,
	}
	if spec.Identifiers != nil {
		ops = append(ops, create(q.jobPath(jid, "identifiers"), mustJSON(spec.Identifiers)))
	}
	if spec.Metadata != nil {
		ops = append(ops, create(q.jobPath(jid, "metadata"), mustJSON(spec.Metadata)))
	}
	ops = append(ops, create(q.refPath(Pending, j.ref), nil))
	ops = append(ops, q.createIn(ctx, q.batchPath(bid, "states", Bucket(Pending), jid), nil, q.batchPath(bid), "states", Bucket(Pending))...)
	ops = append(ops, fenceCheck(q.batchPath(bid, "status"), b.version))
	if err := q.commit(ctx, ops); err != nil {
		_ = q.zk.delete(ctx, p, -1)
		if errors.Is(err, ErrStale) {
			return nil, fmt.Errorf("create job in batch %s: %w", bid, err)
		}
		return nil, fmt.Errorf("create job %s in batch %s: %w", jid, bid, err)
	}
	return j, nil
}

var jobChildren = []string{"status", "bid", "priority", "space_needed", "configuration",
	"identifiers", "metadata", "store", "inventory", "lock"}

// LoadJob reads a job. Its ref name is taken from its priority.
func (q *Queue) LoadJob(ctx context.Context, jid string) (*Job, error) {
	if !validName(jid, "jid") {
		return nil, fmt.Errorf("%q is not a job id (want jid followed by digits)", jid)
	}
	return q.jobAfter(ctx, jid, map[string]read{"status": q.getAll(ctx, q.jobPath(jid, "status"))[0]})
}

// JobStatusOf reads job jid's status alone, with the version it was read
// at (for WatchJobChange): one read where LoadJob makes ten. A job that is
// gone is ErrNotFound.
func (q *Queue) JobStatusOf(ctx context.Context, jid string) (JobStatus, int32, error) {
	p := q.jobPath(jid, "status")
	data, st, err := q.get(ctx, p)
	if errors.Is(err, zk.ErrNoNode) {
		return JobStatus{}, 0, notFound("job", jid)
	}
	if err != nil {
		return JobStatus{}, 0, err
	}
	status, err := decodeJobStatus(p, data)
	return status, st.Version, err
}

// JobArrival reads, in one round trip, what the last move of the job whose
// ref is ref wrote: its status (with Mtime and the version it was read at,
// for WatchJobChange) and its batch. It is what the event of a move found
// in a folder listing needs: one read of two nodes where LoadJob makes ten.
func (q *Queue) JobArrival(ctx context.Context, ref string) (j *Job, version int32, err error) {
	prio, jid, ok := parseRef(ref)
	if !ok {
		return nil, 0, corrupt(ref, "not a job ref (want PP-jid…)")
	}
	paths := []string{q.jobPath(jid, "status"), q.jobPath(jid, "bid")}
	r := q.getAll(ctx, paths...)
	for _, x := range r {
		if errors.Is(x.err, zk.ErrNoNode) {
			return nil, 0, notFound("job", jid)
		}
		if x.err != nil {
			return nil, 0, x.err
		}
	}
	st, err := decodeJobStatus(q.rel(paths[0]), r[0].data)
	if err != nil {
		return nil, 0, err
	}
	st.Mtime = time.UnixMilli(r[0].stat.Mtime)
	return &Job{ID: jid, BatchID: string(r[1].data), Priority: prio, Status: st, ref: ref}, r[0].stat.Version, nil
}

// jobAfter reads the rest of a job whose status was read already: the
// status first, so that a reader never sees half a creation (decision 206).
// known holds the status and any other of the job's nodes read with it (its
// lock), by name; they are not read again.
func (q *Queue) jobAfter(ctx context.Context, jid string, known map[string]read) (*Job, error) {
	paths, names := []string{q.jobPath(jid)}, []string{""}
	for _, c := range jobChildren {
		if _, ok := known[c]; !ok {
			paths, names = append(paths, q.jobPath(jid, c)), append(names, c)
		}
	}
	r := q.getAll(ctx, paths...)
	if errors.Is(r[0].err, zk.ErrNoNode) {
		return nil, notFound("job", jid)
	}
	got := map[string]read{}
	for c, x := range known {
		r, names = append(r, x), append(names, c)
	}
	for i, c := range names[1:] {
		x := r[i+1]
		if x.err != nil && !errors.Is(x.err, zk.ErrNoNode) {
			return nil, fmt.Errorf("load job %s: %w", jid, x.err)
		}
		if x.err == nil {
			got[c] = x
		}
	}
	rel := func(c string) string { return q.rel(q.jobPath(jid, c)) }
	st, ok := got["status"]
	if !ok {
		return nil, q.missingStatus(rel("status"), r[0].stat)
	}
	j := &Job{ID: jid, version: st.stat.Version, Priority: DefaultPriority}
	if r[0].stat != nil {
		j.Created = time.UnixMilli(r[0].stat.Ctime)
	}
	if l, ok := got["lock"]; ok {
		j.Locked, j.LockSession, j.LockedAt = true, l.stat.EphemeralOwner, time.UnixMilli(l.stat.Ctime)
		if q.zk.owns(l.stat) {
			j.lockMade = l.stat.Czxid // an admin's lock, loaded in its turn (lockToLoad)
		}
	}
	var err error
	if j.Status, err = decodeJobStatus(rel("status"), st.data); err != nil {
		return nil, err
	}
	j.Status.Mtime = time.UnixMilli(st.stat.Mtime)
	bid, ok := got["bid"]
	if !ok || !validName(strings.TrimSpace(string(bid.data)), "bid") {
		return nil, corrupt(rel("bid"), "want the id of the job's batch (bid…), have %q", truncate(string(bid.data), 40))
	}
	j.BatchID = strings.TrimSpace(string(bid.data))
	if x, ok := got["priority"]; ok {
		p, err := decodeInt(rel("priority"), x.data)
		if err != nil {
			return nil, err
		}
		if err := checkPriority(int(p)); err != nil {
			return nil, corrupt(rel("priority"), "%v", err)
		}
		j.Priority = int(p)
	}
	if x, ok := got["space_needed"]; ok {
		if j.SpaceNeeded, err = decodeInt(rel("space_needed"), x.data); err != nil {
			return nil, err
		}
	}
	j.ref = refName(j.Priority, jid)
	optional := []struct {
		name string
		dst  any
	}{{"configuration", &j.Config}, {"identifiers", &j.Identifiers}, {"metadata", &j.Metadata},
		{"store", &j.Store}, {"inventory", &j.Inventory}}
	for _, o := range optional {
		if x, ok := got[o.name]; ok && len(x.data) > 0 {
			if err := decodeJSON(rel(o.name), x.data, o.dst); err != nil {
				return nil, err
			}
		}
	}
	return j, nil
}

// JobIDs lists the ids of every job in creation order.
func (q *Queue) JobIDs(ctx context.Context) ([]string, error) {
	kids, err := q.children(ctx, q.Path("/jobs"))
	if err != nil {
		return nil, err
	}
	kids = slices.DeleteFunc(kids, func(s string) bool { return !validName(s, "jid") })
	slices.Sort(kids)
	return kids, nil
}

// Refs lists the refs in one state folder, in acquisition order (priority,
// then age). Names that are not refs are reported in problems and left out.
func (q *Queue) Refs(ctx context.Context, s State) (refs []string, problems []error, err error) {
	kids, err := q.children(ctx, q.Path("/jobs/states/"+s.Folder()))
	if err != nil {
		return nil, nil, err
	}
	slices.Sort(kids)
	refs, problems = q.ValidRefs(s, kids)
	return refs, problems, nil
}

// ValidRefs keeps the job refs of a listing of state s's folder (as a
// watcher gives it, sorted: acquisition order) and reports the rest.
func (q *Queue) ValidRefs(s State, kids []string) (refs []string, problems []error) {
	refs = make([]string, 0, len(kids))
	for _, k := range kids {
		if _, _, ok := parseRef(k); !ok {
			problems = append(problems, corrupt(q.rel(q.refPath(s, k)), "not a job ref (want PP-jid…)"))
			continue
		}
		refs = append(refs, k)
	}
	return refs, problems
}

// ListJobs reads jobs: those listed in state s, or every job when s is "".
// Jobs that cannot be read are reported in problems and left out.
func (q *Queue) ListJobs(ctx context.Context, s State) (jobs []*Job, problems []error, err error) {
	var ids []string
	refOf := map[string]string{}
	if s == "" {
		if ids, err = q.JobIDs(ctx); err != nil {
			return nil, nil, err
		}
	} else {
		refs, probs, err := q.Refs(ctx, s)
		if err != nil {
			return nil, nil, err
		}
		problems = probs
		for _, r := range refs {
			_, jid, _ := parseRef(r)
			ids = append(ids, jid)
			refOf[jid] = r
		}
	}
	out := make([]*Job, len(ids))
	errs := make([]error, len(ids))
	each(len(ids), 32, func(i int) { out[i], errs[i] = q.LoadJob(ctx, ids[i]) })
	for i, id := range ids {
		switch {
		case errs[i] == nil:
			jobs = append(jobs, out[i])
		case errors.Is(errs[i], ErrNotFound) && s != "":
			problems = append(problems, corrupt(q.rel(q.refPath(s, refOf[id])), "ref without a job"))
		case !errors.Is(errs[i], ErrNotFound):
			problems = append(problems, errs[i])
		}
	}
	return jobs, problems, nil
}

// JobChange is what a job transition writes besides the status.
type JobChange struct {
	Message     string
	Priority    *int   // a new priority: the ref is renamed
	SpaceNeeded *int64 // a new estimate
	Identifiers *Identifiers
	Store       *StepManifest
	Inventory   *StepManifest
	Config      *JobConfig // a new configuration (where the job's files are)
	Deferred    *Deferral  // a wait every daemon honours (JobStatus.Deferred); a move drops it
	Release     bool       // delete the lock in the same multi()
	// At stamps the change (last_modified); zero means now. A caller that
	// tries the same change again passes the same At, so that a try whose
	// reply was lost is recognised by its bytes.
	At time.Time
	// Retried says that an earlier try of this very change (the same At)
	// got no answer, ZooKeeper being away, and may have landed: a fence the
	// change then fails is checked against the change's own bytes, and a
	// match is its success (else the error says MaybeApplied). A try that
	// gave up after its own reply was lost knows this only for itself.
	Retried bool
	requeue bool // count a retry
	// via is a state the move passes through in the same multi(), where the
	// machine has no direct edge: readers only ever see the end state.
	via State
}

// SetJobStatus moves a job to another state in one multi(), fenced by the
// version of the status this view was read at: status (and priority) set,
// the old ref deleted, the new one created, the batch ref moved when the
// bucket changes, and the lock deleted when c.Release is set.
func (q *Queue) SetJobStatus(ctx context.Context, j *Job, to State, c JobChange) error {
	from := j.State()
	lss := j.Status.LastSuccessfulStatus
	if c.via != "" {
		if err := JobMachine.Check(j.ID, from, c.via); err != nil {
			return err
		}
		lss, from = nextLastSuccessful(lss, from, c.via), c.via
	}
	if err := JobMachine.Check(j.ID, from, to); err != nil {
		return err
	}
	st := JobStatus{
		Status: to, LastModified: q.stampAt(c.At), Message: c.Message,
		LastSuccessfulStatus: nextLastSuccessful(lss, from, to),
		RetryCount:           j.Status.RetryCount, Extra: j.Status.Extra,
	}
	if c.requeue {
		st.RetryCount++
	}
	st.Move = arrivalID(j.ID, st)
	st.Holder = q.keptHolder(!c.Release && j.owner, j.Status.Holder) // kept to run the next state's step
	return q.writeJob(ctx, j, st, c)
}

// UpdateJob writes job data (priority, space, identifiers, store, inventory,
// and the status message when c has one) without a change of state, fenced
// like a transition.
func (q *Queue) UpdateJob(ctx context.Context, j *Job, c JobChange) error {
	st := j.Status
	if c.Message != "" {
		st.Message = c.Message
	}
	if c.Deferred != nil {
		st.Deferred = c.Deferred
	}
	return q.writeJob(ctx, j, st, c)
}

func (q *Queue) writeJob(ctx context.Context, j *Job, st JobStatus, c JobChange) error {
	from, to := j.State(), st.Status
	st.Message = KeepNote(truncate(st.Message, maxMessage), j.Status.Message)
	prio := j.Priority
	if c.Priority != nil {
		if err := checkPriority(*c.Priority); err != nil {
			return fmt.Errorf("job %s: %w", j.ID, err)
		}
		prio = *c.Priority
	}
	newRef := refName(prio, j.ID)
	ops := []op{fenceSet(q.jobPath(j.ID, "status"), mustJSON(st), j.version)}
	if prio != j.Priority {
		ops = append(ops, set(q.jobPath(j.ID, "priority"), []byte(strconv.Itoa(prio)), -1))
	}
	if c.SpaceNeeded != nil {
		ops = append(ops, upsert(q.jobPath(j.ID, "space_needed"), []byte(strconv.FormatInt(*c.SpaceNeeded, 10)), true))
	}
	for _, x := range []struct {
		name string
		v    any
		ok   bool
		had  bool
	}{{"identifiers", c.Identifiers, c.Identifiers != nil, j.Identifiers != nil},
		{"store", c.Store, c.Store != nil, j.Store != nil},
		{"inventory", c.Inventory, c.Inventory != nil, j.Inventory != nil}} {
		if x.ok {
			ops = append(ops, upsert(q.jobPath(j.ID, x.name), mustJSON(x.v), x.had))
		}
	}
	if c.Config != nil {
		ops = append(ops, set(q.jobPath(j.ID, "configuration"), mustJSON(c.Config), -1))
	}
	if from != to || newRef != j.ref {
		ops = append(ops, q.delRef(from, j.ref, j.ID), createRef(q.refPath(to, newRef)))
	}
	if Bucket(from) != Bucket(to) {
		ops = append(ops, delIfThere(q.batchPath(j.BatchID, "states", Bucket(from), j.ID)))
		ops = append(ops, q.createIn(ctx, q.batchPath(j.BatchID, "states", Bucket(to), j.ID), nil, q.batchPath(j.BatchID), "states", Bucket(to))...)
	}
	if c.Release && j.owner {
		ops = append(ops, delIfThere(q.jobPath(j.ID, "lock")))
	}
	if _, err := q.commitLanded(ctx, ops, c.Retried); err != nil {
		if errors.Is(err, ErrStale) && j.owner {
			_ = q.releaseOwnLock(ctx, q.jobPath(j.ID, "lock"))
			q.letGoJob(j)
		}
		return err
	}
	j.Status, j.version, j.Priority, j.ref = st, j.version+1, prio, newRef
	if c.SpaceNeeded != nil {
		j.SpaceNeeded = *c.SpaceNeeded
	}
	if c.Identifiers != nil {
		j.Identifiers = c.Identifiers
	}
	if c.Store != nil {
		j.Store = c.Store
	}
	if c.Inventory != nil {
		j.Inventory = c.Inventory
	}
	if c.Config != nil {
		j.Config = *c.Config
	}
	if c.Release {
		q.letGoJob(j)
	}
	if from != to {
		moved := *j
		tellMoved(ctx, Moved{Job: &moved, From: from})
	}
	return nil
}

// delRef deletes a job's ref in state s. A tree written by another library
// may have filed it under another priority; then whatever ref of the job
// the folder holds goes, and none at all is not an error.
func (q *Queue) delRef(s State, ref, jid string) op {
	o := del(q.refPath(s, ref))
	o.recover = func(ctx context.Context, err error) ([]op, error) {
		if !errors.Is(err, zk.ErrNoNode) {
			return nil, err
		}
		kids, err := q.children(ctx, q.Path("/jobs/states/"+s.Folder()))
		if err != nil {
			return nil, err
		}
		var repl []op
		for _, k := range kids {
			if _, id, ok := parseRef(k); ok && id == jid {
				repl = append(repl, delIfThere(q.refPath(s, k)))
			}
		}
		q.log.Warn("queue: job ref was not where its priority says", "job", jid, "state", s, "found", len(repl))
		return repl, nil
	}
	return o
}

// Identifiers reads the identifiers of many jobs at once (nil for a job
// that has none or is gone), for reports that name each job's object.
func (q *Queue) Identifiers(ctx context.Context, jids []string) (map[string]*Identifiers, error) {
	return readEach(ctx, q, jids, "identifiers", func(path string, data []byte, _ *zk.Stat) (id *Identifiers, err error) {
		if len(data) > 0 {
			err = decodeJSON(path, data, &id)
		}
		return id, err
	})
}

// JobStatuses reads the status of many jobs at once; a job that is gone,
// or whose status cannot be read, is left out.
func (q *Queue) JobStatuses(ctx context.Context, jids []string) (map[string]JobStatus, error) {
	m, err := readEach(ctx, q, jids, "status", func(path string, data []byte, stat *zk.Stat) (*JobStatus, error) {
		st, err := decodeJobStatus(path, data)
		st.Mtime = time.UnixMilli(stat.Mtime)
		return &st, err
	})
	return found(m), err
}

// SpaceNeeded reads the space_needed of many jobs at once: 0 for a job
// whose estimate is unknown, missing or unreadable.
func (q *Queue) SpaceNeeded(ctx context.Context, jids []string) (map[string]int64, error) {
	m, err := readEach(ctx, q, jids, "space_needed", func(path string, data []byte, _ *zk.Stat) (*int64, error) {
		n, err := decodeInt(path, data)
		return &n, err
	})
	return found(m), err
}

// found keeps the values readEach found.
func found[T any](m map[string]*T) map[string]T {
	out := make(map[string]T, len(m))
	for jid, v := range m {
		if v != nil {
			out[jid] = *v
		}
	}
	return out
}

// readEach reads one child node of many jobs at once (go-zookeeper
// pipelines the requests, 32 in flight), decoding each. Every jid has an
// entry: nil for a missing node, and for one decode says is corrupt. Any
// other error stops it.
func readEach[T any](ctx context.Context, q *Queue, jids []string, child string, decode func(path string, data []byte, stat *zk.Stat) (*T, error)) (map[string]*T, error) {
	out := make([]*T, len(jids))
	errs := make([]error, len(jids))
	each(len(jids), 32, func(i int) {
		p := q.jobPath(jids[i], child)
		data, stat, err := q.zk.get(ctx, p)
		switch {
		case errors.Is(err, zk.ErrNoNode):
		case err != nil:
			errs[i] = fmt.Errorf("get %s: %w", q.rel(p), err)
		default:
			out[i], errs[i] = decode(q.rel(p), data, stat)
		}
	})
	m := make(map[string]*T, len(jids))
	for i, jid := range jids {
		if errs[i] != nil {
			if !errors.Is(errs[i], ErrCorrupt) {
				return nil, errs[i]
			}
			out[i] = nil
		}
		m[jid] = out[i]
	}
	return m, nil
}
