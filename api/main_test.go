package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ingestq/ingestq/api"
	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers/audit"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/internal/httpd"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/internal/queuetest"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/reactor/stalled"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(zktest.WithShared(m)) }

// The tokens of every test's API, by role.
const (
	readToken    = "read-token-0123456789"
	operateToken = "operate-token-0123456789"
	adminToken   = "admin-token-0123456789"
)

// bundle is one test's daemon pieces: a queue on the shared ZooKeeper, an
// embedded NATS, and the API on a real HTTP server.
type bundle struct {
	t    testing.TB
	root string
	q    *queue.Queue
	bus  *events.Bus
	api  *api.API
	toks *api.Tokens // the API's: a test may Replace them, as a reload does
	base string      // http://127.0.0.1:PORT/api/v1/
	log  *slog.Logger
	objs int // objects made by job, for their ARKs and local ids
}

// options change a bundle's API before it starts.
type options struct {
	noTokens  bool
	inventory inventory.Inventory
	stalled   func(*queue.Job) bool
	pipeline  *pipelineDaemon // a daemon of the ingest pipeline and the access queues, the API's inventory its
	audit     *audit.Auditor
	zkGone    bool     // the API's ZooKeeper connection is closed once the queue is made: ZooKeeper out of reach
	zkSilent  bool     // the API's ZooKeeper stops answering once the queue is made (a paused proxy): each request gives up after 1 s
	tokens    []string // more lines of the tokens file
}

func setup(t testing.TB, opts ...func(*options)) *bundle {
	t.Helper()
	var o options
	for _, f := range opts {
		f(&o)
	}
	log := slog.New(slog.NewTextHandler(logtest.NewT(t), &slog.HandlerOptions{Level: slog.LevelWarn}))
	root := zktest.Root(t)
	var proxy *zktest.Proxy
	var servers []string
	if o.zkSilent {
		proxy = zktest.ProxyToShared(t)
		servers = append(servers, proxy.Addr())
	}
	conn := zktest.Connect(t, servers...)
	var closed atomic.Bool
	qopts := []queue.Option{queue.WithClosed(closed.Load)}
	if o.zkSilent {
		qopts = append(qopts, queue.WithRequestTimeout(time.Second))
	}
	q, err := queue.New(conn, root, qopts...)
	must(t, err)
	must(t, q.Init(t.Context()))
	if o.zkGone {
		closed.Store(true) // a write gives up at once, not after its back-off through an outage
		conn.Close()
	}
	if o.zkSilent {
		proxy.Pause()
	}
	bus, err := events.Open(context.Background(), events.Config{DataDir: t.TempDir(), Host: "test", Logger: log})
	must(t, err)
	t.Cleanup(func() { _ = bus.Close() })
	if o.pipeline != nil {
		o.inventory = o.pipeline.start(t, root, bus, log)
	}
	tokens := writeTokens(t, o.noTokens, o.tokens...)
	ap, err := api.New(api.Config{Ops: &ops.Service{Q: q, Publish: bus.Publish, Recorded: bus.Replay}, Bus: bus, Inventory: o.inventory,
		Audit: o.audit, Tokens: tokens, Stalled: stalledBy(o.stalled), Logger: log})
	must(t, err)
	web, err := httpd.Start("127.0.0.1:0", log)
	must(t, err)
	web.Handle(api.Prefix, ap)
	t.Cleanup(web.Close)
	t.Cleanup(ap.Close) // first: the event streams end before the server waits for them
	return &bundle{t: t, root: root, q: q, bus: bus, api: ap, toks: tokens, base: web.DefaultAdvertise() + api.Prefix, log: log}
}

// writeTokens writes a tokens file with a token of each role and more
// lines (none with noTokens) and loads it.
func writeTokens(t testing.TB, none bool, more ...string) *api.Tokens {
	t.Helper()
	if none {
		tokens, err := api.LoadTokens("", "")
		must(t, err)
		return tokens
	}
	file := filepath.Join(t.TempDir(), "tokens")
	must(t, os.WriteFile(file, []byte("# role token name\n"+
		"read "+readToken+" Reader\n"+
		"operate "+operateToken+" alice\n\n"+
		"admin "+adminToken+"\n"+strings.Join(more, "\n")), 0o600))
	tokens, err := api.LoadTokens(file, "")
	must(t, err)
	return tokens
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// answer is an HTTP answer, read whole.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request with token ("" for none) and body (nil for none; a
// string as it is; anything else as JSON). path is under the API's prefix,
// or the whole path (/api/v1/…) as the OpenAPI document names it.
func (b *bundle) do(method, path, token string, body any) answer {
	b.t.Helper()
	return b.doAs(method, path, token, "application/json", body)
}

// doAs is do with the body's Content-Type ("" for none).
func (b *bundle) doAs(method, path, token, contentType string, body any) answer {
	b.t.Helper()
	return b.send(b.t.Context(), method, path, token, contentType, body)
}

// doIn is do under ctx: a test's deadline for the answer.
func (b *bundle) doIn(ctx context.Context, method, path, token string, body any) answer {
	b.t.Helper()
	return b.send(ctx, method, path, token, "application/json", body)
}

func (b *bundle) send(ctx context.Context, method, path, token, contentType string, body any) answer {
	b.t.Helper()
	var rd io.Reader
	switch x := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(x)
	default:
		data, err := json.Marshal(x)
		must(b.t, err)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, b.base+strings.TrimPrefix(strings.TrimPrefix(path, api.Prefix), "/"), rd)
	must(b.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if rd != nil && contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	must(b.t, err)
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") == "text/event-stream" {
		return answer{resp.StatusCode, resp.Header, nil} // a stream has no end to read to
	}
	data, err := io.ReadAll(resp.Body)
	must(b.t, err)
	return answer{resp.StatusCode, resp.Header, data}
}

// ok checks a 2xx JSON answer of status want and decodes it into v.
func (a answer) ok(t testing.TB, want int, v any) {
	t.Helper()
	if a.status != want {
		t.Fatalf("status %d, want %d: %s", a.status, want, a.body)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json", ct)
	}
	if v != nil {
		must(t, json.Unmarshal(a.body, v))
	}
}

// problem checks that the answer is a problem document of status and kind
// whose detail holds every part, and returns it.
func (a answer) problem(t *testing.T, status int, kind string, parts ...string) api.Problem {
	t.Helper()
	var p api.Problem
	if err := json.Unmarshal(a.body, &p); err != nil {
		t.Fatalf("status %d, body %q: not a problem document: %v", a.status, a.body, err)
	}
	if a.status != status || p.Status != status || p.Type != api.ProblemType+kind {
		t.Fatalf("status %d, problem %+v; want %d %s", a.status, p, status, kind)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type %q, want application/problem+json", ct)
	}
	// The kinds a client may meet are one list with the OpenAPI document's.
	desc, _ := schemaProps(t, "Problem", "")["type"]["description"].(string)
	_, list, _ := strings.Cut(strings.TrimSuffix(desc, "."), "a kind: ")
	if !slices.Contains(strings.Split(list, ", "), kind) {
		t.Errorf("problem kind %s is not in the OpenAPI document's Problem.type: %q", kind, desc)
	}
	for _, part := range parts {
		if !strings.Contains(p.Detail, part) {
			t.Errorf("detail %q does not hold %q", p.Detail, part)
		}
	}
	return p
}

// batch creates a batch of profile in the queue.
func (b *bundle) batch(uuid, profile string) *queue.Batch {
	b.t.Helper()
	bt, err := b.q.CreateBatch(b.t.Context(), queue.SubmissionOf(map[string]any{"batchID": uuid, "profile_name": profile, "submitter": "tester"}))
	must(b.t, err)
	return bt
}

// job creates a Pending job in batch bid, with the object ark:/99999/fk4tN
// (local id loc-N; N counts the bundle's jobs from 1), then moves it
// through states.
func (b *bundle) job(bid string, priority int, size int64, states ...queue.State) string {
	b.t.Helper()
	bt, err := b.q.LoadBatch(b.t.Context(), bid)
	must(b.t, err)
	b.objs++
	n := strconv.Itoa(b.objs)
	j, err := b.q.CreateJob(b.t.Context(), bt, queue.JobSpec{Priority: priority, SpaceNeeded: size,
		Config:      queue.JobConfig{Profile: bt.Profile(), PayloadURL: "https://example.org/obj.zip"},
		Identifiers: &queue.Identifiers{PrimaryID: "ark:/99999/fk4t" + n, LocalIDs: []string{"loc-" + n}}})
	must(b.t, err)
	b.move(j.ID, "", states...)
	return j.ID
}

// move takes a job through states, as a daemon would.
func (b *bundle) move(jid, message string, states ...queue.State) {
	b.t.Helper()
	for _, s := range states {
		j, err := b.q.LockJob(b.t.Context(), jid)
		must(b.t, err)
		must(b.t, b.q.SetJobStatus(b.t.Context(), j, s, queue.JobChange{Message: message, Release: true}))
	}
}

// processing moves a batch to Processing, as its daemon does once its jobs are made.
func (b *bundle) processing(bid string) {
	b.t.Helper()
	bt, err := b.q.LockBatch(b.t.Context(), bid)
	must(b.t, err)
	must(b.t, b.q.SetBatchStatus(b.t.Context(), bt, queue.Processing, queue.BatchChange{Release: true}))
}

func (b *bundle) jobState(jid string) *queue.Job {
	b.t.Helper()
	j, err := b.q.LoadJob(b.t.Context(), jid)
	must(b.t, err)
	return j
}

// daemon runs a reactor with pass-through handlers on the bundle's queue
// and bus, owning roles only, until the test ends.
func (b *bundle) daemon(roles ...reactor.Role) {
	t := b.t
	s := queuetest.Session(t, b.log)
	q, err := queue.New(s.Conn, b.root, queue.WithLogger(b.log))
	must(t, err)
	pt := reactor.PassThrough{}
	r, err := reactor.New(reactor.Config{Queue: q, Session: s, Bus: b.bus, Host: "test", Roles: roles,
		Jobs: pt.Handlers(), Batches: pt, Reporter: pt, Backoff: 10 * time.Millisecond, Grace: 5 * time.Second, Logger: b.log})
	must(t, err)
	runReactor(t, r)
}

// runReactor runs r until the test ends.
func runReactor(t testing.TB, r *reactor.Reactor) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		must(t, <-done)
	})
}

// eventually polls cond until it holds, for at most a minute: for what
// ZooKeeper gives no event to wait on.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after a minute", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stalledBy flags the jobs keep picks (nil: no detector).
func stalledBy(keep func(*queue.Job) bool) func(context.Context) func(*queue.Job) *stalled.Stall {
	if keep == nil {
		return nil
	}
	return func(context.Context) func(*queue.Job) *stalled.Stall {
		return func(j *queue.Job) *stalled.Stall {
			if !keep(j) {
				return nil
			}
			return &stalled.Stall{JID: j.ID, State: j.State(), Kind: stalled.KindWaiting, Reason: "picked by the test"}
		}
	}
}
