package queue_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/reactor/queue"
)

// An item node without its status is being created while it is younger
// than a creation can take (ErrCreating: the API answers 503), and a
// creation cut short after (ErrIncomplete only).
func TestItemWithoutStatusIsBeingCreatedWhileYoung(t *testing.T) {
	r := newRun(t)
	ctx := context.Background()
	bid, jid, qid := r.husk("/batches/", "bid"), r.husk("/jobs/", "jid"), r.husk("/access/small/", "qid")
	load := map[string]func(*queue.Queue) error{
		"batch": func(q *queue.Queue) error { _, err := q.LoadBatch(ctx, bid); return err },
		"job":   func(q *queue.Queue) error { _, err := q.LoadJob(ctx, jid); return err },
		"access": func(q *queue.Queue) error {
			_, err := q.LoadAccess(ctx, "small", qid)
			return err
		},
	}
	later := r.later()
	for kind, f := range load {
		if err := f(r.q); !errors.Is(err, queue.ErrCreating) || !errors.Is(err, queue.ErrIncomplete) ||
			!strings.Contains(err.Error(), "being created by another program") {
			t.Errorf("young %s: %v, want it being created", kind, err)
		}
		if err := f(later); errors.Is(err, queue.ErrCreating) || !errors.Is(err, queue.ErrIncomplete) ||
			!strings.Contains(err.Error(), "a creation that did not finish") {
			t.Errorf("%s after huskAge: %v, want a creation cut short", kind, err)
		}
	}
}

// husk makes an item node as a creation cut short (or under way) leaves
// it: named in folder by the sequence after prefix, with nothing under it.
// It returns the item's id.
func (r *run) husk(folder, prefix string) string {
	r.t.Helper()
	p, err := r.conn.Create(r.q.Path(folder+prefix), nil, zk.FlagSequence, zk.WorldACL(zk.PermAll))
	r.ok(err)
	return p[strings.LastIndex(p, "/")+1:]
}
