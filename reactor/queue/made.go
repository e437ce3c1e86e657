package queue

import (
	"context"
	"strconv"

	"github.com/go-zookeeper/zk"
)

// EverMade reports whether id, a batch's (bid…) or a job's (jid…), names
// one the queue has or once had: its node is there, or its number is one
// its folder's sequence has given out (below the folder's cversion, as
// Check takes a purged job: ids are never used again). A removed batch or
// job is still made: its events are its history. An id of neither form
// is not made.
func (q *Queue) EverMade(ctx context.Context, id string) (bool, error) {
	var folder, node string
	switch {
	case validName(id, "bid"):
		folder, node = q.Path("/batches"), q.batchPath(id)
	case validName(id, "jid"):
		folder, node = q.Path("/jobs"), q.jobPath(id)
	default:
		return false, nil
	}
	there, _, err := q.zk.exists(ctx, node)
	if err != nil || there {
		return there, err
	}
	ok, st, err := q.zk.exists(ctx, folder)
	if err != nil || !ok {
		return false, err
	}
	return givenOut(id, st), nil
}

// givenOut tells whether the number of id (bid… or jid…) is one that its
// folder's sequence, whose stat is st, has given out: below the folder's
// cversion. A number past int64 was never given.
func givenOut(id string, st *zk.Stat) bool {
	n, err := strconv.ParseInt(id[3:], 10, 64)
	return err == nil && n < int64(st.Cversion)
}
