package reactor

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// Two pools waiting on one node (the pending and the report pool both wait
// for the status of a batch still being created) are both woken when it
// appears, though the node is watched once. The second used to be dropped,
// and its batch waited for the safety rescan.
func TestWaiterWakesEveryPoolOfANode(t *testing.T) {
	conn, root := zktest.Connect(t), zktest.Root(t)
	q, err := queue.New(conn, root)
	if err == nil {
		err = q.Init(t.Context())
	}
	if err != nil {
		t.Fatal(err)
	}
	w := newWaiter(q, slog.New(slog.DiscardHandler))
	defer w.stop()
	node := q.Path("/batches/bid0000000007")
	woken := make(chan string, 2)
	for _, who := range []string{sigPending, sigReport} {
		w.on(context.Background(), queue.Wait{Path: node}, who, func() { woken <- who })
	}
	if _, err := zktest.Connect(t).Create(node, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for len(got) < 2 {
		select {
		case who := <-woken:
			got[who] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("woken %v after the node appeared, want both pools", got)
		}
	}
}
