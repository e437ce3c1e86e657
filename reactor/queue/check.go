package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// Violation is one breach of the queue's invariant.
type Violation struct {
	Path    string // relative to the queue root
	Problem string
	// Since is when an old lock was taken (ZooKeeper's clock), for the
	// caller to show in its own time format; zero for other findings.
	Since time.Time
}

func (v Violation) String() string { return v.Path + ": " + v.Problem }

// Check verifies the invariant: every job is listed in exactly one
// /jobs/states folder and one bucket of its batch, both matching its status;
// every ref names an existing job; every node can be read.
//
// ZooKeeper has no snapshot reads, so a listing taken while daemons work is
// torn. Check therefore lists everything once, then re-examines each suspect
// job on its own between two reads of its status: every change to a job's
// refs also changes its status version, so an unchanged version means the
// refs read in between belong together. Only what survives that is reported.
func (q *Queue) Check(ctx context.Context) ([]Violation, error) {
	jids, err := q.JobIDs(ctx)
	if err != nil {
		return nil, err
	}
	jobSet := map[string]bool{}
	for _, j := range jids {
		jobSet[j] = true
	}
	refs, bad, err := q.listRefs(ctx)
	if err != nil {
		return nil, err
	}
	var out []Violation
	for _, p := range bad {
		out = append(out, Violation{Path: q.rel(p), Problem: "not a job ref (want PP-jid…)"})
	}
	seen := map[string][]string{} // jid → "folder/ref" and "bid/bucket" entries
	var dangling []string         // refs (absolute paths) naming no job
	for jid, rs := range refs {
		for _, r := range rs {
			if r.bid == "" {
				seen[jid] = append(seen[jid], "ref:"+r.folder+"/"+path2name(r.path))
			} else {
				seen[jid] = append(seen[jid], "bucket:"+r.bid+"/"+r.folder)
			}
			if !jobSet[jid] {
				dangling = append(dangling, r.path)
			}
		}
	}
	var mu sync.Mutex
	each(len(jids), 32, func(i int) {
		jid := jids[i]
		if len(jobProblems(jid, seen[jid], q.quickStatus(ctx, jid))) == 0 {
			return
		}
		vs := q.verifyJob(ctx, jid)
		mu.Lock()
		out = append(out, vs...)
		mu.Unlock()
	})
	for _, p := range dangling {
		if q.confirmDangling(ctx, p) {
			out = append(out, Violation{Path: q.rel(p), Problem: "ref without a job"})
		}
	}
	slices.SortFunc(out, func(a, b Violation) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// listedRef is one place a job is listed: its ref in a /jobs/states
// folder, or its entry in a bucket of its batch.
type listedRef struct {
	path   string // absolute
	folder string // the state's folder, or the bucket
	bid    string // the batch of a bucket's entry; "" for a state folder's ref
}

// listRefs lists every job's refs by jid: those of each state folder, in
// the order of JobMachine.States, then those of each batch's buckets. A
// state folder's child that is no job ref is given in bad.
func (q *Queue) listRefs(ctx context.Context) (refs map[string][]listedRef, bad []string, err error) {
	refs = map[string][]listedRef{}
	for _, s := range JobMachine.States {
		folder := q.Path("/jobs/states/" + s.Folder())
		kids, err := q.children(ctx, folder)
		if err != nil {
			return nil, nil, err
		}
		for _, k := range kids {
			if _, jid, ok := parseRef(k); ok {
				refs[jid] = append(refs[jid], listedRef{path: folder + "/" + k, folder: s.Folder()})
			} else {
				bad = append(bad, folder+"/"+k)
			}
		}
	}
	bids, err := q.BatchIDs(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, bid := range bids {
		buckets, err := q.BatchJobs(ctx, bid)
		if err != nil {
			return nil, nil, err
		}
		for bucket, jids := range buckets {
			for _, jid := range jids {
				refs[jid] = append(refs[jid], listedRef{path: q.batchPath(bid, "states", bucket, jid), folder: bucket, bid: bid})
			}
		}
	}
	return refs, bad, nil
}

// jobState is what Check needs of a job: its status, priority and batch.
type jobState struct {
	missing  bool // no job node at all (deleted)
	problem  string
	status   State
	priority int
	bid      string
}

func (q *Queue) quickStatus(ctx context.Context, jid string) jobState {
	j, err := q.LoadJob(ctx, jid)
	return toJobState(j, err)
}

func toJobState(j *Job, err error) jobState {
	switch {
	case errors.Is(err, ErrNotFound):
		return jobState{missing: true}
	case err != nil:
		var ce *CorruptError
		if errors.As(err, &ce) {
			return jobState{problem: ce.Error()}
		}
		return jobState{problem: err.Error()}
	}
	return jobState{status: j.State(), priority: j.Priority, bid: j.BatchID}
}

// jobProblems compares where a job is listed with its status.
func jobProblems(jid string, listed []string, js jobState) []string {
	if js.missing {
		return nil // refs without a job are reported as dangling
	}
	if js.problem != "" {
		return []string{js.problem}
	}
	var refs, buckets []string
	for _, e := range listed {
		if r, ok := strings.CutPrefix(e, "ref:"); ok {
			refs = append(refs, r)
		} else {
			buckets = append(buckets, strings.TrimPrefix(e, "bucket:"))
		}
	}
	var out []string
	wantRef := js.status.Folder() + "/" + refName(js.priority, jid)
	switch {
	case len(refs) == 0:
		out = append(out, fmt.Sprintf("status %s but no ref in any /jobs/states folder (want %s)", js.status, wantRef))
	case len(refs) > 1:
		out = append(out, fmt.Sprintf("status %s but listed in %d state folders: %s", js.status, len(refs), strings.Join(refs, ", ")))
	case refs[0] != wantRef:
		out = append(out, fmt.Sprintf("status %s, priority %d, but its ref is %s (want %s)", js.status, js.priority, refs[0], wantRef))
	}
	wantBucket := js.bid + "/" + Bucket(js.status)
	switch {
	case len(buckets) == 0:
		out = append(out, fmt.Sprintf("status %s but in no bucket of its batch (want %s)", js.status, wantBucket))
	case len(buckets) > 1:
		out = append(out, fmt.Sprintf("status %s but in %d batch buckets: %s", js.status, len(buckets), strings.Join(buckets, ", ")))
	case buckets[0] != wantBucket:
		out = append(out, fmt.Sprintf("status %s but in bucket %s (want %s)", js.status, buckets[0], wantBucket))
	}
	return out
}

// verifyJob re-reads one job's refs between two reads of its status, until
// the status version is the same at both ends, and reports what is wrong.
func (q *Queue) verifyJob(ctx context.Context, jid string) []Violation {
	for range 10 {
		_, st1, err := q.zk.get(ctx, q.jobPath(jid, "status"))
		if errors.Is(err, zk.ErrNoNode) {
			return q.checkHusk(ctx, q.jobPath(jid), "job")
		}
		if err != nil {
			return []Violation{{Path: q.rel(q.jobPath(jid)), Problem: err.Error()}}
		}
		j, lerr := q.LoadJob(ctx, jid)
		js := toJobState(j, lerr)
		listed := q.listedAt(ctx, jid, js)
		_, st2, err := q.zk.get(ctx, q.jobPath(jid, "status"))
		if err != nil || st1.Version != st2.Version {
			continue // it moved while we looked: look again
		}
		var out []Violation
		for _, p := range jobProblems(jid, listed, js) {
			out = append(out, Violation{Path: q.rel(q.jobPath(jid)), Problem: p})
		}
		return out
	}
	return nil // busy the whole time: it moves, so it is not stuck
}

// checkHusk reports a job or batch node (kind) at p without a status once
// it is older than a creation can take: a creation cut short between its
// steps.
func (q *Queue) checkHusk(ctx context.Context, p, kind string) []Violation {
	ok, st, err := q.zk.exists(ctx, p)
	if err != nil || !ok || q.young(st.Ctime) {
		return nil
	}
	if st.NumChildren == 0 {
		return []Violation{{Path: q.rel(p), Problem: "empty " + kind + " node (a creation cut short); cleanup removes it"}}
	}
	return []Violation{{Path: q.rel(p + "/status"), Problem: "missing"}}
}

// listedAt finds, by exists() on each place the job could be listed, where
// it is: every state folder under its priority, and every bucket of its batch.
func (q *Queue) listedAt(ctx context.Context, jid string, js jobState) []string {
	if js.missing || js.problem != "" {
		return nil
	}
	type place struct{ path, label string }
	var places []place
	for _, s := range JobMachine.States {
		ref := refName(js.priority, jid)
		places = append(places, place{q.refPath(s, ref), "ref:" + s.Folder() + "/" + ref})
	}
	for _, b := range Buckets {
		places = append(places, place{q.batchPath(js.bid, "states", b, jid), "bucket:" + js.bid + "/" + b})
	}
	found := make([]bool, len(places))
	each(len(places), len(places), func(i int) {
		found[i], _, _ = q.zk.exists(ctx, places[i].path)
	})
	var out []string
	for i, p := range places {
		if found[i] {
			out = append(out, p.label)
		}
	}
	return out
}

// confirmDangling re-reads a ref that named no job: still there, job still
// absent, ref still there. Jobs and their refs are created and deleted in one
// multi(), so this sequence cannot be seen mid-change.
func (q *Queue) confirmDangling(ctx context.Context, ref string) bool {
	jid := path2name(ref)
	if _, j, ok := parseRef(jid); ok {
		jid = j
	}
	ok1, _, err1 := q.zk.exists(ctx, ref)
	okJob, _, err2 := q.zk.exists(ctx, q.jobPath(jid, "status"))
	ok2, _, err3 := q.zk.exists(ctx, ref)
	return err1 == nil && err2 == nil && err3 == nil && ok1 && !okJob && ok2
}
