package api_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/access"
	"github.com/ingestq/ingestq/handlers/fetch"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/internal/queuetest"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// pipelineDaemon is a daemon of the ingest pipeline (the demo profile;
// storage, inventory and working folders in its data folder; no HTTP
// server, so its hand-off URLs are file: URLs) and of the access queues,
// whose packages go to its folder. Its assembler's clock is behind the
// test's by behind: a package it makes may have expired already, by the
// API's clock, while its sweep (every 50 ms) keeps it until behind is 0.
type pipelineDaemon struct {
	data   string
	behind atomic.Int64 // ns
}

// start runs the daemon on the queue under root until the test ends, and
// returns its inventory.
func (d *pipelineDaemon) start(t testing.TB, root string, bus *events.Bus, log *slog.Logger) inventory.Inventory {
	t.Helper()
	d.data = t.TempDir()
	s := queuetest.Session(t, log)
	q := queuetest.Queue(t, s, root, log)
	set, err := profile.NewSet(profile.Default())
	must(t, err)
	// MaxFill 1: only the margin holds a job back, so the tests pass on a disk
	// past the default 80 % (as CI's was).
	p, err := handlers.New(t.Context(), handlers.Config{Queue: q, Bus: bus, Profiles: set, DataDir: d.data, Logger: log, MaxFill: 1,
		Fetch: fetch.Config{Allow: fetch.Loopback}}) // the test's content server
	must(t, err)
	t.Cleanup(func() { _ = p.Close() }) // after the reactor stops
	as, err := access.New(t.Context(), access.Config{Queue: q, Source: p.ReaderFor, Dir: filepath.Join(d.data, "access"),
		Host: "test", Logger: log, Now: func() time.Time { return time.Now().Add(-time.Duration(d.behind.Load())) }})
	must(t, err)
	r, err := reactor.New(reactor.Config{Queue: q, Session: s, Bus: bus, Host: "test", Backoff: 5 * time.Millisecond,
		Grace: 5 * time.Second, Logger: log, Jobs: p.Handlers(), Batches: p, Reporter: p, Access: as, AccessSweep: 50 * time.Millisecond})
	must(t, err)
	runReactor(t, r)
	return p.Inventory()
}

// until reads the stream until an event of kind reaching one of states,
// and returns it; every event read must show no server path.
func (s stream) until(t *testing.T, kind string, states ...queue.State) events.Event {
	t.Helper()
	for {
		ev := s.next(t)
		data, err := json.Marshal(ev)
		must(t, err)
		noServerPaths(t, "an event of the stream", data)
		if ev.Kind == kind && slices.Contains(states, queue.State(ev.To)) {
			return ev
		}
	}
}

// noServerPaths checks that an answer to a token below admin names no
// path of the server's: none of the test's temporary folders (the
// daemon's data, working and access folders), no file: URL.
func noServerPaths(t *testing.T, what string, body []byte) {
	t.Helper()
	if s := string(body); strings.Contains(s, os.TempDir()+"/") || strings.Contains(s, "file:") {
		t.Errorf("%s shows a server path to a token below admin:\n%s", what, s)
	}
}

// An integrator's walk-through, on a daemon that ingests and makes access
// packages. A Completed job's detail says which of its values name the
// working folder and hand-off files its end removed (the CLI's show says
// it in words). A token below admin sees no path of the server's (the
// working folder, the file: URLs, the stored copies, an access package's
// folder) in any answer or event; an admin token does. An access request
// whose package expired is 410 Gone, saying when it expired and how to ask
// again, before its daemon's sweep removes it and after; one never made
// stays 404.
func TestWhatATokenSeesOfAnIngestedObject(t *testing.T) {
	t.Parallel()
	d := &pipelineDaemon{}
	d.behind.Store(int64(48 * time.Hour)) // its packages expire 24 h ago
	b := setup(t, func(o *options) { o.pipeline = d })
	b.publishDemo()
	content := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hello\n") }))
	t.Cleanup(content.Close)

	var sub struct{ BID string }
	b.do("POST", "batches", operateToken, map[string]any{"payload_url": content.URL + "/a.txt", "profile": "demo", "type": "file",
		"file_name": "a.txt", "local_id": "walk-1"}).ok(t, http.StatusCreated, &sub)
	s := b.openStream("since=1h&batch=" + sub.BID)
	jid := s.until(t, events.KindJob, queue.Completed, queue.Failed).JobID
	if ev := s.until(t, events.KindBatch, queue.Completed, queue.Failed); ev.To != string(queue.Completed) {
		t.Fatalf("batch %s: %+v", sub.BID, ev)
	}
	s.cancel()
	j := b.jobState(jid)
	if j.State() != queue.Completed || !strings.HasPrefix(j.Config.WorkingDir, d.data) || !strings.HasPrefix(j.Store.ManifestURL, "file:") {
		t.Fatalf("job %s: %s, working folder %q, store %+v", jid, j.State(), j.Config.WorkingDir, j.Store)
	}
	ark := j.Identifiers.PrimaryID

	// The job's detail: what its end removed; paths for an admin only.
	var detail struct {
		Configuration map[string]any `json:"configuration"`
		Removed       []string       `json:"removed"`
	}
	a := b.do("GET", "jobs/"+jid, adminToken, nil)
	a.ok(t, http.StatusOK, &detail)
	if detail.Configuration["working_dir"] != j.Config.WorkingDir {
		t.Errorf("an admin token's job detail: working_dir %v, want %s", detail.Configuration["working_dir"], j.Config.WorkingDir)
	}
	if want := []string{"configuration.working_dir", "inventory.manifest_url", "store.manifest_url"}; !slices.Equal(detail.Removed, want) {
		t.Errorf("a Completed job's removed %q, want %q", detail.Removed, want)
	}
	conforms(t, "GET /jobs/{jid}", map[string]any{"removed": detail.Removed}, schemaProps(t, "JobDetail", ""))
	for _, token := range []string{readToken, operateToken} {
		a := b.do("GET", "jobs/"+jid, token, nil)
		a.ok(t, http.StatusOK, &detail)
		noServerPaths(t, "GET /jobs/{jid}", a.body)
		if detail.Configuration["working_dir"] != "[server path hidden]" || len(detail.Removed) != 3 {
			t.Errorf("a token below admin: working_dir %v, removed %q", detail.Configuration["working_dir"], detail.Removed)
		}
	}

	// The object's copies are in the daemon's OCFL root.
	a = b.do("GET", "objects/"+ark, adminToken, nil)
	a.ok(t, http.StatusOK, nil)
	if !strings.Contains(string(a.body), d.data) {
		t.Errorf("an admin token does not see where the copies are:\n%s", a.body)
	}
	for _, path := range []string{"objects/" + ark, "objects?profile=demo&local_id=walk-1", "batches/" + sub.BID, "jobs?batch=" + sub.BID} {
		a := b.do("GET", path, readToken, nil)
		a.ok(t, http.StatusOK, nil)
		noServerPaths(t, "GET "+path, a.body)
	}

	// An access package, made in the daemon's folder, expired at once.
	var req ops.AccessView
	b.do("POST", "access", operateToken, map[string]any{"ark": ark}).ok(t, http.StatusCreated, &req)
	s = b.openStream("since=1h&access=" + req.Ref)
	if ev := s.until(t, events.KindAccess, queue.Completed, queue.Failed); ev.To != string(queue.Completed) {
		t.Fatalf("access request %s: %+v", req.Ref, ev)
	}
	var page struct{ Items []ops.AccessView }
	b.do("GET", "access", adminToken, nil).ok(t, http.StatusOK, &page)
	if len(page.Items) != 1 || page.Items[0].Token.Package == nil || !strings.HasPrefix(page.Items[0].Token.Package.Location, d.data) {
		t.Fatalf("an admin token's access list: %+v", page.Items)
	}
	expired := queue.NodeText(page.Items[0].Token.Package.Expires)
	a = b.do("GET", "access", readToken, nil)
	a.ok(t, http.StatusOK, nil)
	noServerPaths(t, "GET /access", a.body)
	again := `ask again with POST /api/v1/access {"ark": "` + ark + `"}`
	b.do("GET", "access/"+req.Ref, readToken, nil).problem(t, http.StatusGone, "gone",
		"access request "+req.Ref+" expired at "+expired, "its package goes at the next sweep", again)

	d.behind.Store(0) // the sweep removes it
	s.until(t, events.KindAccess, "Expired")
	b.do("GET", "access/"+req.Ref, readToken, nil).problem(t, http.StatusGone, "gone",
		"access request "+req.Ref+" expired at "+expired, "removed with its package", again)
	b.do("GET", "access/small/qid0000000099", readToken, nil).problem(t, http.StatusNotFound, "not-found", "qid0000000099")
}

// A message a daemon wrote that names a file of the server is given to a
// token below admin with the path hidden, its URLs, ARK and API request
// kept; an admin token gets it whole. A job not Completed has removed
// nothing.
func TestReadTokensSeeNoServerPaths(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const msg = `Downloading failed: write /var/lib/ingestq/work/jid1/a.txt: no space left on device (file:///var/lib/x, "/srv/y"); ` +
		`from https://example.org/a/b for ark:/99999/fk4t1: POST /api/v1/jobs/jid1/requeue`
	const hidden = `Downloading failed: write [server path hidden]: no space left on device ([server path hidden], "[server path hidden]"); ` +
		`from https://example.org/a/b for ark:/99999/fk4t1: POST /api/v1/jobs/jid1/requeue`
	jid := b.job(b.batch("uuid-paths", "demo").ID, 5, 0)
	b.move(jid, msg, queue.Estimating, queue.Provisioning, queue.Failed)
	for token, want := range map[string]string{readToken: hidden, operateToken: hidden, adminToken: msg} {
		var detail struct {
			Message string
			Removed []string
		}
		b.do("GET", "jobs/"+jid, token, nil).ok(t, http.StatusOK, &detail)
		var page struct{ Items []struct{ Message string } }
		b.do("GET", "jobs?state=failed", token, nil).ok(t, http.StatusOK, &page)
		if detail.Message != want || len(page.Items) != 1 || page.Items[0].Message != want {
			t.Errorf("%s: detail %q, list %+v; want %q", token, detail.Message, page.Items, want)
		}
		if detail.Removed == nil || len(detail.Removed) != 0 {
			t.Errorf("a job not Completed: removed %#v, want []string{}", detail.Removed)
		}
	}
}

// GET /profiles lists what the daemons published, as every listing does,
// and GET /profiles/{name} gives one: what a depositor needs to fill a
// submission. Whether a profile has a callback or notify addresses is
// said; the addresses, and the back ends, are given to an admin token
// only, with their passwords masked.
func TestProfilesForDepositors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.publishDemo()
	private := &profile.Profile{Name: "private", Description: "Trusted deposits", Priority: 3, NAAN: "13030", Shoulder: "m5",
		Callback: "https://hook:s3cret@cb.example.org/done", ReportCallback: "https://hook:s3cret@reports.example.org/r",
		Notify:  []string{"curator@example.org"},
		Storage: "/var/lib/ocfl, s3://bucket/p?endpoint=https://s3.example.org", Inventory: "postgres://ingest:pw0rd@db.example.org/ingest",
		AllowLocalFiles: true, LargeJobs: []profile.SizeRule{{Over: 10e9, Priority: 20}}, Access: "folder"}
	set, err := profile.NewSet(private)
	must(t, err)
	must(t, profile.Publish(t.Context(), b.q, set))
	must(t, b.q.PutProfile(t.Context(), "broken", []byte("{")))

	type view struct {
		Name, Description, NAAN, Shoulder string
		Priority                          int
		PayloadTypes                      []string           `json:"payload_types"`
		PayloadSchemes                    []string           `json:"payload_schemes"`
		HashAlgorithms                    []string           `json:"hash_algorithms"`
		LargeJobs                         []profile.SizeRule `json:"large_jobs"`
		HasCallback                       bool               `json:"has_callback"`
		HasNotify                         bool               `json:"has_notify"`
		HasReportCallback                 bool               `json:"has_report_callback"`
		// An admin token's only.
		Callback, Storage, Inventory, Access string
		ReportCallback                       string `json:"report_callback"`
		Notify                               []string
	}
	var page struct {
		Items    []view
		Next     *string
		Problems []string
	}
	for _, token := range []string{readToken, operateToken} {
		a := b.do("GET", "profiles", token, nil)
		a.ok(t, http.StatusOK, &page)
		if len(page.Items) != 2 || page.Items[0].Name != "demo" || page.Items[1].Name != "private" || page.Next != nil ||
			len(page.Problems) != 1 || !strings.Contains(page.Problems[0], "broken") {
			t.Fatalf("GET /profiles: %s", a.body)
		}
		p := page.Items[1]
		if p.Description != "Trusted deposits" || p.Priority != 3 || p.NAAN != "13030" || p.Shoulder != "m5" ||
			!slices.Equal(p.PayloadTypes, ops.PayloadTypes) || !slices.Equal(p.PayloadSchemes, []string{"http", "https", "file"}) ||
			!slices.Equal(p.HashAlgorithms, []string{"md5", "sha1", "sha256", "sha512"}) ||
			len(p.LargeJobs) != 1 || p.LargeJobs[0].Over != 10e9 || !p.HasCallback || !p.HasNotify || !p.HasReportCallback {
			t.Errorf("private: %+v", p)
		}
		if d := page.Items[0]; d.HasCallback || d.HasNotify || d.HasReportCallback || !slices.Equal(d.PayloadSchemes, []string{"http", "https"}) || d.LargeJobs == nil {
			t.Errorf("demo: %+v", d)
		}
		for _, secret := range []string{"cb.example.org", "reports.example.org", "curator@", "postgres", "s3://", "/var/lib"} {
			if strings.Contains(string(a.body), secret) {
				t.Errorf("a %s token sees %q:\n%s", token, secret, a.body)
			}
		}
		var raw struct{ Items []map[string]any }
		must(t, json.Unmarshal(a.body, &raw))
		conforms(t, "GET /profiles", raw.Items[1], schemaProps(t, "Profile", ""))
	}
	a := b.do("GET", "profiles", adminToken, nil)
	a.ok(t, http.StatusOK, &page)
	if p := page.Items[1]; p.Callback != "https://hook:xxxxx@cb.example.org/done" || p.ReportCallback != "https://hook:xxxxx@reports.example.org/r" ||
		!slices.Equal(p.Notify, private.Notify) ||
		p.Storage != "/var/lib/ocfl,s3://bucket/p?endpoint=https://s3.example.org" || p.Inventory != "postgres://ingest:xxxxx@db.example.org/ingest" ||
		p.Access != "folder" {
		t.Errorf("an admin token's private: %+v", p)
	}
	if strings.Contains(string(a.body), "s3cret") || strings.Contains(string(a.body), "pw0rd") {
		t.Errorf("an admin token sees a password:\n%s", a.body)
	}
	var raw map[string]any
	a = b.do("GET", "profiles/private", adminToken, nil)
	a.ok(t, http.StatusOK, &raw)
	conforms(t, "GET /profiles/{name}", raw, schemaProps(t, "Profile", ""))

	var one view
	b.do("GET", "profiles/private", readToken, nil).ok(t, http.StatusOK, &one)
	if one.Name != "private" || !one.HasCallback || one.Callback != "" || !one.HasReportCallback || one.ReportCallback != "" || one.Notify != nil {
		t.Errorf("GET /profiles/private: %+v", one)
	}
	b.do("GET", "profiles/nosuch", readToken, nil).problem(t, http.StatusNotFound, "not-found", `profile "nosuch"`, "published: broken, demo, private")
	b.do("GET", "profiles/No_Such", readToken, nil).problem(t, http.StatusBadRequest, "invalid", "profile name", "No_Such")
	b.do("GET", "profiles", "", nil).problem(t, http.StatusUnauthorized, "unauthorized")
}

// A body whose field has the wrong JSON type is a 400 naming the field by
// its JSON path, what was given and what is wanted, in JSON's words: no
// type or field of the server's code. So for every body the API takes.
func TestBadBodiesNameTheirField(t *testing.T) {
	t.Parallel()
	const ark = "ark:/99999/fk4body"
	b := setup(t, withObject(t, ark, 3))
	b.publishDemo()
	jid := b.job(b.batch("uuid-body", "demo").ID, 5, 0)
	sub := func(k string, v any) map[string]any {
		return map[string]any{"payload_url": "https://example.org/x", "profile": "demo", k: v}
	}
	for _, c := range []struct {
		path string
		body any
		want string
	}{
		{"batches", sub("priority", "3"), `priority: given "3" (a string); want a whole number`},
		{"batches", sub("priority", 2.5), `priority: given 2.5; want a whole number`},
		{"batches", sub("profile", 5), `profile: given 5; want a string`},
		{"batches", `[1, 2]`, `the body: given an array; want an object`},
		{"batches", `"x"`, `the body: given "x" (a string); want an object`},
		{"batches", sub("colour", "red"), `unknown field "colour": want one of payload_url, profile, type,`},
		{"batches", `{"profile": x}`, `malformed JSON body at byte 13: invalid character 'x'`},
		{"batches", `{"profile": `, `malformed JSON body: it ends before its value does`},
		{"access", map[string]any{"ark": ark, "version": "3"}, `version: given "3" (a string); want a whole number`},
		{"access", map[string]any{"ark": ark, "files": "a.txt"}, `files: given "a.txt" (a string); want an array, each item a string`},
		{"access", map[string]any{"ark": ark, "files": []any{"a", 1}}, `files[1]: given 1; want a string`},
		{"jobs/actions", map[string]any{"action": "hold", "filter": map[string]any{"batch": "bid1", "stalled": true}}, `filter.stalled: given true; want a string`},
		{"jobs/actions", map[string]any{"action": "hold", "jids": "jid1"}, `jids: given "jid1" (a string); want an array, each item a string`},
		{"jobs/actions", map[string]any{"action": "fail", "jids": []string{jid}, "force": "yes"}, `force: given "yes" (a string); want true or false`},
		{"jobs/actions", map[string]any{"action": []string{"hold"}}, `action: given an array; want a string`},
		{"jobs/" + jid + "/fail", map[string]any{"message": 3}, `message: given 3; want a string`},
	} {
		p := b.do("POST", c.path, adminToken, c.body).problem(t, http.StatusBadRequest, "invalid", c.want)
		if goWords := regexp.MustCompile(`Go |struct|\bint\b|\[\]|map\[|json:|api\.|ops\.|Body`); goWords.MatchString(p.Detail) {
			t.Errorf("POST %s %v: %q names the server's code", c.path, c.body, p.Detail)
		}
	}
}
