package queue_test

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"golang.org/x/sync/errgroup"

	"github.com/ingestq/ingestq/reactor/queue"
)

// cutShortCreation leaves what mrt-zk's createBatch cut short after the
// uuid leaves: an empty bid node, and uuid naming it. It returns the bid.
func (r *run) cutShortCreation(uuid string) string {
	r.t.Helper()
	bid := r.husk("/batches/", "bid")
	r.raw("/batch-uuids/"+uuid, bid)
	return bid
}

// mrt-zk's createBatch cut short after the uuid leaves an empty bid node
// and the uuid naming it. Cleanup removes the husk and then, in the same
// run, the uuid (older than 10 minutes), and a dry run lists both. It
// leaves a uuid whose batch is there, one naming no bid, and every uuid
// while it is young; check is silent after, and the batchID can be used.
func TestCleanupRemovesTheUUIDOfAHusk(t *testing.T) {
	r := newRun(t)
	ctx := t.Context()
	bid := r.cutShortCreation("uuid-left")
	r.raw("/batch-uuids/uuid-never", "bid9999999999") // a batch removed without its uuid
	r.raw("/batch-uuids/uuid-odd", "not a bid")
	live, err := r.q.CreateBatch(ctx, queue.SubmissionOf(map[string]any{"batchID": "uuid-live", "profile_name": "demo"}))
	r.ok(err)
	kept := []string{"/batch-uuids/uuid-odd", "/batch-uuids/uuid-live"}
	all := append([]string{"/batch-uuids/uuid-left", "/batch-uuids/uuid-never"}, kept...)
	allThere := func(when string) {
		t.Helper()
		for _, n := range append(slices.Clone(all), "/batches/"+bid, "/batches/"+live.ID) {
			if !r.there(n) {
				t.Fatalf("%s: %s is gone", when, n)
			}
		}
	}

	// The husk is one of the problems (a batch not read); no uuid is.
	uuidProblems := func(res queue.CleanupResult) (out []error) {
		for _, p := range res.Problems {
			if strings.Contains(p.Error(), "uuid") {
				out = append(out, p)
			}
		}
		return out
	}
	res, err := r.q.CleanupWith(ctx, queue.CleanupOptions{})
	r.ok(err)
	if len(res.UUIDs) != 0 || len(res.Husks) != 0 || uuidProblems(res) != nil {
		t.Errorf("cleanup of nodes made just now: uuids %v, husks %v, problems %v; want none", res.UUIDs, res.Husks, res.Problems)
	}
	allThere("cleanup of young nodes")

	later := r.later()
	want := []queue.GoneUUID{{Path: "/batch-uuids/uuid-left", UUID: "uuid-left", BID: bid},
		{Path: "/batch-uuids/uuid-never", UUID: "uuid-never", BID: "bid9999999999"}}
	res, err = later.CleanupWith(ctx, queue.CleanupOptions{DryRun: true})
	r.ok(err)
	if !slices.Equal(res.Husks, []string{"/batches/" + bid}) || !slices.Equal(res.UUIDs, want) || uuidProblems(res) != nil {
		t.Errorf("dry run: husks %v, uuids %+v, problems %v; want %s and its uuid, and uuid-never", res.Husks, res.UUIDs, res.Problems, bid)
	}
	allThere("dry run")

	res, err = later.CleanupWith(ctx, queue.CleanupOptions{})
	r.ok(err)
	if !slices.Equal(res.Husks, []string{"/batches/" + bid}) || !slices.Equal(res.UUIDs, want) || uuidProblems(res) != nil {
		t.Errorf("cleanup: husks %v, uuids %+v, problems %v; want %s and its uuid, and uuid-never", res.Husks, res.UUIDs, res.Problems, bid)
	}
	for _, n := range []string{"/batches/" + bid, "/batch-uuids/uuid-left", "/batch-uuids/uuid-never"} {
		if r.there(n) {
			t.Errorf("cleanup left %s", n)
		}
	}
	for _, n := range kept {
		if !r.there(n) {
			t.Errorf("cleanup removed %s", n)
		}
	}
	if _, w, err := later.CheckAll(ctx, queue.CheckOptions{}); err != nil || len(w) != 0 {
		t.Errorf("check after cleanup: warnings %v, %v; want none", w, err)
	}
	if _, err := r.q.CreateBatch(ctx, queue.SubmissionOf(map[string]any{"batchID": "uuid-left", "profile_name": "demo"})); err != nil {
		t.Errorf("batchID uuid-left after cleanup: %v, want it free", err)
	}
}

// A gone batch's uuid that another program rewrites, or removes and makes
// again, after cleanup read it is left. The clock is read after the uuid
// (for its age), so a clock that changes the node changes it between
// cleanup's read and its delete.
func TestCleanupLeavesAUUIDChangedSinceItsRead(t *testing.T) {
	r := newRun(t)
	ctx := t.Context()
	node := r.q.Path("/batch-uuids/uuid-changed")
	r.raw("/batch-uuids/uuid-changed", "bid9999999999")
	for _, c := range []struct {
		name   string
		change func() error
	}{
		{"rewritten", func() error {
			_, err := r.conn.Set(node, []byte("bid9999999999"), -1)
			return err
		}},
		{"made again", func() error {
			if err := r.conn.Delete(node, -1); err != nil {
				return err
			}
			_, err := r.conn.Create(node, []byte("bid9999999999"), 0, zk.WorldACL(zk.PermAll))
			return err
		}},
	} {
		changing, err := queue.New(r.conn, r.root, queue.WithLogger(testLogger(t)), queue.WithClock(func() time.Time {
			if err := c.change(); err != nil && !errors.Is(err, zk.ErrNoNode) {
				t.Errorf("%s: %v", c.name, err)
			}
			return time.Now().Add(11 * time.Minute)
		}))
		r.ok(err)
		res, err := changing.CleanupWith(ctx, queue.CleanupOptions{})
		r.ok(err)
		if len(res.UUIDs) != 0 || len(res.Problems) != 0 || !r.there("/batch-uuids/uuid-changed") {
			t.Errorf("%s: cleanup removed %+v (problems %v), want the uuid left", c.name, res.UUIDs, res.Problems)
		}
	}
	res, err := r.later().CleanupWith(ctx, queue.CleanupOptions{})
	r.ok(err)
	if len(res.UUIDs) != 1 || r.there("/batch-uuids/uuid-changed") {
		t.Errorf("cleanup of the uuid left unchanged: %+v, want it removed", res.UUIDs)
	}
}

// check and cleanup read a queue's batch uuids (one per batch ever made)
// a chunk at a time: read all at once, 50,000 outlasted a 2 s request
// timeout ("no answer from ZooKeeper within 2s"; 100,000 the default
// 5 s), so check failed and cleanup left every uuid. The one uuid whose
// batch is gone is still named, and removed.
func TestGoneUUIDsFoundAmongMany(t *testing.T) {
	if testing.Short() {
		t.Skip("50,000 nodes")
	}
	r := newRun(t)
	b := r.batch()
	const n = 50_000
	uuidPath := func(i int) string { return r.q.Path(fmt.Sprintf("/batch-uuids/many-%06d", i)) }
	// Each multi stays under ZooKeeper's 1 MB request.
	inMultis := func(op func(i int) any) {
		var g errgroup.Group
		g.SetLimit(4)
		for lo := 0; lo < n; lo += 1000 {
			g.Go(func() error {
				var ops []any
				for i := lo; i < min(lo+1000, n); i++ {
					ops = append(ops, op(i))
				}
				_, err := r.conn.Multi(ops...)
				return err
			})
		}
		r.ok(g.Wait())
	}
	inMultis(func(i int) any {
		return &zk.CreateRequest{Path: uuidPath(i), Data: []byte(b.ID), Acl: zk.WorldACL(zk.PermAll)}
	})
	t.Cleanup(func() { inMultis(func(i int) any { return &zk.DeleteRequest{Path: uuidPath(i), Version: -1} }) })
	r.raw("/batch-uuids/uuid-never", "bid9999999999")
	later := r.later(queue.WithRequestTimeout(2*time.Second),
		queue.WithLogger(slog.New(slog.NewTextHandler(tWriter{t}, nil)))) // not each read's path
	start := time.Now()
	v, w, err := later.CheckAll(t.Context(), queue.CheckOptions{})
	r.ok(err)
	t.Logf("check of %d batch uuids: %v", n+2, time.Since(start))
	if len(v) != 0 || len(w) != 1 || !strings.Contains(w[0].String(), "/batch-uuids/uuid-never: names bid9999999999, which is gone") {
		t.Errorf("violations %v, warnings %v; want the one uuid whose batch is gone", v, w)
	}
	res, err := later.CleanupWith(t.Context(), queue.CleanupOptions{})
	r.ok(err)
	if len(res.UUIDs) != 1 || res.UUIDs[0].UUID != "uuid-never" || len(res.Problems) != 0 || r.there("/batch-uuids/uuid-never") {
		t.Errorf("cleanup: uuids %v, problems %v; want uuid-never removed", res.UUIDs, res.Problems)
	}
}
