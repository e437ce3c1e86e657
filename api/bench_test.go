package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/nats-io/nats.go"
	"golang.org/x/sync/errgroup"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// The status of a 1,000-job batch (its jobs made by a real daemon from a
// pass-through payload), beside a raw ZooKeeper read of the same nodes:
//
//	raw-zk  the batch's 7 nodes, its 4 buckets, each job's status and space_needed, 32 reads in flight
//	ops     the service layer's BatchStatus: those reads, decoded and counted
//	api     GET /api/v1/batches/{bid} over HTTP, decoded by the client
func BenchmarkBatchStatus(b *testing.B) {
	bd := setup(b)
	bd.daemon(reactor.RoleIntake) // makes the jobs; works none of them
	var got struct{ BID string }
	bd.do("POST", "batches", operateToken, map[string]any{"payload_url": "passthrough:1000", "profile": "demo"}).ok(b, http.StatusCreated, &got)
	eventually(b, "the batch's jobs are made", func() bool {
		bt, err := bd.q.LoadBatch(b.Context(), got.BID)
		return err == nil && bt.State() == queue.Processing
	})
	s := &ops.Service{Q: bd.q}
	b.Run("raw-zk", func(b *testing.B) {
		conn := zktest.Connect(b)
		for b.Loop() {
			if n := rawBatchRead(b, conn, bd.root, got.BID); n != 1000 {
				b.Fatalf("%d jobs read", n)
			}
		}
	})
	b.Run("ops", func(b *testing.B) {
		for b.Loop() {
			st, err := s.BatchStatus(b.Context(), got.BID)
			if err != nil || st.Jobs.Total != 1000 {
				b.Fatalf("%v %v", st, err)
			}
		}
	})
	b.Run("api", func(b *testing.B) {
		for b.Loop() {
			var st ops.BatchStatus
			bd.do("GET", "batches/"+got.BID, readToken, nil).ok(b, http.StatusOK, &st)
			if st.Jobs.Total != 1000 {
				b.Fatalf("%+v", st.Jobs)
			}
		}
	})
}

// rawBatchRead reads what BatchStatus reads, with the client alone, and
// returns how many jobs the batch has.
func rawBatchRead(b *testing.B, conn *zk.Conn, root, bid string) int {
	batch := root + "/batches/" + bid
	var g errgroup.Group
	g.SetLimit(32)
	for _, c := range []string{"", "/status", "/submission", "/status-report", "/states", "/lock", "/job-count"} {
		g.Go(func() error { _, _, err := conn.Get(batch + c); return ignoreNoNode(err) })
	}
	var jids []string
	for _, bucket := range queue.Buckets {
		kids, _, err := conn.Children(batch + "/states/" + bucket)
		if ignoreNoNode(err) != nil {
			b.Fatal(err)
		}
		jids = append(jids, kids...)
	}
	for _, jid := range jids {
		for _, c := range []string{"/status", "/space_needed"} {
			g.Go(func() error { _, _, err := conn.Get(root + "/jobs/" + jid + c); return ignoreNoNode(err) })
		}
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	return len(jids)
}

func ignoreNoNode(err error) error {
	if err == zk.ErrNoNode {
		return nil
	}
	return err
}

// fanOut is how many clients follow the events.
const fanOut = 100

// One event reaching 100 followers, beside a raw NATS fan-out:
//
//	raw-nats  100 core NATS subscriptions on the daemon's connection (what each stream subscribes)
//	sse       100 HTTP clients on GET /api/v1/events, each reading its stream
//
// One op publishes one event and waits until every follower has it.
func BenchmarkSSEFanout(b *testing.B) {
	bd := setup(b)
	nc := bd.bus.Conn()
	b.Run(fmt.Sprintf("raw-nats/clients=%d", fanOut), func(b *testing.B) {
		var got sync.WaitGroup
		for range fanOut {
			sub, err := nc.Subscribe(events.SubjectAll, func(*nats.Msg) { got.Done() })
			must(b, err)
			b.Cleanup(func() { _ = sub.Unsubscribe() })
		}
		must(b, nc.Flush())
		fanOutLoop(b, nc, &got)
	})
	b.Run(fmt.Sprintf("sse/clients=%d", fanOut), func(b *testing.B) {
		var got sync.WaitGroup
		ctx, cancel := context.WithCancel(context.Background())
		var readers sync.WaitGroup
		b.Cleanup(func() { cancel(); readers.Wait() })
		for range fanOut {
			resp := bd.sseClient(ctx)
			readers.Add(1)
			go func() {
				defer readers.Done()
				defer resp.Body.Close()
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					if strings.HasPrefix(sc.Text(), "data: ") {
						got.Done()
					}
				}
			}()
		}
		fanOutLoop(b, nc, &got)
	})
}

// sseClient opens one event stream; its subscription is live once the
// answer's headers are in.
func (b *bundle) sseClient(ctx context.Context) *http.Response {
	req, err := http.NewRequestWithContext(ctx, "GET", b.base+"events", nil)
	must(b.t, err)
	req.Header.Set("Authorization", "Bearer "+readToken)
	resp, err := http.DefaultClient.Do(req)
	must(b.t, err)
	if resp.StatusCode != http.StatusOK {
		b.t.Fatalf("events: %d", resp.StatusCode)
	}
	return resp
}

// fanOutLoop publishes one event per op and waits for its fanOut deliveries.
func fanOutLoop(b *testing.B, nc *nats.Conn, got *sync.WaitGroup) {
	i := 0
	for b.Loop() {
		i++
		data, err := json.Marshal(events.Event{ID: fmt.Sprintf("bench-%d", i), Kind: events.KindBatch, BatchID: "bid0000000001", To: "Processing"})
		must(b, err)
		got.Add(fanOut)
		must(b, nc.Publish("ingestq.batch.processing.bid0000000001", data))
		got.Wait()
	}
	b.ReportMetric(float64(fanOut)*float64(b.N)/b.Elapsed().Seconds(), "deliveries/s")
}
