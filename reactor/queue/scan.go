package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
)

// scanChunk is how many nodes a scan reads at once (getAll runs a goroutine
// per node): a few round trips for a folder of thousands.
const scanChunk = 512

// RefTimes reads when each of state s's refs was made: when its job
// entered s, by ZooKeeper's clock (a ref is renamed, so made again, only
// with a transition or a change of priority). A ref gone since the listing
// is left out.
func (q *Queue) RefTimes(ctx context.Context, s State, refs []string) (map[string]time.Time, error) {
	out := make(map[string]time.Time, len(refs))
	err := q.scan(ctx, len(refs), func(i int) string { return q.refPath(s, refs[i]) }, func(i int, r read) error {
		switch {
		case errors.Is(r.err, zk.ErrNoNode):
			return nil
		case r.err != nil:
			return fmt.Errorf("read %s: %w", q.rel(q.refPath(s, refs[i])), r.err)
		}
		out[refs[i]] = time.UnixMilli(r.stat.Ctime)
		return nil
	})
	return out, err
}

// JobProfiles reads the profile each job belongs to (its configuration's
// profile_name, or Merritt's profile). A job whose configuration is
// missing or unreadable gets "", and a job gone since is left out.
func (q *Queue) JobProfiles(ctx context.Context, jids []string) (map[string]string, error) {
	out := make(map[string]string, len(jids))
	err := q.scan(ctx, len(jids), func(i int) string { return q.jobPath(jids[i], "configuration") }, func(i int, r read) error {
		var c JobConfig
		switch {
		case errors.Is(r.err, zk.ErrNoNode):
			if ok, _, err := q.zk.exists(ctx, q.jobPath(jids[i])); err != nil || ok {
				out[jids[i]] = "" // a job without a configuration
				return err
			}
			return nil
		case r.err != nil:
			return fmt.Errorf("read %s: %w", q.rel(q.jobPath(jids[i], "configuration")), r.err)
		}
		_ = json.Unmarshal(r.data, &c) // unreadable: no profile, as for a missing node
		out[jids[i]] = c.Profile
		return nil
	})
	return out, err
}

// AccessStates reads the state of each of access queue name's requests
// (qids), by its status node alone. A request gone since, whose status is
// not written yet (a creation under way) or does not read, is left out.
func (q *Queue) AccessStates(ctx context.Context, name string, qids []string) (map[string]State, error) {
	out := make(map[string]State, len(qids))
	err := q.scan(ctx, len(qids), func(i int) string { return q.accessPath(name, qids[i], "status") }, func(i int, r read) error {
		switch {
		case errors.Is(r.err, zk.ErrNoNode):
			return nil
		case r.err != nil:
			return fmt.Errorf("read %s: %w", q.rel(q.accessPath(name, qids[i], "status")), r.err)
		}
		if st, err := decodeBatchStatus(AccessMachine, "", r.data); err == nil {
			out[qids[i]] = st.Status
		}
		return nil
	})
	return out, err
}

// scan reads n nodes (path(i)) a chunk at a time and hands each answer to
// take, stopping at its first error.
func (q *Queue) scan(ctx context.Context, n int, path func(int) string, take func(int, read) error) error {
	for start := 0; start < n; start += scanChunk {
		end := min(start+scanChunk, n)
		paths := make([]string, 0, end-start)
		for i := start; i < end; i++ {
			paths = append(paths, path(i))
		}
		for k, r := range q.getAll(ctx, paths...) {
			if err := take(start+k, r); err != nil {
				return err
			}
		}
	}
	return nil
}
