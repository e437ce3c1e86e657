package handlers_test

import (
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/mint"
	"github.com/ingestq/ingestq/handlers/storage"
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
	restoredTwoJobs(t, nil)
}

// The same with the primary a storage service (ingestq's own, over HTTP):
// it keeps each version's message and answers it, so a job tells its own
// object there too. Before, it kept none, and both jobs got new ARKs.
func TestZooKeeperRestoredOverAStorageServiceMintsNoNewARK(t *testing.T) {
	t.Parallel()
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	_, url := serveFault(t, storage.NewServer(st, nil))
	restoredTwoJobs(t, func() int {
		arks, err := st.Objects()
		if err != nil {
			t.Fatal(err)
		}
		return len(arks)
	}, withStorage(url))
}

// restoredTwoJobs runs the two jobs of the tests above; stored counts the
// objects in the primary (nil: the daemon's own OCFL root).
func restoredTwoJobs(t *testing.T, stored func() int, opts ...rigOption) {
	objs := map[string]object{"x": {"a.txt": []byte("first object\n")}, "y": {"b.txt": []byte("second object\n")}}
	s, bids := newSnapshotRestore(t, objs, opts...)
	arks := map[string]string{}
	order := []string{bids["x"], bids["y"]}
	for _, bid := range order {
		s.let(bid)
	}
	for name, bid := range bids {
		arks[bid] = s.checkStored(s.jobsOf(bid)["manifest"], objs[name])
	}
	s.restore(bids)
	s.let(order[1])
	s.let(order[0])
	s.checkSameARKs(bids, objs, arks)
	if stored == nil {
		stored = s.ocflObjects
	}
	if n := stored(); n != len(objs) {
		t.Errorf("storage holds %d objects; want %d, each stored once", n, len(objs))
	}
}

// A job that failed before storing in the period the restore lost leaves a
// gap: an ARK minted and never used. Three jobs minted one after the other
// (a, g, c); g failed at Storing. After the restore a runs first and takes
// its own ARK again; c then meets g's ARK, unused, and goes on past it to its
// own, which the inventory records; g, stored never, gets a new one. Before,
// c took g's ARK and its object was stored a second time.
func TestZooKeeperRestoredWalksPastAnARKWhoseJobFailedBeforeStoring(t *testing.T) {
	t.Parallel()
	objs := map[string]object{"a": {"a.txt": []byte("first\n")}, "g": {"g.txt": []byte("failed before storing\n")},
		"c": {"c.txt": []byte("third\n")}}
	var s *snapshotRestore
	var gap string // g's batch; set before any job goes on
	// g's storage manifest removed: Storing fails before it writes anything.
	failGap := beforeStep(queue.Storing, func(j *queue.Job) {
		if j.BatchID == gap && !s.restored.Load() {
			if err := os.Remove(filepath.Join(s.data, "work", j.ID, "storage-manifest.checkm")); err != nil {
				t.Error(err)
			}
		}
	})
	s, bids := newSnapshotRestore(t, objs, failGap)
	gap = bids["g"]

	arks := map[string]string{}
	for _, name := range []string{"a", "g", "c"} {
		s.let(bids[name])
	}
	for _, name := range []string{"a", "c"} {
		arks[bids[name]] = s.checkStored(s.jobsOf(bids[name])["manifest"], objs[name])
	}
	g := s.jobsOf(gap)["manifest"]
	if g.State() != queue.Failed || g.Identifiers == nil {
		t.Fatalf("job g is %s (%s) with identifiers %+v; want Failed at Storing with an ARK", g.State(), g.Status.Message, g.Identifiers)
	}
	p := s.prof
	na, _ := mint.Number(arks[bids["a"]], p.NAAN, p.Shoulder)
	ng, _ := mint.Number(g.Identifiers.PrimaryID, p.NAAN, p.Shoulder)
	nc, _ := mint.Number(arks[bids["c"]], p.NAAN, p.Shoulder)
	if ng != na+1 || nc != ng+1 {
		t.Fatalf("minted %d, %d, %d; want three in a row, g's between", na, ng, nc)
	}

	s.restore(bids)
	for _, name := range []string{"a", "c", "g"} {
		s.let(bids[name])
	}
	delete(objs, "g")
	delete(bids, "g")
	s.checkSameARKs(bids, objs, arks)
	if got := s.jobsOf(gap)["manifest"]; got.State() != queue.Completed || got.Identifiers.PrimaryID == arks[bids["a"]] || got.Identifiers.PrimaryID == arks[bids["c"]] {
		t.Errorf("job g is %s as %+v; want Completed under an ARK of its own", got.State(), got.Identifiers)
	}
	if n := s.ocflObjects(); n != 3 {
		t.Errorf("storage holds %d objects; want 3, each stored once", n)
	}
}

// snapshotRestore is a rig on a ZooKeeper of its own whose jobs, one object
// each, wait at Processing until the test lets each go, both before the
// snapshot is put back and after.
type snapshotRestore struct {
	*rig
	srv      *zktest.Server
	opts     []rigOption // the daemon's, again after the restore
	snapshot string
	restored atomic.Bool
	arrived  chan string // the batch of each job at Processing before the restore

	mu    sync.Mutex
	gates map[string]chan struct{} // closed to let a batch's job go on, one before and one after
}

// newSnapshotRestore submits objs, one batch each (returned by name), and
// copies ZooKeeper's data once every job waits at Processing.
func newSnapshotRestore(t *testing.T, objs map[string]object, opts ...rigOption) (*snapshotRestore, map[string]string) {
	s := &snapshotRestore{srv: zktest.OwnServer(t), arrived: make(chan string, len(objs)), gates: map[string]chan struct{}{}}
	s.opts = append([]rigOption{beforeStep(queue.Processing, func(j *queue.Job) {
		if !s.restored.Load() {
			s.arrived <- j.BatchID
		}
		<-s.gate(j.BatchID)
	})}, opts...)
	s.rig = newRigOn(t, s.srv.Addr, nil, s.opts...)
	bids := map[string]string{}
	for name, o := range objs {
		bids[name] = s.submitObject("/"+name+".checkm", o).ID
	}
	for range objs {
		<-s.arrived
	}
	s.snapshot = filepath.Join(t.TempDir(), "data")
	if err := s.srv.Reload(zktest.CopyDataTo(s.snapshot)); err != nil {
		t.Fatal(err)
	}
	return s, bids
}

// gate is what bid's job waits on at Processing now (before the restore,
// or after it).
func (s *snapshotRestore) gate(bid string) chan struct{} {
	key := bid
	if s.restored.Load() {
		key += " restored"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.gates[key]
	if !ok {
		g = make(chan struct{})
		s.gates[key] = g
	}
	return g
}

// let lets bid's job go on from Processing and waits for its batch's end.
func (s *snapshotRestore) let(bid string) {
	close(s.gate(bid))
	s.waitBatch(bid, queue.Completed, queue.Failed)
}

// restore puts the snapshot back as an operator does: every daemon
// stopped, the old data folder put back, ZooKeeper and the daemons started
// again. The jobs of bids are in Processing again, without ARKs.
func (s *snapshotRestore) restore(bids map[string]string) {
	t := s.t
	s.stop()
	if err := s.srv.Reload(zktest.RestoreDataFrom(s.snapshot)); err != nil {
		t.Fatal(err)
	}
	s.qs = s.session()
	s.q = s.queue(s.qs)
	for _, bid := range bids {
		if j := s.jobsOf(bid)["manifest"]; j.State() != queue.Processing || j.Identifiers != nil && j.Identifiers.PrimaryID != "" {
			t.Fatalf("after the restore job %s is %s with identifiers %+v; want Processing without an ARK", j.ID, j.State(), j.Identifiers)
		}
	}
	// The restored snapshot still has the stopped daemon's session, with its
	// host node and locks, until ZooKeeper expires it; a daemon started
	// under the same --host waits for that (serve waits by itself).
	for {
		ok, _, gone, err := s.qs.Conn.ExistsW(s.q.Path("/ingestq/hosts/test"))
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		<-gone
	}
	s.restored.Store(true)
	s.start(s.opts...)
}

// checkSameARKs asserts that each batch's object is stored under the ARK it
// had before the restore (arks, by batch), with one version.
func (s *snapshotRestore) checkSameARKs(bids map[string]string, objs map[string]object, arks map[string]string) {
	for name, bid := range bids {
		if got := s.checkStored(s.jobsOf(bid)["manifest"], objs[name]); got != arks[bid] {
			s.t.Errorf("batch %s's object was stored as %s, and is now %s: a second ARK for the same object", bid, arks[bid], got)
		}
		d, err := s.p.Inventory().Object(s.t.Context(), arks[bid])
		if err != nil || len(d.Versions) != 1 {
			s.t.Errorf("inventory of %s: %d versions (%v); want 1", arks[bid], len(d.Versions), err)
		}
	}
}

// ocflObjects counts the objects in the daemon's own OCFL root.
func (s *snapshotRestore) ocflObjects() int {
	objects, err := filepath.Glob(filepath.Join(s.data, "ocfl", "*", "*", "*", "*", "inventory.json"))
	if err != nil {
		s.t.Fatal(err)
	}
	return len(objects)
}

// An inventory service that lists no objects (GET /objects is 404, as one
// older than the listing's decision 439 answers) still takes deposits: the
// walk past gaps, which asks it what it records after each new ARK, ends at
// the ARK minted, as it did before the walk, at the first try. Each job's
// first Processing failed, "minting: what the inventory records after …:
// … not found: the service lists no objects", and its retry took the ARK
// minted: one try of --attempts and its backoff spent on every deposit.
func TestInventoryServiceThatCannotListTakesDeposits(t *testing.T) {
	t.Parallel()
	inv, err := inventory.OpenLocal(filepath.Join(t.TempDir(), "inv.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inv.Close() })
	current := inventory.NewServer(inv, nil)
	_, url := serveFault(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/objects" {
			http.NotFound(w, req)
			return
		}
		current.ServeHTTP(w, req)
	}))
	r := newRig(t, nil, withInventory(url), withAttempts(1, time.Minute))
	obj := object{"a.txt": []byte("alpha\n")}
	b := r.submitObject("/obj.checkm", obj)
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("batch %s (%s), want Completed", b.State(), b.Status.Message)
	}
	ark := r.checkStored(r.jobsOf(b.ID)["manifest"], obj)
	if _, err := inv.Object(t.Context(), ark); err != nil {
		t.Errorf("the service's inventory: %v; want %s recorded", err, ark)
	}
}
