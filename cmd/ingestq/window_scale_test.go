//go:build linux

package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"golang.org/x/sync/errgroup"

	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// BenchmarkWindowAtScale times the operator's window, the HTTP API, the
// dashboard and /metrics of a real `ingestq serve`, on a queue that holds
// a windowed batch of 100,000 objects (5,000 live jobs, the rest archived,
// as the feed leaves it) and 1,000 batches of one job: every page a few
// times, then each again while the daemon's RSS is read. Beside each, a
// raw ZooKeeper read of the nodes the page shows. The queue is made
// straight through reactor/queue, as another program would (all jobs
// Held: nothing moves), so it takes a minute, not the hour a rehearsal of
// 100,000 objects does. -short: 10,000 objects, 100 batches.
//
//	INGESTQ_TEST_NORACE=1 go test -run '^$' -bench WindowAtScale -benchtime 1x -timeout 1h ./cmd/ingestq/
func BenchmarkWindowAtScale(b *testing.B) {
	objects, live, batches := 100_000, 5000, 1000
	if testing.Short() {
		objects, live, batches = 10_000, 1000, 100
	}
	srv := zktest.OwnServer(b)
	root := zktest.Root(b)
	conn := zktest.Connect(b, srv.Addr)
	q, err := queue.New(conn, root)
	if err != nil {
		b.Fatal(err)
	}
	if err := q.Init(b.Context()); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	big, jids := makeWindowedBatch(b, q, conn, objects, live)
	smalls := makeSmallBatches(b, q, batches)
	b.Logf("queue made in %v: batch %s of %d objects (%d live jobs), %d batches of one job", time.Since(start).Round(time.Second), big, objects, live, batches)

	nats := startNATS(b, -1, b.TempDir()).ClientURL()
	d := startDaemon(b, daemonConfig{Host: "window", ZK: srv.Addr, Root: root, NATS: nats})
	m := regexp.MustCompile(`http=(http://\S+)`).FindStringSubmatch(d.logText())
	if m == nil {
		b.Fatal("the daemon logged no http address")
	}
	base := m[1]
	pid := d.cmd.Process.Pid
	idle, _ := procMiB(pid, "VmRSS")

	small := smalls[len(smalls)/2]
	pages := []string{
		"/api/v1/batches", "/api/v1/batches?state=Processing", "/api/v1/batches?state=Completed", "/api/v1/batches/" + big, "/api/v1/batches/" + small,
		"/api/v1/jobs", "/api/v1/jobs?batch=" + big, "/api/v1/jobs?state=Held", "/api/v1/jobs/" + jids[len(jids)/2],
		"/api/v1/holds", "/api/v1/hosts",
		"/ui/", "/ui/batches", "/ui/batches?state=Processing", "/ui/batches?state=Completed", "/ui/batches/" + big, "/ui/batches/" + small,
		"/ui/jobs", "/ui/jobs?batch=" + big, "/ui/jobs?state=Held", "/ui/jobs/" + jids[len(jids)/2], "/ui/search?q=" + jids[0],
		"/metrics",
	}
	raw := map[string]func() int{
		"children /batches + 50 batch status": func() int { return rawBatchPage(b, conn, root) },
		"children of the big batch's buckets + archive + feed": func() int {
			return rawBatch(b, conn, root, big)
		},
		"status and space_needed of the big batch's live jobs": func() int {
			var g errgroup.Group
			g.SetLimit(32)
			for _, jid := range jids {
				for _, c := range []string{"status", "space_needed"} {
					g.Go(func() error { _, _, err := conn.Get(root + "/jobs/" + jid + "/" + c); return err })
				}
			}
			if err := g.Wait(); err != nil {
				b.Fatal(err)
			}
			return 2 * len(jids)
		},
		"children /jobs/states/held": func() int {
			kids, _, err := conn.Children(root + "/jobs/states/held")
			if err != nil {
				b.Fatal(err)
			}
			return len(kids)
		},
	}
	for b.Loop() {
		for name, f := range raw {
			var times []time.Duration
			n := 0
			for range 5 {
				t0 := time.Now()
				n = f()
				times = append(times, time.Since(t0))
			}
			slices.Sort(times)
			b.Logf("raw %-55s median %8v max %8v (%d)", name, times[2].Round(time.Microsecond), times[4].Round(time.Microsecond), n)
		}
		for _, p := range pages {
			var times []time.Duration
			size := 0
			for range 5 {
				t0 := time.Now()
				size = get(b, base+p)
				times = append(times, time.Since(t0))
			}
			slices.Sort(times)
			b.Logf("GET %-55s median %8v max %8v %8d bytes", p, times[2].Round(time.Microsecond), times[4].Round(time.Microsecond), size)
		}
	}
	warm, _ := procMiB(pid, "VmRSS")
	for round := range 20 {
		var g errgroup.Group
		g.SetLimit(4)
		for _, p := range pages {
			g.Go(func() error { get(b, base+p); return nil })
		}
		_ = g.Wait()
		if round%5 == 4 {
			rss, _ := procMiB(pid, "VmRSS")
			b.Logf("after %d rounds of every page (4 at once): RSS %.1f MiB", round+1, rss)
		}
	}
	after, _ := procMiB(pid, "VmRSS")
	peak, _ := procMiB(pid, "VmHWM")
	b.Logf("daemon RSS: idle %.1f MiB, after one pass %.1f MiB, after 20 more %.1f MiB, peak %.1f MiB", idle, warm, after, peak)
	liveUpdates(b, q, base, []string{"/ui/", "/ui/batches/" + big, "/ui/jobs"})
	b.ReportMetric(after, "RSS-MiB")
	b.ReportMetric(peak, "peak-RSS-MiB")
}

// get fetches url, which must answer 200, and gives its body's size.
func get(b *testing.B, url string) int {
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %s, %v", url, resp.Status, err)
	}
	return int(n)
}

// makeWindowedBatch makes a batch of objects as the feed leaves it with
// the window full: its objects kept in chunks of 1,000, live jobs made
// and Held, the others archived 200 to a node. It gives the bid and the
// live jobs' ids.
func makeWindowedBatch(b *testing.B, q *queue.Queue, conn *zk.Conn, objects, live int) (string, []string) {
	ctx := b.Context()
	bt, err := q.CreateBatch(ctx, queue.SubmissionOf(map[string]any{"payload_url": "foreign:1", "profile": "demo"}))
	if err != nil {
		b.Fatal(err)
	}
	if bt, err = q.LockBatch(ctx, bt.ID); err != nil {
		b.Fatal(err)
	}
	objs := make([]queue.Object, objects)
	for i := range objs {
		objs[i] = queue.Object{Key: fmt.Sprintf("line %d", i+1), Spec: queue.JobSpec{Priority: 5,
			Config: queue.JobConfig{PayloadURL: fmt.Sprintf("foreign:%d", i)}, Identifiers: &queue.Identifiers{LocalIDs: []string{fmt.Sprintf("big-%d", i)}}}}
	}
	f, err := q.WriteObjects(ctx, bt, objs, 1000)
	if err != nil {
		b.Fatal(err)
	}
	f.Made = f.Chunks
	if err := q.SetFeed(ctx, bt, f); err != nil {
		b.Fatal(err)
	}
	count := objects
	if err := q.SetBatchStatus(ctx, bt, queue.Processing, queue.BatchChange{JobCount: &count, Release: true}); err != nil {
		b.Fatal(err)
	}
	// The archived jobs: made-up jids below the live ones, 200 to a node.
	for first := 0; first < objects-live; first += 200 {
		n := min(200, objects-live-first)
		entries := make([]queue.ArchivedJob, n)
		for i := range entries {
			entries[i] = queue.ArchivedJob{ID: fmt.Sprintf("jid9%09d", first+i), Key: fmt.Sprintf("line %d", first+i+1),
				Identifiers: &queue.Identifiers{LocalIDs: []string{fmt.Sprintf("big-%d", first+i)}}}
		}
		data, err := json.Marshal(entries)
		if err != nil {
			b.Fatal(err)
		}
		p := fmt.Sprintf("%s/batches/%s/archive", q.Root(), bt.ID)
		if first == 0 {
			if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := conn.Create(fmt.Sprintf("%s/%s+%d", p, entries[0].ID, n), data, 0, zk.WorldACL(zk.PermAll)); err != nil {
			b.Fatal(err)
		}
	}
	jids := make([]string, live)
	var g errgroup.Group
	g.SetLimit(16)
	for i := range live {
		g.Go(func() (err error) {
			jids[i], err = heldJob(ctx, q, bt, objs[objects-live+i].Spec)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	slices.Sort(jids)
	return bt.ID, jids
}

// heldJob makes a job of batch bt and holds it: no daemon takes it.
func heldJob(ctx context.Context, q *queue.Queue, bt *queue.Batch, spec queue.JobSpec) (string, error) {
	j, err := q.CreateJob(ctx, bt, spec)
	if err != nil {
		return "", err
	}
	_, err = q.HoldJob(ctx, j.ID)
	return j.ID, err
}

// makeSmallBatches makes n batches in Processing of one Held job each,
// as the reactor's BenchmarkBatchCompletion does.
func makeSmallBatches(b *testing.B, q *queue.Queue, n int) []string {
	ctx := b.Context()
	bids := make([]string, n)
	var g errgroup.Group
	g.SetLimit(16)
	for i := range n {
		g.Go(func() error {
			bt, err := q.CreateBatch(ctx, queue.SubmissionOf(map[string]any{"payload_url": "foreign:1", "profile": "demo"}))
			if err != nil {
				return err
			}
			if bt, err = q.LockBatch(ctx, bt.ID); err != nil {
				return err
			}
			one := 1
			if err := q.SetBatchStatus(ctx, bt, queue.Processing, queue.BatchChange{JobCount: &one, Release: true}); err != nil {
				return err
			}
			bids[i] = bt.ID
			_, err = heldJob(ctx, q, bt, queue.JobSpec{Priority: 5, Config: queue.JobConfig{PayloadURL: "foreign:1"}})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	return bids
}

// rawBatchPage lists /batches and reads the status of the newest 50, as
// a page of the batch listing shows them.
func rawBatchPage(b *testing.B, conn *zk.Conn, root string) int {
	kids, _, err := conn.Children(root + "/batches")
	if err != nil {
		b.Fatal(err)
	}
	slices.Sort(kids)
	kids = kids[max(0, len(kids)-50):]
	var g errgroup.Group
	for _, k := range kids {
		g.Go(func() error { _, _, err := conn.Get(root + "/batches/" + k + "/status"); return err })
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	return len(kids)
}

// rawBatch lists a batch's buckets and archive and reads its feed.
func rawBatch(b *testing.B, conn *zk.Conn, root, bid string) int {
	n := 0
	for _, c := range append(slices.Clone(queue.Buckets), "archive") {
		dir := root + "/batches/" + bid + "/states/" + c
		if c == "archive" {
			dir = root + "/batches/" + bid + "/archive"
		}
		kids, _, err := conn.Children(dir)
		if err != nil && err != zk.ErrNoNode {
			b.Fatal(err)
		}
		n += len(kids)
	}
	if _, _, err := conn.Get(root + "/batches/" + bid + "/feed"); err != nil {
		b.Fatal(err)
	}
	return n
}

// liveUpdates follows the dashboard's live stream with one page of each
// of pages, as its script does (on a notice, fetch the page again; one
// fetch at a time; notices meanwhile make one more fetch after it; no
// fetch before the last one's end plus as long as it took), while
// a pass-through batch of 300 jobs runs (submitted to the queue as the
// API does), and logs the notices, the
// fetches and the share of the time each page was being fetched.
func liveUpdates(b *testing.B, q *queue.Queue, base string, pages []string) {
	type follower struct {
		page             string
		notices, fetches atomic.Int64
		busy             atomic.Int64 // ns spent fetching
	}
	ctx, stop := context.WithCancel(b.Context())
	defer stop()
	var fs []*follower
	var wg sync.WaitGroup
	for _, p := range pages {
		f := &follower{page: p}
		fs = append(fs, f)
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/ui/live", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		wake := make(chan struct{}, 1)
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "event: change") {
					f.notices.Add(1)
					select {
					case wake <- struct{}{}:
					default:
					}
				}
			}
		}()
		go func() {
			defer wg.Done()
			var rested time.Time // app.js's rest: no fetch before the last one's end plus as long as it took
			for {
				select {
				case <-ctx.Done():
					return
				case <-wake:
				}
				time.Sleep(time.Until(rested))
				select { // notices during the rest: this fetch shows them
				case <-wake:
				default:
				}
				t0 := time.Now()
				req, _ := http.NewRequestWithContext(ctx, "GET", base+f.page, nil)
				req.Header.Set("X-Live", "1")
				if resp, err := http.DefaultClient.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					f.fetches.Add(1)
				}
				took := time.Since(t0)
				f.busy.Add(int64(took))
				rested = time.Now().Add(took)
			}
		}()
	}
	start := time.Now()
	bt, err := q.CreateBatch(ctx, queue.SubmissionOf(map[string]any{"payload_url": "passthrough:300", "profile": "demo"}))
	if err != nil {
		b.Fatal(err)
	}
	for {
		st, err := q.BatchState(ctx, bt.ID)
		if err != nil {
			b.Fatal(err)
		}
		if st == queue.Completed || st == queue.Failed || time.Since(start) > 10*time.Minute {
			b.Logf("live: batch %s of 300 pass-through jobs %s in %v", bt.ID, st, time.Since(start).Round(time.Millisecond))
			break
		}
		time.Sleep(200 * time.Millisecond) // a benchmark's progress poll, not synchronisation of what it measures
	}
	took := time.Since(start)
	stop()
	wg.Wait()
	for _, f := range fs {
		b.Logf("live: %-40s %5d notices, %5d fetches (%.1f/s), fetching %3.0f%% of the time",
			f.page, f.notices.Load(), f.fetches.Load(), float64(f.fetches.Load())/took.Seconds(), 100*float64(f.busy.Load())/float64(took))
	}
}
