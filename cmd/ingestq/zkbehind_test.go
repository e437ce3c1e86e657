//go:build linux

package main_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// A daemon left running while ZooKeeper is restored from an older copy of
// its data folder gives its refused session up, opens a new one and goes
// on working: a batch submitted after the restore completes. Before, it
// offered the old session for as long as it ran.
func TestDaemonGoesOnAfterZooKeeperIsRestoredUnderIt(t *testing.T) {
	t.Parallel()
	srv := zktest.OwnServer(t)
	ns := startNATS(t, -1, t.TempDir())
	const root = "/ingestq"
	q := openQueue(t, srv.Addr, root)
	d := startDaemon(t, daemonConfig{Host: "d", ZK: srv.Addr, Root: root, NATS: ns.ClientURL(),
		Extra: []string{"--zk-session-timeout", "2s"}})
	snapshot := filepath.Join(t.TempDir(), "data")
	if err := srv.Reload(zktest.CopyDataTo(snapshot)); err != nil {
		t.Fatal(err)
	}
	// A batch after the copy: the daemon sees zxids the copy lacks.
	bid := createBatch(t, q, 10)
	waitBatchDone(t, q, bid, time.Minute)
	if err := srv.Reload(zktest.RestoreDataFrom(snapshot)); err != nil {
		t.Fatal(err)
	}
	d.waitLog(time.Minute, "refused this client's session")
	q = openQueue(t, srv.Addr, root) // the test's own session was refused too: a new one
	bid = createBatch(t, q, 5)
	waitBatchDone(t, q, bid, time.Minute)
	assertBatchCompleted(t, q, bid, 5)
	// One line for each of the daemon's sessions: its own and the operators'
	// (which finds its refusal when it next talks to the server, maybe after
	// the batch is done: waited for, then counted).
	d.waitLog(time.Minute, "session=operators")
	lines := d.logLines("refused this client's session")
	if ops := len(d.logLines("session=operators")); len(lines) != 2 || ops != 1 {
		t.Errorf("%d lines say a session was refused (%d the operators'), want one for each session: %q", len(lines), ops, lines)
	}
	t.Logf("the daemon's ZooKeeper lines:\n%s", strings.Join(d.logLines("zookeeper"), "\n"))
}
