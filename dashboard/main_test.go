package dashboard_test

import (
	"context"
	"encoding/base64"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/ingestq/ingestq/api"
	"github.com/ingestq/ingestq/dashboard"
	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/internal/httpd"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/internal/queuetest"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// The browser is started once for the package (Chromium's cold start takes
// seconds) and stopped after the tests, before the leak check.
func TestMain(m *testing.M) { goleak.VerifyTestMain(withBrowser{zktest.WithShared(m)}) }

// The tokens of every test's dashboard, by role.
const (
	readToken    = "read-token-0123456789"
	operateToken = "operate-token-0123456789"
	adminToken   = "admin-token-0123456789"
	scopedToken  = "scoped-token-0123456789" // operate, scoped to profile p1
)

// bundle is one test's daemon pieces: a queue on the shared ZooKeeper
// served by a dashboard on its own session, an embedded NATS, a real HTTP
// server, and the test's own queue on another session, which writes as a
// foreign program would.
type bundle struct {
	t    testing.TB
	q    *queue.Queue // the test's: a session of its own
	svc  *ops.Service // the daemon's
	dash *dashboard.Dashboard
	bus  *events.Bus
	base string // http://127.0.0.1:PORT
	web  *httpd.Server
	log  *logtest.Buffer // the daemon's warnings
	objs int
}

// options change a bundle before it starts.
type options struct {
	noTokens  bool
	inventory inventory.Inventory
	zkGone    bool                 // the dashboard's ZooKeeper connection is closed once it serves: ZooKeeper out of reach
	bus       func(*events.Config) // changes the bus's settings (a cluster member's)
}

func noTokens(o *options) { o.noTokens = true }

func setup(t testing.TB, opts ...func(*options)) *bundle {
	t.Helper()
	var o options
	for _, f := range opts {
		f(&o)
	}
	logged := &logtest.Buffer{}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(logtest.NewT(t), logged), &slog.HandlerOptions{Level: slog.LevelWarn}))
	root := zktest.Root(t)
	q, err := queue.New(zktest.Connect(t), root)
	must(t, err)
	must(t, q.Init(t.Context()))
	cfg := events.Config{DataDir: t.TempDir(), Host: "test", Logger: log}
	if o.bus != nil {
		o.bus(&cfg)
	}
	bus, err := events.Open(context.Background(), cfg)
	must(t, err)
	t.Cleanup(func() { _ = bus.Close() })
	s := queuetest.Session(t, log)
	dq, err := queue.New(s.Conn, root, queue.WithLogger(log))
	must(t, err)
	if o.zkGone {
		// Closed before the dashboard starts its watches: a Close with
		// requests in flight can leave go-zookeeper's loop blocked on a
		// reply nobody reads (flushRequests), which goleak then reports.
		s.Conn.Close()
	}
	svc := &ops.Service{Q: dq, Publish: bus.Publish, Recorded: bus.Replay}
	d, err := dashboard.New(dashboard.Config{Ops: svc, Session: s, Bus: bus, Inventory: o.inventory,
		Tokens: tokens(t, o.noTokens), Logger: log})
	must(t, err)
	web, err := httpd.Start("127.0.0.1:0", log)
	must(t, err)
	web.Handle(dashboard.Prefix, d)
	web.Handle("GET /{$}", dashboard.Redirect())
	t.Cleanup(web.Close)
	t.Cleanup(d.Close) // first: the live streams end before the server waits for them
	return &bundle{t: t, q: q, svc: svc, dash: d, bus: bus, base: web.DefaultAdvertise(), web: web, log: logged}
}

// tokens writes a tokens file with a token of each role (none with
// noTokens) and loads it.
func tokens(t testing.TB, none bool) *api.Tokens {
	t.Helper()
	file := ""
	if !none {
		file = filepath.Join(t.TempDir(), "tokens")
		must(t, os.WriteFile(file, []byte("read "+readToken+" Reader\noperate "+operateToken+" alice\nadmin "+adminToken+"\n"+
			"operate:p1 "+scopedToken+" Depositor\n"), 0o600))
	}
	tk, err := api.LoadTokens(file, "")
	must(t, err)
	return tk
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// batch creates a batch of profile "p1" in the queue.
func (b *bundle) batch(uuid string) *queue.Batch {
	b.t.Helper()
	bt, err := b.q.CreateBatch(b.t.Context(), queue.SubmissionOf(map[string]any{"batchID": uuid, "profile_name": "p1", "submitter": "tester"}))
	must(b.t, err)
	return bt
}

// job creates a Pending job in batch bt, with the object ark:/99999/fk4tN
// and local id loc-N (N counts the bundle's jobs from 1), then moves it
// through states.
func (b *bundle) job(bt *queue.Batch, states ...queue.State) string {
	b.t.Helper()
	b.objs++
	n := strconv.Itoa(b.objs)
	j, err := b.q.CreateJob(b.t.Context(), bt, queue.JobSpec{Priority: 5, SpaceNeeded: 1000,
		Config:      queue.JobConfig{Profile: bt.Profile(), PayloadURL: "https://example.org/obj.zip"},
		Identifiers: &queue.Identifiers{PrimaryID: "ark:/99999/fk4t" + n, LocalIDs: []string{"loc-" + n}}})
	must(b.t, err)
	b.move(j.ID, states...)
	return j.ID
}

// move takes a job through states as a foreign program would: straight in
// ZooKeeper, publishing no event.
func (b *bundle) move(jid string, states ...queue.State) {
	b.t.Helper()
	for _, s := range states {
		j, err := b.q.LockJob(b.t.Context(), jid)
		must(b.t, err)
		must(b.t, b.q.SetJobStatus(b.t.Context(), j, s, queue.JobChange{Release: true}))
	}
}

func (b *bundle) state(jid string) queue.State {
	b.t.Helper()
	j, err := b.q.LoadJob(b.t.Context(), jid)
	must(b.t, err)
	return j.State()
}

// answer is an HTTP answer, read whole.
type answer struct {
	status int
	header http.Header
	body   string
}

// client is a browser-like HTTP client: it keeps cookies and does not
// follow redirects.
func (b *bundle) client(token string) *http.Client {
	jar, err := cookiejar.New(nil)
	must(b.t, err)
	if token != "" {
		u, _ := url.Parse(b.base + dashboard.Prefix)
		jar.SetCookies(u, []*http.Cookie{{Name: "ingestq_token", Value: base64.RawURLEncoding.EncodeToString([]byte(token)), Path: dashboard.Prefix}})
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// get reads a page with the token ("" for none).
func (b *bundle) get(token, path string) answer {
	b.t.Helper()
	return b.send(b.client(token), "GET", path, nil, nil)
}

// post sends a form as the dashboard's own page would (same origin).
func (b *bundle) post(token, path string, form url.Values) answer {
	b.t.Helper()
	return b.send(b.client(token), "POST", path, form, http.Header{"Origin": {b.base}, "Sec-Fetch-Site": {"same-origin"}})
}

func (b *bundle) send(c *http.Client, method, path string, form url.Values, h http.Header) answer {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(b.t.Context(), method, b.base+path, body)
	must(b.t, err)
	for k, v := range h {
		req.Header[k] = v
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.Do(req)
	must(b.t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	must(b.t, err)
	return answer{resp.StatusCode, resp.Header, string(data)}
}

// is checks the answer's status and that its page holds every part.
func (a answer) is(t testing.TB, status int, parts ...string) {
	t.Helper()
	if a.status != status {
		t.Fatalf("status %d, want %d: %s", a.status, status, a.body)
	}
	text := html.UnescapeString(a.body)
	for _, p := range parts {
		if !strings.Contains(text, p) {
			t.Errorf("the page (status %d) does not hold %q:\n%s", a.status, p, a.body)
		}
	}
}
