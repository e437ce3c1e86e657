package queue_test

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// A request deleted through the leader is gone for FindAccessNow through a
// follower right after the delete returned, every time: a follower answers
// a read from the commits it has applied, and the delete's may still be on
// its way. The folder's server reads so at each download (decision 1264).
// With FindAccess, the read before, a loopback ensemble found the request
// after its delete in some of the tries (see the decision for the counts).
func TestADeleteThroughTheLeaderIsSeenThroughAFollower(t *testing.T) {
	t.Parallel()
	e, err := zktest.StartEnsemble(t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Stop() })
	var leader, follower string
	for _, addr := range e.Addrs() {
		switch mode, err := zktest.Mode(addr); {
		case err != nil:
			t.Fatal(err)
		case mode == "leader":
			leader = addr
		case follower == "":
			follower = addr
		}
	}
	if leader == "" || follower == "" {
		t.Fatalf("no leader and follower among %v", e.Addrs())
	}
	open := func(addr string) (*zk.Conn, *queue.Queue) {
		conn := zktest.Connect(t, addr)
		q, err := queue.New(conn, "/syncread", queue.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		return conn, q
	}
	conn, w := open(leader) // as `ingestq access delete` or mrt-zk's rm_rf on a host beside the leader
	_, r := open(follower)  // as the folder's server on a host beside a follower
	ctx := t.Context()
	if err := w.Init(ctx); err != nil {
		t.Fatal(err)
	}
	const tries = 300
	stale := 0
	for range tries {
		a, err := w.CreateAccess(ctx, queue.AccessSmall, ourToken("ark:/1/a"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.FindAccessNow(ctx, a.Ref()); err != nil {
			t.Fatalf("read through the follower of %s, just made: %v", a.Ref(), err)
		}
		p := w.Path("/access/small/" + a.ID)
		if _, err := conn.Multi(&zk.DeleteRequest{Path: p + "/status", Version: -1},
			&zk.DeleteRequest{Path: p + "/token", Version: -1}, &zk.DeleteRequest{Path: p, Version: -1}); err != nil {
			t.Fatal(err)
		}
		switch _, err := r.FindAccessNow(ctx, a.Ref()); {
		case err == nil:
			stale++
		case !errors.Is(err, queue.ErrNotFound):
			t.Fatalf("read through the follower of %s, just deleted: %v", a.Ref(), err)
		}
	}
	if stale > 0 {
		t.Errorf("%d of %d reads through a follower found the request its delete through the leader had just removed; want none", stale, tries)
	}
}
