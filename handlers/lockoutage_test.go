package handlers

import (
	"log/slog"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/internal/queuetest"
	"github.com/ingestq/ingestq/zkwatch"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// An object's lock whose unlock found ZooKeeper away (its server restarted
// within the session timeout) outlives the step with the session; this
// daemon's next step on the object releases it and takes it again. Every
// retry found it "locked by another job", and the job failed after its
// attempts, its lock held by no step at all.
func TestLockLeftByAnOutageIsTakenAgain(t *testing.T) {
	ctx := t.Context()
	log := slog.New(slog.NewTextHandler(logtest.NewT(t), nil))
	proxy, err := zktest.StartProxy(zktest.Shared(t).Addr)
	if err != nil {
		t.Fatal(err)
	}
	addr := proxy.Addr()
	defer func() { _ = proxy.Close() }()
	s, err := zkwatch.Dial(ctx, zkwatch.Config{Servers: []string{addr}, SessionTimeout: zktest.SessionTimeout, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	q := queuetest.Queue(t, s, zktest.Root(t), log)
	p := &Pipeline{q: q, log: log}
	const ark = "ark:/99999/fk4lockleft"

	err = p.underLock(ctx, "storage", ark, "jid0000000001", func() error {
		return proxy.Close() // ZooKeeper goes while the step holds the lock: its unlock fails
	})
	if err != nil {
		t.Fatal(err)
	}
	if proxy, err = zktest.StartProxyOn(addr, zktest.Shared(t).Addr); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitState(ctx, zk.StateHasSession); err != nil {
		t.Fatal(err)
	}
	if held, err := q.HoldsStorage(ctx, ark); err != nil || !held || s.Expirations() != 0 {
		t.Fatalf("after the outage: lock held %v (%v), session expirations %d; want the lock left with the live session", held, err, s.Expirations())
	}
	ran := false
	if err := p.underLock(ctx, "storage", ark, "jid0000000001", func() error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("the next step on the object: ran %v, %v; want it run under the lock", ran, err)
	}
	if held, err := q.HoldsStorage(ctx, ark); err != nil || held {
		t.Fatalf("after the next step: lock held %v (%v), want released", held, err)
	}
}
