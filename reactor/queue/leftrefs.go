package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-zookeeper/zk"
)

// LeftRef is a job's ref that its status does not name, beside the one it
// does, or a ref of a job that is gone: what mrt-zk's default Job.load
// writes back when it races a move (it writes the refs of the state it
// read), and what an unlocked foreign setStatus racing a move can leave.
type LeftRef struct {
	Path string `json:"path"` // relative to the queue root
	Why  string `json:"why"`  // "job jidN is Completed; its ref is in completed/"

	jid     string
	version int32  // the job's status version as read; -1: the job is gone
	named   string // the ref the status names (absolute), fenced on
}

// findLeftRefs finds the left refs of every state folder and batch bucket.
// A ref counts only once it and its job's status are older than huskAge
// (a live mrt-zk move writes the status, then creates the new ref and
// deletes the old one) and its job is not locked (a move may be under
// way); the others it finds are counted in young.
func (q *Queue) findLeftRefs(ctx context.Context) (left []LeftRef, young int, err error) {
	refs, _, err := q.listRefs(ctx) // jid → its refs; check reports what is no ref
	if err != nil {
		return nil, 0, err
	}
	// Only a job listed twice in one kind of folder, or one not in /jobs,
	// can have a left ref: only those are read, as check reads suspects.
	all, err := q.JobIDs(ctx) // sorted
	if err != nil {
		return nil, 0, err
	}
	var jids, paths []string
	for jid, rs := range refs {
		buckets := 0
		for _, r := range rs {
			if r.bid != "" {
				buckets++
			}
		}
		if _, there := slices.BinarySearch(all, jid); !there || len(rs)-buckets > 1 || buckets > 1 {
			jids, paths = append(jids, jid), append(paths, q.jobPath(jid, "status"), q.jobPath(jid, "lock"))
		}
	}
	reads := q.getAll(ctx, paths...)
	cutoff := q.huskCutoff()
	var found []LeftRef
	for i, jid := range jids {
		status, lock := reads[2*i], reads[2*i+1]
		if errors.Is(status.err, zk.ErrNoNode) {
			for _, r := range refs[jid] {
				found = append(found, LeftRef{Path: r.path, Why: "job " + jid + " no longer exists", jid: jid, version: -1})
			}
			continue
		}
		if status.err != nil {
			continue // unreadable: check reports it
		}
		st, err := decodeJobStatus(q.rel(paths[2*i]), status.data)
		if err != nil {
			continue
		}
		// Each kind of ref (state folder, bucket) is left only beside the
		// one the status names: a job whose only ref is an old one (a
		// mover that died between its writes) keeps it.
		for _, named := range []struct {
			folder string
			bucket bool
		}{{st.Status.Folder(), false}, {Bucket(st.Status), true}} {
			at := slices.IndexFunc(refs[jid], func(r listedRef) bool { return r.folder == named.folder })
			if at < 0 {
				continue
			}
			for _, r := range refs[jid] {
				if r.folder == named.folder || (r.bid != "") != named.bucket {
					continue
				}
				if !errors.Is(lock.err, zk.ErrNoNode) || status.stat.Mtime > cutoff {
					young++
					continue
				}
				found = append(found, LeftRef{Path: r.path, Why: fmt.Sprintf("job %s is %s; its ref is in %s/", jid, st.Status, named.folder),
					jid: jid, version: status.stat.Version, named: refs[jid][at].path})
			}
		}
	}
	// The refs' own age: a ref written back just now waits its turn too.
	paths = paths[:0]
	for _, l := range found {
		paths = append(paths, l.Path)
	}
	for i, r := range q.getAll(ctx, paths...) {
		switch {
		case r.err != nil: // gone meanwhile
		case r.stat.Ctime > cutoff:
			young++
		default:
			l := found[i]
			l.Path = q.rel(l.Path)
			left = append(left, l)
		}
	}
	slices.SortFunc(left, func(a, b LeftRef) int { return strings.Compare(a.Path, b.Path) })
	return left, young, nil
}

// RemoveLeftRef deletes a left ref in one multi() fenced on what made it
// left: the job's status still at the version read, the ref its status
// names still there, and no lock on the job (each of ingestq's moves holds
// one, and a move into the folder of a left ref takes that ref as its own).
// A job that moved or was taken meanwhile makes it fail harmlessly, with
// nothing written; a ref of a job that is gone is deleted alone (jids are
// never used again, and every writer makes a job's refs after its status).
func (q *Queue) RemoveLeftRef(ctx context.Context, l LeftRef) error {
	var ops []op
	if l.version >= 0 {
		lock := q.jobPath(l.jid, "lock")
		free := create(lock, nil) // made and deleted at once: fails while it is held
		free.recover = func(_ context.Context, err error) ([]op, error) {
			if errors.Is(err, zk.ErrNodeExists) {
				return nil, ErrLocked
			}
			return nil, err
		}
		ops = append(ops, fenceCheck(q.jobPath(l.jid, "status"), l.version), fenceCheck(l.named, -1), free, del(lock))
	}
	err := q.commit(ctx, append(ops, delIfThere(q.Path(l.Path))))
	switch {
	case errors.Is(err, ErrStale):
		err = fmt.Errorf("job %s moved since it was read: %w", l.jid, err)
	case errors.Is(err, ErrLocked):
		err = busy("job %s is locked (a step or a move is under way)", l.jid)
	}
	if err != nil {
		return fmt.Errorf("left ref %s not removed (cleanup tries it again next time): %w", l.Path, err)
	}
	return nil
}
