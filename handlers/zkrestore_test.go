package handlers_test

import (
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// A ZooKeeper restored from a snapshot taken while two jobs waited in
// Processing, before they minted, after both were stored: the jobs are in
// Processing again, without their ARKs, and the minter's counter is back.
// Processed again in the other order, each takes the ARK its object is
// stored under: the first to run passes over the other's, which it gives
// back to that job, and takes its own; the other takes the one given back.
// No ARK is minted anew and no object is stored twice.
func TestZooKeeperRestoredFromAnOlderSnapshotMintsNoNewARK(t *testing.T) {
	t.Parallel()
	srv := zktest.OwnServer(t)

	// Before the restore each job waits at Processing until the test lets
	// one go; after it, the job that minted first waits for the other.
	var restored atomic.Bool
	var mintedFirst string // written before restored
	arrived, started := make(chan string, 2), make(chan string, 2)
	proceed, otherDone := make(chan struct{}), make(chan struct{})
	hold := beforeStep(queue.Processing, func(j *queue.Job) {
		switch {
		case !restored.Load():
			arrived <- j.BatchID
			<-proceed
			started <- j.BatchID
		case j.BatchID == mintedFirst:
			<-otherDone
		}
	})
	r := newRigOn(t, srv.Addr, nil, hold)
	objs := map[string]object{}
	for name, o := range map[string]object{"/x.checkm": {"a.txt": []byte("first object\n")}, "/y.checkm": {"b.txt": []byte("second object\n")}} {
		objs[r.submitObject(name, o).ID] = o
	}
	<-arrived
	<-arrived
	snapshot := filepath.Join(t.TempDir(), "data")
	if err := srv.Reload(zktest.CopyDataTo(snapshot)); err != nil {
		t.Fatal(err)
	}

	arks := map[string]string{}
	var order []string
	for range objs {
		proceed <- struct{}{}
		bid := <-started
		r.waitBatch(bid, queue.Completed)
		arks[bid] = r.checkStored(r.jobsOf(bid)["manifest"], objs[bid])
		order = append(order, bid)
	}

	// The restore, as an operator does it: every daemon stopped, the old
	// data folder put back, ZooKeeper and the daemons started again.
	r.stop()
	if err := srv.Reload(zktest.RestoreDataFrom(snapshot)); err != nil {
		t.Fatal(err)
	}
	r.qs = r.session()
	r.q = r.queue(r.qs)
	for bid := range objs {
		if j := r.jobsOf(bid)["manifest"]; j.State() != queue.Processing || j.Identifiers != nil && j.Identifiers.PrimaryID != "" {
			t.Fatalf("after the restore job %s is %s with identifiers %+v; want Processing without an ARK", j.ID, j.State(), j.Identifiers)
		}
	}
	// The restored snapshot still has the stopped daemon's session, with its
	// host node and locks, until ZooKeeper expires it; a daemon started
	// under the same --host waits for that (serve waits by itself).
	for {
		ok, _, gone, err := r.qs.Conn.ExistsW(r.q.Path("/ingestq/hosts/test"))
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		<-gone
	}
	mintedFirst = order[0]
	restored.Store(true)
	r.start(hold)
	r.waitBatch(order[1], queue.Completed, queue.Failed)
	close(otherDone)
	r.waitBatch(order[0], queue.Completed, queue.Failed)

	for bid, o := range objs {
		if got := r.checkStored(r.jobsOf(bid)["manifest"], o); got != arks[bid] {
			t.Errorf("batch %s's object was stored as %s, and is now %s: a second ARK for the same object", bid, arks[bid], got)
		}
		d, err := r.p.Inventory().Object(t.Context(), arks[bid])
		if err != nil || len(d.Versions) != 1 {
			t.Errorf("inventory of %s: %d versions (%v); want 1", arks[bid], len(d.Versions), err)
		}
	}
	objects, err := filepath.Glob(filepath.Join(r.data, "ocfl", "*", "*", "*", "*", "inventory.json"))
	if err != nil || len(objects) != len(objs) {
		t.Errorf("storage holds %d objects (%v); want %d, each stored once", len(objects), err, len(objs))
	}
}
