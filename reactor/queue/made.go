package queue

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/go-zookeeper/zk"
)

// EverMade reports whether id, a batch's (bid…), a job's (jid…) or an
// access request's (small/qid…, large/qid…, or a bare qid… of either
// queue), names one the queue has or once had: its node is there, or its
// number is one its folder's sequence has given out (below the folder's
// cversion, as Check takes a purged job: ids are never used again). A
// removed one is still made: its events are its history. An id of no such
// form is not made.
//
// A number below the cversion may also be one the sequence passed over:
// each removal of a child raises the cversion too. So made means made, or
// passed over; not made is certain.
func (q *Queue) EverMade(ctx context.Context, id string) (bool, error) {
	switch {
	case validName(id, "bid"):
		return q.madeIn(ctx, q.Path("/batches"), q.batchPath(id), id)
	case validName(id, "jid"):
		return q.madeIn(ctx, q.Path("/jobs"), q.jobPath(id), id)
	case validName(id, "qid"):
		for _, name := range AccessQueues {
			if made, err := q.madeIn(ctx, q.Path("/access/"+name), q.accessPath(name, id), id); made || err != nil {
				return made, err
			}
		}
		return false, nil
	}
	name, qid, ok := strings.Cut(id, "/")
	if !ok || !slices.Contains(AccessQueues, name) || !validName(qid, "qid") {
		return false, nil
	}
	return q.madeIn(ctx, q.Path("/access/"+name), q.accessPath(name, qid), qid)
}

// madeIn tells whether id, whose node is node in folder, is there or was
// given out by folder's sequence.
func (q *Queue) madeIn(ctx context.Context, folder, node, id string) (bool, error) {
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

// givenOut tells whether the number of id (bid…, jid… or qid…, a
// validName: digits) is one that its folder's sequence, whose stat is st,
// has given out: below the folder's cversion, and written as ZooKeeper
// writes a sequence number, ten digits (jid7 is no name the sequence
// gives: jid0000000007 is).
func givenOut(id string, st *zk.Stat) bool {
	n, err := strconv.ParseInt(id[3:], 10, 64)
	return len(id[3:]) == 10 && err == nil && n < int64(st.Cversion)
}
