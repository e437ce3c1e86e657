package api_test

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/cmd/ingestq/cli"
	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/internal/serverpath"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// jobPage is a page of the jobs list.
type jobPage struct {
	Items []ops.JobRow
	Next  *string
}

// pageAll walks a listing with ?limit=, collecting every jid.
func (b *bundle) pageAll(query string, limit int) []string {
	b.t.Helper()
	var jids []string
	after := ""
	for pages := 0; ; pages++ {
		var p jobPage
		b.do("GET", fmt.Sprintf("jobs?%slimit=%d&after=%s", query, limit, after), readToken, nil).ok(b.t, http.StatusOK, &p)
		if len(p.Items) > limit {
			b.t.Fatalf("a page of %d items, limit %d", len(p.Items), limit)
		}
		for _, it := range p.Items {
			jids = append(jids, it.JID)
		}
		if p.Next == nil {
			return jids
		}
		after = *p.Next
		if pages > 2000 {
			b.t.Fatal("paging does not end")
		}
	}
}

// A daemon makes the 1,000 jobs of a pass-through batch; paging through
// them, a few at a time, by state or by batch, gives each once, in order.
func TestPagingThrough1000Jobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.daemon(reactor.RoleIntake) // makes the jobs; works none of them
	var got struct{ BID string }
	b.do("POST", "batches", operateToken, map[string]any{"payload_url": "passthrough:1000", "profile": "demo"}).ok(t, http.StatusCreated, &got)
	eventually(t, "the batch's jobs are made", func() bool { return b.batchState(got.BID) == queue.Processing })
	all, err := b.q.JobIDs(t.Context())
	must(t, err)
	if len(all) != 1000 {
		t.Fatalf("%d jobs, want 1000", len(all))
	}
	for _, c := range []struct {
		query string
		limit int
	}{{"", 100}, {"state=pending&", 137}, {"batch=" + got.BID + "&", 1000}, {"state=Pending&batch=" + got.BID + "&", 333}} {
		jids := b.pageAll(c.query, c.limit)
		if !slices.Equal(jids, all) {
			t.Fatalf("?%slimit=%d: %d jobs (first %v), want the 1000 in order", c.query, c.limit, len(jids), jids[:min(3, len(jids))])
		}
	}
	var st ops.BatchStatus
	b.do("GET", "batches/"+got.BID, readToken, nil).ok(t, http.StatusOK, &st)
	if st.Jobs.Total != 1000 || st.Jobs.ByState[queue.Pending] != 1000 || *st.Percent.Jobs != 0 {
		t.Fatalf("status of the 1000-job batch: %+v", st.Jobs)
	}
}

// The list filters by state, batch, profile, local id and ARK; by state
// in the state's queue order (priority first). stalled answers 501 until
// a detector is wired in, and then filters by it.
func TestListJobsFilters(t *testing.T) {
	t.Parallel()
	var stalled string
	b := setup(t)
	b1, b2 := b.batch("uuid-f1", "demo"), b.batch("uuid-f2", "other")
	late := b.job(b1.ID, 7, 0)
	early := b.job(b1.ID, 2, 0)
	other := b.job(b2.ID, 5, 0)
	failed := b.job(b1.ID, 5, 0, queue.Estimating, queue.Failed)
	for q, want := range map[string][]string{
		"state=pending":               {early, other, late},
		"state=failed":                {failed},
		"batch=uuid-f1":               {late, early, failed},
		"batch=" + b2.ID:              {other},
		"profile=other":               {other},
		"local_id=loc-2":              {early},
		"ark=ark:/99999/fk4t3":        {other},
		"state=pending&batch=uuid-f1": {early, late},
	} {
		if got := b.pageAll(q+"&", 10); !slices.Equal(got, want) {
			t.Errorf("?%s: %v, want %v", q, got, want)
		}
	}
	b.do("GET", "jobs?state=nowhere", readToken, nil).problem(t, 400, "invalid", `unknown job state "nowhere"`)
	b.do("GET", "jobs?batch=no-such-uuid", readToken, nil).problem(t, 404, "not-found")
	b.do("GET", "jobs?stat=pending", readToken, nil).problem(t, 400, "invalid", `query parameter "stat"`)
	b.do("GET", "jobs?stalled=true", readToken, nil).problem(t, 501, "not-implemented", "stalled")
	b.do("GET", "jobs?stalled=maybe", readToken, nil).problem(t, 400, "invalid", "stalled")

	hooked := setup(t, func(o *options) { o.stalled = func(j *queue.Job) bool { return j.ID == stalled } })
	hb := hooked.batch("uuid-s", "demo")
	hooked.job(hb.ID, 5, 0)
	stalled = hooked.job(hb.ID, 5, 0)
	if got := hooked.pageAll("stalled=true&", 10); !slices.Equal(got, []string{stalled}) {
		t.Errorf("?stalled=true: %v, want %v", got, stalled)
	}
}

// detail is what the tests read of a job.
type detail struct {
	JID      string
	Status   queue.State
	Priority int
	Locked   bool
	Place    *ops.Place
	ETA      *ops.ETA
	Timeline []events.Event
}

// A job shows every node, its place in its state's queue, its timeline
// from the event stream, and an ETA once the daemon has seen the queue
// move.
func TestJobDetail(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bt := b.batch("uuid-detail", "demo")
	first := b.job(bt.ID, 2, 0)
	var jids []string
	for range 3 {
		jids = append(jids, b.job(bt.ID, 5, 0))
	}
	var d detail
	b.do("GET", "jobs/"+jids[1], readToken, nil).ok(t, http.StatusOK, &d)
	if d.JID != jids[1] || d.Status != queue.Pending || d.Place == nil || *d.Place != (ops.Place{State: queue.Pending, Position: 3, Of: 4}) {
		t.Fatalf("job %+v, place %+v: want 3rd of 4 Pending (the priority-2 job first)", d, d.Place)
	}
	if d.ETA != nil || len(d.Timeline) != 0 {
		t.Fatalf("ETA %+v, timeline %v before anything moved", d.ETA, d.Timeline)
	}
	// The daemon sees jobs leave Pending and go through every later state.
	now := time.Now().UTC()
	prio := 5
	publishBy := func(recoverer, jid string, at time.Duration, from, to queue.State) {
		b.bus.Publish(events.Event{Kind: events.KindJob, JobID: jid, BatchID: bt.ID, From: string(from), To: string(to),
			Time: now.Add(at), Priority: &prio, RecoveredBy: recoverer})
	}
	publish := func(jid string, at time.Duration, from, to queue.State) { publishBy("", jid, at, from, to) }
	path := []queue.State{queue.Pending, queue.Estimating, queue.Provisioning, queue.Downloading, queue.Processing,
		queue.Storing, queue.Recording, queue.Notify, queue.Completed}
	for i, s := range path[1:] {
		publish(first, time.Duration(i)*time.Second, path[i], s) // a second per step
	}
	publish("jid9999999998", time.Second, queue.Pending, queue.Estimating) // Pending drains one a second
	flush(t, b.bus)
	eventually(t, "an ETA", func() bool {
		b.do("GET", "jobs/"+jids[1], readToken, nil).ok(t, http.StatusOK, &d)
		return d.ETA != nil
	})
	// 3rd in Pending at one a second, then 7 steps of a second each.
	if d.ETA.Seconds != 10 || !strings.Contains(d.ETA.Basis, "place 3 in Pending") {
		t.Errorf("ETA %+v, want 10 s", d.ETA)
	}
	// Another job's move to Downloading lost its event with its mover; a
	// later host published it late: the timeline shows it in its place.
	second := jids[0]
	for i, s := range path[1:] {
		if s != queue.Downloading {
			publish(second, time.Duration(i)*time.Second, path[i], s)
		}
	}
	publishBy("host-b", second, 2*time.Second, queue.Provisioning, queue.Downloading)
	flush(t, b.bus)
	b.do("GET", "jobs/"+first, readToken, nil).ok(t, http.StatusOK, &d)
	if len(d.Timeline) != 8 {
		t.Fatalf("timeline of %s: %+v, want its 8 transitions", first, d.Timeline)
	}
	b.do("GET", "jobs/"+second, readToken, nil).ok(t, http.StatusOK, &d)
	var tos []queue.State
	for _, ev := range d.Timeline {
		tos = append(tos, queue.State(ev.To))
	}
	if !slices.Equal(tos, path[1:]) || d.Timeline[2].RecoveredBy != "host-b" {
		t.Fatalf("timeline of %s: %v, want its 8 transitions in order, the recovered one in its place", second, tos)
	}
	b.do("GET", "jobs/jid9999999999", readToken, nil).problem(t, 404, "not-found", "jid9999999999")
	b.do("GET", "jobs/nope", readToken, nil).problem(t, 400, "invalid", `"nope" is not a job id`)
}

// flush waits until every event published is recorded.
func flush(t *testing.T, bus *events.Bus) {
	t.Helper()
	must(t, bus.Flush(t.Context()))
}

// Each action on one job answers its outcome; a refusal is 409 with the
// very message the CLI gives for it, the state machine's for an edge it
// does not have.
func TestJobActionsRefuseAsTheCLIDoes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bt := b.batch("uuid-act", "demo")
	pending := b.job(bt.ID, 5, 0)
	failed := b.job(bt.ID, 5, 0, queue.Estimating, queue.Provisioning, queue.Failed)
	var o ops.Outcome
	b.do("POST", "jobs/"+pending+"/hold", operateToken, nil).ok(t, http.StatusOK, &o)
	if o != (ops.Outcome{ID: pending, Changed: true, State: queue.Held,
		Message: "job " + pending + " held: no daemon takes it until POST /api/v1/jobs/" + pending + "/release"}) {
		t.Fatalf("hold: %+v", o)
	}
	b.do("POST", "jobs/"+failed+"/requeue", operateToken, nil).ok(t, http.StatusOK, &o)
	if o.State != queue.Provisioning || o.Message != "job "+failed+" requeued: it resumes at Provisioning (retry 1)" {
		t.Fatalf("requeue: %+v", o)
	}
	// A job whose last_successful_status is Failed (mrt-zk's requeue writes
	// that) starts over, and the answer says why.
	merritt := b.job(bt.ID, 5, 0, queue.Estimating, queue.Failed)
	_, err := zktest.Connect(t).Set(b.q.Path("/jobs/"+merritt+"/status"), []byte(`{"status":"Failed","last_modified":"2026-11-28 10:00:00 +0000",`+
		`"message":"notify failed","retry_count":1,"last_successful_status":"Failed"}`), -1)
	must(t, err)
	b.do("POST", "jobs/"+merritt+"/requeue", operateToken, nil).ok(t, http.StatusOK, &o)
	if o.State != queue.Pending || !strings.HasSuffix(o.Message, "(retry 2); it starts over: its last_successful_status is Failed "+
		"(as Merritt's requeue writes it), which does not say where it stopped") {
		t.Fatalf("requeue after Merritt's: %+v", o)
	}
	b.do("POST", "jobs/"+failed+"/fail", operateToken, map[string]any{"message": "withdrawn"}).ok(t, http.StatusOK, &o)
	if o.Message != "job "+failed+" is Failed: withdrawn" || b.jobState(failed).Status.Message != "withdrawn" {
		t.Fatalf("fail: %+v", o)
	}
	for _, c := range []struct {
		method, path string
		body         any
		kind         string
		cli          []string
		want         string
	}{
		{"POST", "jobs/" + failed + "/hold", nil, "refused", []string{"hold", "job", failed}, "only a Pending job can be held"},
		{"POST", "jobs/" + pending + "/fail", nil, "illegal-transition", []string{"fail", pending},
			"job " + pending + ": cannot go from Held to Failed (allowed from Held: Pending, Deleted)"},
		{"POST", "jobs/" + pending + "/requeue", nil, "refused", []string{"requeue", pending}, "only a Failed job can be requeued"},
		{"POST", "jobs/" + failed + "/release", nil, "refused", []string{"release", "job", failed}, "there is nothing to release"},
	} {
		// The same refusal; its advice, if any, names the request for the
		// API and the command line for the CLI.
		p := b.do(c.method, c.path, adminToken, c.body).problem(t, 409, c.kind, c.want)
		line := b.cli(c.cli...)
		apiWhy, apiAdvice, _ := strings.Cut(p.Detail, "; ")
		cliWhy, cliAdvice, _ := strings.Cut(line, "; ")
		if apiWhy != cliWhy || (apiAdvice == "") != (cliAdvice == "") || strings.Contains(apiAdvice, "ingestq ") {
			t.Errorf("%s %s: API %q, CLI %q: want the same refusal, each with its own advice", c.method, c.path, p.Detail, line)
		}
	}
	// A job a daemon is working on is refused, saying what would work.
	b.do("POST", "jobs/"+failed+"/requeue", operateToken, nil).ok(t, http.StatusOK, &o)
	lock, err := b.q.LockJob(t.Context(), failed)
	must(t, err)
	// The same refusal; its advice names the request for the API, the
	// command line for the CLI.
	p := b.do("POST", "jobs/"+failed+"/requeue", operateToken, nil).problem(t, 409, "locked", "(no live ingestq host: another program, or a daemon that died) is working on it",
		"POST /api/v1/jobs/"+failed+"/fail")
	apiWhy, _, _ := strings.Cut(p.Detail, ";")
	line := b.cli("requeue", failed)
	if cliWhy, _, _ := strings.Cut(line, ";"); apiWhy != cliWhy || !strings.Contains(line, "`ingestq fail --force "+failed+"`") {
		t.Errorf("locked: API %q, CLI %q", p.Detail, line)
	}
	b.do("POST", "jobs/"+failed+"/fail", adminToken, map[string]any{"force": true, "message": "stop"}).ok(t, http.StatusOK, &o)
	must(t, b.q.UnlockJob(t.Context(), lock))
	b.do("DELETE", "jobs/"+failed+"?purge=true", adminToken, nil).ok(t, http.StatusOK, &o)
	if o.Message != "job "+failed+" removed" {
		t.Fatalf("purge: %+v", o)
	}
	b.do("POST", "jobs/"+failed+"/release", operateToken, nil).problem(t, 404, "not-found", failed)
	b.do("POST", "jobs/jidX/hold", operateToken, nil).problem(t, 400, "invalid", `"jidX" is not a job id`)
	b.do("POST", "jobs/"+pending+"/fail", operateToken, `{"message": 3}`).problem(t, 400, "invalid", "message: given 3; want a string")
	b.do("POST", "jobs/"+pending+"/fail", operateToken, `{"reason": "x"}`).problem(t, 400, "invalid", `unknown field "reason"`)
	b.do("DELETE", "jobs/"+pending+"?purge=perhaps", adminToken, nil).problem(t, 400, "invalid", "purge")
}

// cli runs the CLI on the bundle's queue and returns its error line
// without "ingestq: ".
func (b *bundle) cli(args ...string) string {
	b.t.Helper()
	var out, errb bytes.Buffer
	args = append([]string{"--zk", zktest.Shared(b.t).Addr, "--zk-root", b.root, "--nats", "nats://" + zktest.ClosedAddr(b.t)}, args...)
	if code := cli.Run(b.t.Context(), args, &out, &errb, func(string) string { return "" }); code != 1 {
		b.t.Fatalf("ingestq %v: exit %d, want 1 (stderr %q)", args, code, errb.String())
	}
	return strings.TrimPrefix(strings.TrimSpace(errb.String()), "ingestq: ")
}

// One action on many jobs, listed or by filter, answers an outcome per job:
// one refusal does not stop the others.
func TestBulkActions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bt := b.batch("uuid-bulk", "demo")
	p1, p2 := b.job(bt.ID, 5, 0), b.job(bt.ID, 5, 0)
	failed := b.job(bt.ID, 5, 0, queue.Estimating, queue.Failed)
	other := b.job(b.batch("uuid-bulk-2", "demo").ID, 5, 0)
	type result struct {
		JID     string
		Status  int
		Outcome *ops.Outcome
		Problem *struct{ Type, Detail string }
	}
	var out struct {
		Action            string
		Succeeded, Failed int
		Results           []result
	}
	b.do("POST", "jobs/actions", operateToken, map[string]any{"action": "hold", "jids": []string{p1, failed, "jid9999999999"}}).ok(t, http.StatusOK, &out)
	if out.Succeeded != 1 || out.Failed != 2 || len(out.Results) != 3 ||
		out.Results[0].Status != 200 || out.Results[0].Outcome.State != queue.Held ||
		out.Results[1].Status != 409 || !strings.Contains(out.Results[1].Problem.Detail, "only a Pending job can be held") ||
		out.Results[2].Status != 404 {
		t.Fatalf("bulk hold by jids: %+v", out)
	}
	b.do("POST", "jobs/actions", operateToken, map[string]any{"action": "hold", "filter": map[string]string{"state": "pending", "batch": "uuid-bulk"}}).ok(t, http.StatusOK, &out)
	if out.Succeeded != 1 || out.Failed != 0 || out.Results[0].JID != p2 {
		t.Fatalf("bulk hold by filter: %+v (want only %s: %s is Held, %s in another batch)", out, p2, p1, other)
	}
	if b.jobState(other).State() != queue.Pending {
		t.Fatal("the filter reached another batch's job")
	}
	for _, c := range []struct {
		token string
		body  any
		code  int
		kind  string
		want  string
	}{
		{operateToken, map[string]any{"action": "hold"}, 400, "invalid", "no jobs: give jids, or a filter"},
		{operateToken, map[string]any{"action": "hold", "filter": map[string]string{}}, 400, "invalid", "no jobs"},
		{operateToken, map[string]any{"action": "hold", "jids": []string{p1}, "filter": map[string]string{"state": "held"}}, 400, "invalid", "not both"},
		{operateToken, map[string]any{"action": "explode", "jids": []string{p1}}, 400, "invalid", `action "explode": want one of hold, release, requeue, fail, delete`},
		{operateToken, map[string]any{"action": "hold", "force": true, "jids": []string{p1}}, 400, "invalid", "force and message are for fail"},
		{operateToken, map[string]any{"action": "hold", "filter": map[string]string{"colour": "red"}}, 400, "invalid", `filter "colour"`},
		{operateToken, map[string]any{"action": "delete", "filter": map[string]string{"state": "held"}}, 403, "forbidden", "delete needs admin"},
		{readToken, map[string]any{"action": "hold", "jids": []string{p1}}, 403, "forbidden", "needs operate"},
	} {
		b.do("POST", "jobs/actions", c.token, c.body).problem(t, c.code, c.kind, c.want)
	}
	b.do("POST", "jobs/actions", adminToken, map[string]any{"action": "delete", "filter": map[string]string{"state": "held"}}).ok(t, http.StatusOK, &out)
	if out.Succeeded != 2 || b.jobState(p1).State() != queue.Deleted || b.jobState(p2).State() != queue.Deleted {
		t.Fatalf("bulk delete of the held: %+v", out)
	}
}

// A path no route has is a 404 problem; a method a route does not take,
// a 405 problem with Allow.
func TestUnknownRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.do("GET", "nowhere", readToken, nil).problem(t, 404, "not-found", "no route GET /api/v1/nowhere")
	a := b.do("PATCH", "jobs", readToken, nil)
	a.problem(t, 405, "method-not-allowed", "no route PATCH /api/v1/jobs")
	if !strings.Contains(a.header.Get("Allow"), "GET") {
		t.Errorf("Allow %q, want GET among them", a.header.Get("Allow"))
	}
}

// A job a foreign writer broke is named by its node in the problem (409:
// no fault of this server, and asking again does not mend it) a token
// below admin gets, as ingestq check names it: the node's path is the
// queue's, not the server's (the detail was "[server path hidden]: bad
// JSON …").
func TestBrokenJobNamedToEveryToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	jid := b.job(b.batch("uuid-broken", "demo").ID, 5, 0)
	_, err := zktest.Connect(t).Set(b.q.Path("/jobs/"+jid+"/status"), []byte(`{"status": "Pending", `), -1)
	must(t, err)
	for _, token := range []string{readToken, adminToken} {
		b.do("GET", "jobs/"+jid, token, nil).problem(t, http.StatusConflict, "corrupt", "/jobs/"+jid+"/status: bad JSON")
	}
}

// With ZooKeeper out of reach, the folder a listing could not read is
// named to every token, under the queue's root too: it is the queue's,
// not the server's (a read token was told "list [server path hidden]:
// …"). ZooKeeper gone (a closed connection) names the folder, ZooKeeper
// silent its node under the root.
func TestUnlistedFolderNamedToEveryToken(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		opt  func(*options)
		node func(b *bundle) string
	}{
		{"gone", func(o *options) { o.zkGone = true }, func(*bundle) string { return "list /batches: zk: connection closed" }},
		{"silent", func(o *options) { o.zkSilent = true }, func(b *bundle) string { return "zookeeper list " + b.root + "/batches: no answer" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, c.opt)
			for _, token := range []string{readToken, adminToken} {
				p := b.do("GET", "batches", token, nil).problem(t, http.StatusServiceUnavailable, "unavailable", c.node(b))
				if strings.Contains(p.Detail, serverpath.Hidden) {
					t.Errorf("detail %q hides a path", p.Detail)
				}
			}
		})
	}
}
