//go:build linux

package main_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/ingestq/ingestq/events"
)

// SIGTERM while ZooKeeper is unreachable and a commit is in flight: the
// daemon stops within its grace period plus a few seconds (it gives up the
// write once the grace is over, instead of waiting for ZooKeeper), and
// nothing is lost: once ZooKeeper is back, another daemon takes the jobs
// in the states their commits did or did not reach, and the batch
// completes with every job once.
func TestSIGTERMWhileZooKeeperDown(t *testing.T) {
	t.Parallel()
	const n, grace = 20, 2 * time.Second
	srv, proxy := proxiedServer(t)
	ns := startNATS(t, -1, t.TempDir())
	url := ns.ClientURL()
	const root = "/ingestq"
	q := openQueue(t, srv.Addr, root) // straight to the server
	rec := record(t, url)
	a := startDaemon(t, daemonConfig{Host: "a", ZK: proxy.Addr(), Root: root, NATS: url, Grace: grace,
		Delay: 500 * time.Millisecond, Extra: []string{"--zk-session-timeout", "4s"}})
	bid := createBatch(t, q, n)
	rec.waitFor(60*time.Second, "3 job.completed events", func(evs []events.Event) bool { return countCompleted(evs, bid) >= 3 })

	proxy.Pause()
	// The client notices the loss after its receive timeout; the 500 ms
	// steps under way then end, and their commits wait on ZooKeeper.
	a.waitLog(30*time.Second, "zookeeper: connection lost")
	termAt := time.Now()
	a.signal(syscall.SIGTERM)
	if !a.wait(grace + 15*time.Second) {
		t.Fatalf("a still running %v after SIGTERM with ZooKeeper away (grace %v)", grace+15*time.Second, grace)
	}
	t.Logf("a exited %v after SIGTERM (%s) with ZooKeeper away", a.exitedAt.Sub(termAt).Round(time.Millisecond), a.state)
	if l := a.logLines("grace period over"); len(l) == 0 {
		t.Errorf("a did not say its grace period was over")
	}
	proxy.Resume()

	b := startDaemon(t, daemonConfig{Host: "b", ZK: srv.Addr, Root: root, NATS: url, Delay: 5 * time.Millisecond})
	waitReport(t, rec, q, bid, 90*time.Second)
	assertBatchCompleted(t, q, bid, n)
	b.stop(15 * time.Second)
}
