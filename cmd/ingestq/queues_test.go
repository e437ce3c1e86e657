//go:build linux

package main_test

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// Two queues (two --zk-root on one ZooKeeper) whose daemons, both named h1,
// join one NATS: the second would record its events in the first's stream
// under the same bids, and hear its wake-up signals. It refuses to start,
// naming the stream, the NATS and what to do; the first queue's stream
// keeps only its own events.
func TestTwoQueuesOneNATS(t *testing.T) {
	t.Parallel()
	ns := startNATS(t, -1, t.TempDir())
	url := ns.ClientURL()
	zkAddr := zktest.Shared(t).Addr
	rootA, rootB := zktest.Root(t), zktest.Root(t)
	qa, qb := openQueue(t, zkAddr, rootA), openQueue(t, zkAddr, rootB)
	a := startDaemon(t, daemonConfig{Host: "h1", ZK: zkAddr, Root: rootA, NATS: url})
	bidA := createBatch(t, qa, 3)
	waitBatchDone(t, qa, bidA, 30*time.Second)
	bidB := createBatch(t, qb, 2) // the same bid, in the other queue
	if bidA != bidB {
		t.Fatalf("batches %s and %s: want one bid in both queues", bidA, bidB)
	}

	b := launchDaemon(t, daemonConfig{Host: "h1", ZK: zkAddr, Root: rootB, NATS: url})
	if !b.wait(30 * time.Second) {
		waitBatchDone(t, qb, bidB, 30*time.Second)
		t.Fatalf("queue B's daemon runs on queue A's stream: `events replay --batch %s` there reads %d events of both queues' batches",
			bidA, len(replay(t, url, bidA)))
	}
	if code := b.state.ExitCode(); code != 1 {
		t.Errorf("queue B's daemon: %s, want exit 1", b.state)
	}
	for _, want := range []string{events.DefaultStream, url, rootA, "account"} {
		if !strings.Contains(b.logText(), want) {
			t.Errorf("queue B's daemon's refusal does not name %q:\n%s", want, tail(b.logText(), 10))
		}
	}
	if got := countCompleted(replay(t, url, bidA), bidA); got != 3 {
		t.Errorf("%d completions of %s in the stream, want queue A's 3", got, bidA)
	}
	// Queue B's CLI pointed at queue A's NATS does not print A's history as B's.
	out, err := exec.Command(ingestqBin, "--zk", zkAddr, "--zk-root", rootB, "--nats", url, "events", "replay", "--batch", bidB).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "another queue") || !strings.Contains(string(out), rootA) {
		t.Errorf("queue B's `events replay --batch %s` on queue A's NATS: %v, want a refusal naming queue A:\n%s", bidB, err, out)
	}
	t.Logf("queue B's events replay on queue A's NATS: %s", out)
	a.stop(15 * time.Second)
}

// A data folder reused for a new queue (decision 370) keeps working: the
// embedded server's stream, the old queue's, is taken over and says so.
func TestDataFolderReusedForAnotherQueue(t *testing.T) {
	t.Parallel()
	zkAddr := zktest.Shared(t).Addr
	rootA, rootB := zktest.Root(t), zktest.Root(t)
	embedded := []string{"--nats-listen", "off"}
	a := startDaemon(t, daemonConfig{Host: "h1", ZK: zkAddr, Root: rootA, Extra: embedded})
	a.stop(15 * time.Second)
	qb := openQueue(t, zkAddr, rootB)
	b := startDaemon(t, daemonConfig{Host: "h1", ZK: zkAddr, Root: rootB, DataDir: a.dataDir, Extra: embedded})
	b.waitLog(10*time.Second, "events: the data folder's stream recorded another queue's events")
	waitBatchDone(t, qb, createBatch(t, qb, 2), 30*time.Second)
	b.stop(15 * time.Second)
}
