package cli_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingestq/ingestq/cmd/ingestq/cli"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/internal/health"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/internal/promtest"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// served is an in-process `ingestq serve` and its HTTP server's URL.
type served struct {
	url  string
	stop func() int      // stops the daemon and returns its exit code
	log  *logtest.Buffer // its stdout and stderr
}

// serve runs `ingestq serve` in-process on the ZooKeeper at zk, under root,
// with an embedded NATS that listens nowhere outside and an HTTP server on
// a free port, until the test ends. Only --space-margin holds a job back
// (--max-fill 1): the tests pass on a disk past 80 % (as CI's was).
func serve(t *testing.T, zk, root string, args ...string) served {
	t.Helper()
	return serveEnv(t, nil, zk, root, args...)
}

// serveEnv is serve with env as its environment.
func serveEnv(t *testing.T, env map[string]string, zk, root string, args ...string) served {
	t.Helper()
	log := &logtest.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan int, 1)
	argv := append([]string{"--zk", zk, "--zk-root", root, "serve", "--data-dir", t.TempDir(),
		"--nats-listen", "off", "--http", "127.0.0.1:0", "--max-fill", "1",
		"--fetch-allow", "127.0.0.0/8"}, args...) // the tests' payloads are on this host
	go func() { exited <- cli.Run(ctx, argv, log, log, func(k string) string { return env[k] }) }()
	stop := sync.OnceValue(func() int { cancel(); return <-exited })
	t.Cleanup(func() {
		if code := stop(); code != 0 || t.Failed() {
			t.Errorf("serve exited %d; its log:\n%s", code, log.String())
		}
	})
	line := log.WaitFor(t, "ingestq: serving")
	url := regexp.MustCompile(`http=(https?://\S+)`).FindStringSubmatch(line)
	if url == nil {
		t.Fatalf("no http=URL in %q", line)
	}
	log.WaitFor(t, "reactor: running")
	return served{url: url[1], stop: stop, log: log}
}

// readyz GETs /readyz and decodes its report.
func readyz(t *testing.T, base string) (int, health.Report) {
	t.Helper()
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep health.Report
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatalf("/readyz: %v", err)
	}
	return resp.StatusCode, rep
}

// waitReady polls /readyz until it answers code (there is no event to
// wait on: it reads the daemon's connections when asked).
func waitReady(t *testing.T, base string, code int) health.Report {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		got, rep := readyz(t, base)
		if got == code {
			return rep
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still answers %d (%+v), want %d", got, rep, code)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// zkCounts counts the jobs in each state folder by profile, as ZooKeeper
// lists them: "state=completed,profile=demo".
func zkCounts(t *testing.T, q *queue.Queue) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, s := range queue.JobMachine.States {
		jobs, problems, err := q.ListJobs(t.Context(), s)
		if err != nil || len(problems) > 0 {
			t.Fatalf("list %s: %v %v", s, err, problems)
		}
		for _, j := range jobs {
			out["state="+s.Folder()+",profile="+j.Profile()]++
		}
	}
	return out
}

// An end-to-end run of the ingest pipeline (the demo deposit: three objects
// stored, one failing on its digest): /metrics, scraped over HTTP, agrees
// with the counts in ZooKeeper, counts every step and transition, and the
// bytes downloaded and stored. /readyz names each back end; it goes
// not-ready when ZooKeeper stops (while /healthz and /metrics still answer)
// and ready when ZooKeeper is back. Requests are counted by route.
func TestMetricsAndHealthEndToEnd(t *testing.T) {
	t.Parallel()
	srv := zktest.OwnServer(t)
	const root = "/ingestq"
	data := t.TempDir()
	nats := closedAddr(t)
	d := serve(t, srv.Addr, root, "--data-dir", data, "--zk-session-timeout", "30s", "--nats-listen", nats)
	q, err := queue.New(zktest.Connect(t, srv.Addr), root)
	if err != nil {
		t.Fatal(err)
	}
	web := demoWeb(t)

	out, _, code := runEnv(t, nil, "--zk", srv.Addr, "--zk-root", root, "--nats", "nats://"+nats,
		"submit", "--profile", "demo", "--wait", web.URL+"/batch.checkm")
	wantCode(t, code, 1) // the sample's wrong digest fails one job, so the batch
	bid := strings.SplitN(out, "\n", 2)[0]

	m := promtest.Scrape(t, d.url+"/metrics")
	inZK := zkCounts(t, q)
	if got := nonZero(m.Values("ingestq_jobs", "state", "profile")); !promtest.Equal(got, inZK) {
		t.Errorf("ingestq_jobs %v, ZooKeeper %v", got, inZK)
	}
	if inZK["state=completed,profile=demo"] != 3 || inZK["state=failed,profile=demo"] != 1 {
		t.Errorf("ZooKeeper lists %v, want 3 completed and 1 failed", inZK)
	}
	moves := m.Values("ingestq_transitions_total", "kind", "state", "outcome")
	for k, want := range map[string]float64{
		"kind=job,state=pending,outcome=estimating":      4,
		"kind=job,state=downloading,outcome=processing":  3,
		"kind=job,state=downloading,outcome=failed":      1,
		"kind=job,state=notify,outcome=completed":        3,
		"kind=batch,state=pending,outcome=processing":    1,
		"kind=batch,state=reporting,outcome=failed":      1,
		"kind=batch,state=processing,outcome=reporting":  0, // the reporter takes it from Processing in one step
		"kind=job,state=downloading,outcome=abandoned":   0,
		"kind=job,state=downloading,outcome=unknown":     0,
		"kind=job,state=recording,outcome=not_committed": 0,
	} {
		if moves[k] != want {
			t.Errorf("ingestq_transitions_total{%s} = %v, want %v (all: %v)", k, moves[k], want, moves)
		}
	}
	steps := m.Values("ingestq_step_duration_seconds", "state", "result")
	for _, s := range []string{"estimating", "provisioning", "downloading"} {
		if steps["state="+s+",result=done"]+steps["state="+s+",result=failed"] != 4 {
			t.Errorf("steps of %s: %v, want 4 runs", s, steps)
		}
	}
	if steps["state=notify,result=done"] != 3 || steps["state=downloading,result=failed"] != 1 {
		t.Errorf("step runs %v: want 3 notified, 1 failed in downloading", steps)
	}
	// Every file of testdata/demo/files once, and the failing object's file
	// (another object's letter, with a wrong digest) once more.
	if got := m.Values("ingestq_downloaded_bytes_total")[""]; got != 193+165+46+300000+101+633+165 {
		t.Errorf("ingestq_downloaded_bytes_total %v, want %v", got, 193+165+46+300000+101+633+165)
	}
	stored := m.Values("ingestq_stored_bytes_total")[""]
	if m.Values("ingestq_events_lost_total")[""] != 0 || m.Values("ingestq_events_published_total")[""] == 0 ||
		m.Values("ingestq_nats_connected")[""] != 1 || m.Values("ingestq_zookeeper_connected")[""] != 1 ||
		!promtest.Equal(m.Values("ingestq_events_resent_at_election_total"), map[string]float64{"": 0}) ||
		!promtest.Equal(m.Values("ingestq_events_parked"), map[string]float64{"": 0}) ||
		!promtest.Equal(m.Values("ingestq_events_superseded_total"), map[string]float64{"": 0}) {
		t.Errorf("events (lost, published, resent at a leader election, parked, superseded), NATS, ZooKeeper: %v %v %v %v %v %v %v",
			m.Values("ingestq_events_lost_total"), m.Values("ingestq_events_published_total"),
			m.Values("ingestq_events_resent_at_election_total"), m.Values("ingestq_events_parked"),
			m.Values("ingestq_events_superseded_total"), m.Values("ingestq_nats_connected"), m.Values("ingestq_zookeeper_connected"))
	}

	code, rep := readyz(t, d.url)
	if code != http.StatusOK || len(rep.Checks) != 5 {
		t.Fatalf("/readyz %d %+v: want 200 with zookeeper, nats, work, storage and inventory", code, rep)
	}
	heap, err := http.Get(d.url + "/debug/pprof/heap?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(heap.Body)
	heap.Body.Close()
	if heap.StatusCode != http.StatusOK || !strings.Contains(string(body), "heap profile:") {
		t.Errorf("/debug/pprof/heap: %d %.80q, want 200 and a heap profile", heap.StatusCode, body)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	rep = waitReady(t, d.url, http.StatusServiceUnavailable)
	for _, c := range rep.Checks {
		if c.OK == (c.Name == "zookeeper") {
			t.Errorf("/readyz with ZooKeeper stopped: %+v, want only zookeeper failing", rep.Checks)
		}
	}
	resp, err := http.Get(d.url + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz with ZooKeeper stopped: %v %v, want 200", resp, err)
	}
	resp.Body.Close()
	m = promtest.Scrape(t, d.url+"/metrics")
	if m.Values("ingestq_zookeeper_connected")[""] != 0 || len(m.Values("ingestq_jobs")) != 0 {
		t.Errorf("with ZooKeeper stopped: connected %v, jobs %v; want 0 and the queue left out",
			m.Values("ingestq_zookeeper_connected"), m.Values("ingestq_jobs"))
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, d.url, http.StatusOK)

	reqs := promtest.Scrape(t, d.url+"/metrics").Values("ingestq_http_requests_total", "route", "code")
	if reqs["route=GET /readyz,code=503"] < 1 || reqs["route=GET /readyz,code=200"] < 2 || reqs["route=GET /metrics,code=200"] < 2 ||
		reqs["route=GET /healthz,code=200"] != 1 {
		t.Errorf("ingestq_http_requests_total %v", reqs)
	}

	// Stored: each stored version's files, once (one storage target).
	b, err := q.LoadBatch(t.Context(), bid)
	if err != nil {
		t.Fatal(err)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("serve exited %d", code)
	}
	inv, err := inventory.OpenLocal(filepath.Join(data, "inventory.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer inv.Close()
	var want int64
	for _, ids := range b.Report.SuccessfulJobs {
		j, err := q.LoadJob(t.Context(), ids)
		if err != nil {
			t.Fatal(err)
		}
		obj, err := inv.Object(t.Context(), j.Identifiers.PrimaryID)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range obj.Versions[0].Files {
			want += f.Size
		}
	}
	if stored != float64(want) || want == 0 {
		t.Errorf("ingestq_stored_bytes_total %v, want %d (the stored versions' files)", stored, want)
	}
}

// A daemon that does not work Storing leaves a batch's jobs there: past
// --stalled-after, `ls jobs --stalled` lists each with why (no consumer of
// Storing), `show` says so, and ingestq_stalled_jobs counts them; within
// the threshold nothing is flagged. A bad threshold is a usage error.
func TestStalledJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	d := serve(t, zktest.Shared(t).Addr, e.root, "--pipeline", "passthrough", "--stalled-after", "1h,storing=1ms",
		"--states", "intake,reporting,pending,estimating,provisioning,downloading,processing,recording,notify")
	const n = 5
	_, err := e.q.CreateBatch(t.Context(), queue.SubmissionOf(map[string]any{"profile_name": "demo", "payload_url": "passthrough:5"}))
	e.ok(err)

	// Poll: a job counts as stalled a moment after it enters Storing.
	var m promtest.Families
	deadline := time.Now().Add(time.Minute)
	for {
		m = promtest.Scrape(t, d.url+"/metrics")
		if m.Values("ingestq_stalled_jobs", "state")["state=storing"] == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ingestq_stalled_jobs %v, want %d in storing", m.Values("ingestq_stalled_jobs", "state"), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := nonZero(m.Values("ingestq_jobs", "state", "profile")); !promtest.Equal(got, map[string]float64{"state=storing,profile=demo": n}) {
		t.Errorf("ingestq_jobs %v, want %d in storing", got, n)
	}
	for s, v := range m.Values("ingestq_stalled_jobs", "state") {
		if s != "state=storing" && v != 0 {
			t.Errorf("ingestq_stalled_jobs{%s} = %v, want 0", s, v)
		}
	}
	if age := m.Values("ingestq_oldest_job_age_seconds", "state"); age["state=storing"] <= 0 || age["state=pending"] != 0 {
		t.Errorf("ingestq_oldest_job_age_seconds %v: want an age in storing, 0 in pending", age)
	}

	out, _, code := e.run("ls", "jobs", "--stalled", "--stalled-after", "1h,storing=1ms")
	wantCode(t, code, 0)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != n+1 || !strings.Contains(lines[0], "REASON") {
		t.Fatalf("ls jobs --stalled: %d lines, want a header and %d jobs:\n%s", len(lines), n, out)
	}
	for _, l := range lines[1:] {
		if !strings.Contains(l, "Storing") || !strings.Contains(l, "no_consumer") ||
			!strings.Contains(l, "no consumer of state Storing is running") {
			t.Errorf("line %q: want Storing, no_consumer and the reason", l)
		}
	}
	out, _, code = e.run("ls", "jobs", "--stalled", "--stalled-after", "1h,storing=1ms", "-o", "json")
	wantCode(t, code, 0)
	var rows []struct {
		JID, BID, State, Kind, Reason, Profile, For string
		Since                                       time.Time
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != n {
		t.Fatalf("ls jobs --stalled -o json: %v, %d rows:\n%s", err, len(rows), out)
	}
	r := rows[0]
	if r.State != "Storing" || r.Kind != "no_consumer" || r.Profile != "demo" || r.Since.IsZero() || r.For == "" {
		t.Errorf("row %+v", r)
	}
	out, _, code = e.run("show", r.JID, "--stalled-after", "1h,storing=1ms")
	wantCode(t, code, 0)
	if !regexp.MustCompile(`(?m)^stalled: +\S+ in Storing: no consumer of state Storing is running`).MatchString(out) {
		t.Errorf("show %s does not say it is stalled, and why:\n%s", r.JID, out)
	}

	// Within the (default) thresholds: nothing is stalled.
	out, _, code = e.run("ls", "jobs", "--stalled")
	wantCode(t, code, 0)
	if out != "no stalled jobs\n" {
		t.Errorf("ls jobs --stalled with the defaults lists:\n%s", out)
	}
	out, _, code = e.run("ls", "jobs", "--stalled", "-o", "json")
	wantCode(t, code, 0)
	if out != "[]\n" {
		t.Errorf("ls jobs --stalled -o json with the defaults: %q, want []", out)
	}
	out, _, code = e.run("show", r.JID)
	wantCode(t, code, 0)
	if !regexp.MustCompile(`(?m)^stalled: +-$`).MatchString(out) {
		t.Errorf("show %s with the defaults:\n%s", r.JID, out)
	}
	_, stderr, code := e.run("ls", "jobs", "--stalled", "--stalled-after", "storing=soon")
	wantCode(t, code, 2)
	wantErrLine(t, stderr, "--stalled-after", `"storing=soon"`, "positive duration")
	_, stderr, code = runEnv(t, nil, "--zk", zktest.Shared(t).Addr, "--zk-root", e.root, "serve", "--stalled-after", "shipping=1h")
	wantCode(t, code, 2)
	wantErrLine(t, stderr, "--stalled-after", `no job state "shipping"`)
}

// nonZero is a metric's series without the zero ones (ingestq_jobs has one
// for every state, decision 251).
func nonZero(series map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range series {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}
