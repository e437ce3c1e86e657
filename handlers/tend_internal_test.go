package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/internal/queuetest"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// The working folders a host tends cost it no goroutine each: a host
// estimating a batch of 100,000 object manifests keeps a folder of every
// job it estimated until the job ends, and a goroutine a folder measured
// 6.9 kB (4.1 kB of stack), 690 MB in all. Before, n folders held n
// goroutines. A job removed still has its folder removed.
func TestTendedFoldersHoldNoGoroutineEach(t *testing.T) {
	const n = 200
	logs := &logtest.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	q := queuetest.Queue(t, queuetest.Session(t, log), zktest.Root(t), log)
	status, err := json.Marshal(queue.JobStatus{Status: queue.Downloading})
	if err != nil {
		t.Fatal(err)
	}
	conn := zktest.Connect(t)
	jid := func(i int) string { return fmt.Sprintf("jid%010d", i) }
	var ops []any
	for i := range n {
		ops = append(ops, &zk.CreateRequest{Path: q.Path("/jobs/" + jid(i)), Acl: zk.WorldACL(zk.PermAll)},
			&zk.CreateRequest{Path: q.Path("/jobs/" + jid(i) + "/status"), Data: status, Acl: zk.WorldACL(zk.PermAll)})
	}
	if _, err := conn.Multi(ops...); err != nil {
		t.Fatal(err)
	}
	closing, stop := context.WithCancel(context.Background())
	p := &Pipeline{q: q, log: log, closing: closing, stop: stop}
	defer func() { p.stop(); p.tenders.Wait() }()
	work := t.TempDir()
	before := runtime.NumGoroutine()
	for i := range n {
		dir := filepath.Join(work, jid(i))
		if err := os.Mkdir(dir, 0o750); err != nil {
			t.Fatal(err)
		}
		p.tend(jid(i), dir)
	}
	// The last job removed by another program: its folder goes.
	gone := jid(n - 1)
	if _, err := conn.Multi(&zk.DeleteRequest{Path: q.Path("/jobs/" + gone + "/status"), Version: -1},
		&zk.DeleteRequest{Path: q.Path("/jobs/" + gone), Version: -1}); err != nil {
		t.Fatal(err)
	}
	logs.WaitFor(t, "working folder removed", "job="+gone)
	if _, err := os.Stat(filepath.Join(work, gone)); !os.IsNotExist(err) {
		t.Errorf("job %s removed: its folder is still here (%v)", gone, err)
	}
	if _, err := os.Stat(filepath.Join(work, jid(0))); err != nil {
		t.Errorf("job %s in Downloading: its folder went (%v)", jid(0), err)
	}
	if grew := runtime.NumGoroutine() - before; grew >= n/2 {
		t.Errorf("%d folders tended: %d goroutines more; want a few, not one a folder", n, grew)
	}
}
