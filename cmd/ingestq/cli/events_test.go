package cli_test

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ingestq/ingestq/cmd/ingestq/cli"
	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

var jobTimeline = []string{"Pending → Estimating", "Estimating → Provisioning", "Provisioning → Downloading",
	"Downloading → Processing", "Processing → Storing", "Storing → Recording", "Recording → Notify", "Notify → Completed"}

// lineRE is a job's event line in a replay, with its date.
var lineRE = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d\d\d test  job (jid\d+) \((bid\d+)\)  (\w+ → \w+)  priority=5$`)

func parseEvents(t *testing.T, out string) []events.Event {
	t.Helper()
	var evs []events.Event
	if err := json.Unmarshal([]byte(out), &evs); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	return evs
}

// ingested starts a daemon and submits to it a batch of n pass-through
// jobs, waiting until the batch is done: the events replays read.
func ingested(t *testing.T, n int) (*daemon, *queue.Batch) {
	t.Helper()
	d := newDaemon(t)
	d.start()
	_, _, code := d.cli("submit", "--profile", "demo", "--wait", "passthrough:"+strconv.Itoa(n))
	wantCode(t, code, 0)
	return d, d.onlyBatch()
}

func TestEventsReplay(t *testing.T) {
	t.Parallel()
	d, b := ingested(t, 5)
	d.flush()

	// Text, by batch: one timeline, in the order things happened: the
	// submission and the batch's moves among its jobs'.
	out, _, code := d.cli("events", "replay", "--batch", b.ID)
	wantCode(t, code, 0)
	if strings.Contains(out, "\n\n") {
		t.Errorf("--batch text has blank lines:\n%s", out)
	}
	var batchSteps []string
	jobSteps := map[string][]string{}
	var last string
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if stamp := l[:len("2006-01-02 15:04:05.000")]; stamp < last {
			t.Errorf("line %q before the line above in time", l)
		} else {
			last = stamp
		}
		if m := lineRE.FindStringSubmatch(l); m != nil && m[2] == b.ID {
			jobSteps[m[1]] = append(jobSteps[m[1]], m[3])
			continue
		}
		_, step, ok := strings.Cut(l, "  batch "+b.ID+"  ")
		if !ok {
			t.Fatalf("not a line of batch %s or its jobs: %q", b.ID, l)
		}
		step, _, _ = strings.Cut(step, "  ")
		batchSteps = append(batchSteps, step)
	}
	if want := []string{"→ Pending", "Pending → Processing", "Processing → Reporting", "Reporting → Completed"}; !slices.Equal(batchSteps, want) {
		t.Errorf("batch timeline %q, want %q", batchSteps, want)
	}
	jids := map[string]bool{}
	for jid, steps := range jobSteps {
		if !slices.Equal(steps, jobTimeline) {
			t.Errorf("%s timeline %q, want %q", jid, steps, jobTimeline)
		}
		jids[jid] = true
	}
	if len(jids) != 5 {
		t.Errorf("%d jobs, want 5", len(jids))
	}

	// -o json, the batch by its uuid: the same events, in the same order.
	out, _, code = d.cli("events", "replay", "-o", "json", "--batch", b.UUID())
	wantCode(t, code, 0)
	evs := parseEvents(t, out)
	if len(evs) != 4+5*8 {
		t.Fatalf("%d events, want 44", len(evs))
	}
	byJob := map[string][]string{}
	for i, ev := range evs {
		if ev.BatchID != b.ID {
			t.Fatalf("--batch %s replays %+v", b.UUID(), ev)
		}
		if i > 0 && ev.Time.Before(evs[i-1].Time) {
			t.Errorf("-o json: event %d (%s) before event %d in time", i, ev.Time, i-1)
		}
		if ev.Kind == events.KindJob {
			byJob[ev.JobID] = append(byJob[ev.JobID], ev.From+" → "+ev.To)
		}
	}
	for jid, steps := range byJob {
		if !slices.Equal(steps, jobTimeline) || !jids[jid] {
			t.Errorf("-o json: %s timeline %q", jid, steps)
		}
	}
	if sub := evs[0]; sub.Kind != events.KindBatch || sub.To != "Pending" || !strings.HasPrefix(sub.ID, b.ID+".pending.") || sub.Actor == "" {
		t.Errorf("the submission's event: %+v", sub)
	}

	// --job: that job's timeline only.
	jid := b.Report.SuccessfulJobs[2]
	out, _, code = d.cli("events", "replay", "-o", "json", "--job", jid)
	wantCode(t, code, 0)
	evs = parseEvents(t, out)
	var steps []string
	for _, ev := range evs {
		if ev.JobID != jid || ev.Kind != events.KindJob {
			t.Fatalf("--job %s replays %+v", jid, ev)
		}
		steps = append(steps, ev.From+" → "+ev.To)
	}
	if !slices.Equal(steps, jobTimeline) {
		t.Errorf("--job %s: %q", jid, steps)
	}
	out, _, code = d.cli("events", "replay", "--job", jid)
	wantCode(t, code, 0)
	if n := strings.Count(out, "\n"); n != 8 || strings.Contains(out, "\n\n") {
		t.Errorf("--job text: %d lines, want 8:\n%s", n, out)
	}

	// --since: a duration back, a time in the future, a bad value.
	out, _, code = d.cli("events", "replay", "-o", "json", "--since", "10m")
	wantCode(t, code, 0)
	if n := len(parseEvents(t, out)); n != 44 {
		t.Errorf("--since 10m: %d events, want 44", n)
	}
	future := time.Now().Add(time.Hour)
	out, _, code = d.cli("events", "replay", "-o", "json", "--since", future.Format(time.RFC3339))
	wantCode(t, code, 0)
	if n := len(parseEvents(t, out)); n != 0 {
		t.Errorf("--since in the future: %d events", n)
	}
	// Nothing to print is said as an empty ls says it (`no stalled jobs`), not logged.
	out, stderr, code := d.cli("events", "replay", "--batch", b.ID, "--since", future.Format(time.DateTime))
	wantCode(t, code, 0)
	if out != "no recorded events match\n" || stderr != "" {
		t.Errorf("--since in the future, text: %q, stderr %q; want \"no recorded events match\", nothing on stderr", out, stderr)
	}
	_, stderr, code = d.cli("events", "replay", "--since", "yesterday")
	wantCode(t, code, 2)
	wantErrLine(t, stderr, `"yesterday"`, "duration")

	// A batch or job this queue never made (a mistyped id) is refused, as
	// the API's events answer 404, not replayed as nothing.
	for _, c := range [][]string{{"--batch", "bid0000009999"}, {"--job", "jid0000009999"}, {"-o", "json", "--job", "jid0000009999"}} {
		out, stderr, code = d.cli(append([]string{"events", "replay"}, c...)...)
		wantCode(t, code, 1)
		wantErrLine(t, stderr, c[len(c)-1], "this queue has not made it")
		if out != "" {
			t.Errorf("events replay %v printed %q", c, out)
		}
	}
}

// A text replay prints each run of a job's progress events as its last
// (a batch of 20 downloads of 1 MB printed 861 progress lines of 1,025):
// a wait's progress event, a batch's own, and the run another host
// began after taking the download over are printed; --progress prints
// every one, -o json has every one.
func TestReplayPrintsAProgressRunAsItsLast(t *testing.T) {
	t.Parallel()
	d, b := ingested(t, 2)
	j1, j2 := b.Report.SuccessfulJobs[0], b.Report.SuccessfulJobs[1]
	progress := func(jid, host string, n int) {
		d.bus.Publish(events.Event{Kind: events.KindProgress, BatchID: b.ID, JobID: jid, Host: host, To: "Downloading",
			Attrs: map[string]any{"bytes_done": n, "bytes_total": 100}})
	}
	wait := func(jid string) {
		d.bus.Publish(events.Event{Kind: events.KindProgress, BatchID: b.ID, JobID: jid, To: "Downloading",
			Message: "waiting for room", Attrs: map[string]any{"waiting": true}})
	}
	for n := 1; n <= 4; n++ { // two jobs' downloads at once
		progress(j1, "test", n)
		progress(j2, "test", n)
	}
	wait(j1)
	progress(j1, "test", 5)
	progress(j1, "test", 6)
	progress(j1, "other", 1) // the other host took the download over
	progress(j1, "other", 2)
	progress(j1, "other", 3)
	wait("") // the batch's own, twice
	wait("")
	d.flush()

	// progressLines are a text replay's progress lines, each as "HOST
	// JID bytes_done" ("batch" for the batch's, "waiting" for a wait's).
	progressRE := regexp.MustCompile(`^[\d-]+ [\d:.]+ (\S+)  progress (jid\d+|batch) `)
	progressLines := func(out string) []string {
		var got []string
		for _, l := range strings.Split(out, "\n") {
			m := progressRE.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			n := "waiting"
			if _, v, ok := strings.Cut(l, "bytes_done="); ok {
				n, _, _ = strings.Cut(v, " ")
			}
			got = append(got, m[1]+" "+m[2]+" "+n)
		}
		return got
	}
	want := []string{"test " + j1 + " 4", "test " + j2 + " 4", "test " + j1 + " waiting", "test " + j1 + " 6",
		"other " + j1 + " 3", "test batch waiting", "test batch waiting"}
	out, stderr, code := d.cli("events", "replay", "--batch", b.ID)
	wantCode(t, code, 0)
	if got := progressLines(out); !slices.Equal(got, want) {
		t.Errorf("--batch: progress lines %q, want %q\n%s", got, want, out)
	}
	if !strings.Contains(stderr, "note: 9 progress events not printed") || !strings.Contains(stderr, "--progress") {
		t.Errorf("--batch: stderr %q, want a note of the 9 progress events not printed", stderr)
	}
	moves := 0
	for _, l := range strings.Split(out, "\n") {
		if lineRE.MatchString(l) {
			moves++
		}
	}
	if moves != 2*len(jobTimeline) {
		t.Errorf("--batch: %d job moves printed, want %d:\n%s", moves, 2*len(jobTimeline), out)
	}

	out, _, code = d.cli("events", "replay", "--job", j1)
	wantCode(t, code, 0)
	if got, want := progressLines(out), []string{"test " + j1 + " 4", "test " + j1 + " waiting", "test " + j1 + " 6", "other " + j1 + " 3"}; !slices.Equal(got, want) {
		t.Errorf("--job: progress lines %q, want %q", got, want)
	}

	out, stderr, code = d.cli("events", "replay", "--batch", b.ID, "--progress")
	wantCode(t, code, 0)
	if got := progressLines(out); len(got) != 16 || stderr != "" {
		t.Errorf("--progress: %d progress lines %q, stderr %q; want all 16, nothing on stderr", len(got), got, stderr)
	}

	out, _, code = d.cli("events", "replay", "-o", "json", "--batch", b.ID)
	wantCode(t, code, 0)
	n := 0
	for _, ev := range parseEvents(t, out) {
		if ev.Kind == events.KindProgress {
			n++
		}
	}
	if n != 16 {
		t.Errorf("-o json: %d progress events, want all 16", n)
	}
}

func TestEventsNoNATS(t *testing.T) {
	t.Parallel()
	url := "nats://" + closedAddr(t)
	for _, args := range [][]string{{"events", "tail"}, {"events", "replay", "--batch", "bid0000000001"}} {
		_, stderr, code := runEnv(t, nil, append([]string{"--zk", zktest.Shared(t).Addr, "--nats", url}, args...)...)
		wantCode(t, code, 1)
		wantErrLine(t, stderr, url, "not reachable")
	}
	for _, c := range []struct{ args, want []string }{
		{[]string{"events"}, []string{"replay, tail"}},
		{[]string{"events", "tail", "a", "b"}, []string{`unexpected argument "b"`}},
		{[]string{"events", "replay", "--since", "-5m"}, []string{`"-5m"`}},
		// A malformed id, as the API's 400, not an empty replay (exit 0).
		{[]string{"events", "replay", "--job", "bogus"}, []string{`--job: "bogus" is not a job id`}},
		{[]string{"events", "replay", "--access", "medium/qid1"}, []string{`--access: "medium/qid1" is not an access request`}},
		{[]string{"events", "tail", "job.>"}, []string{`"job.>"`, "starts with ingestq."}},
	} {
		_, stderr, code := runEnv(t, nil, append([]string{"--zk", "127.0.0.1:1", "--nats", url}, c.args...)...)
		wantCode(t, code, 2)
		wantErrLine(t, stderr, c.want...)
	}
}

// tail runs `events tail` until an event published while it runs shows,
// and returns its output and its stderr.
func tail(t *testing.T, d *daemon, ev events.Event, args ...string) (string, string) {
	t.Helper()
	var out, errb logtest.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	args = append([]string{"--nats", d.bus.ClientURL(), "events", "tail"}, args...)
	go func() { done <- cli.Run(ctx, args, &out, &errb, func(string) string { return "" }) }()

	// tail cannot say when it listens: publish until the event shows.
	deadline := time.After(20 * time.Second)
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for !strings.Contains(out.String(), ev.JobID) {
		d.bus.Publish(ev)
		select {
		case <-poll.C:
		case code := <-done:
			t.Fatalf("tail ended (exit %d) before the event: %s", code, errb.String())
		case <-deadline:
			t.Fatalf("tail printed no event; stdout %q, stderr %q", out.String(), errb.String())
		}
	}
	cancel()
	select {
	case code := <-done:
		wantCode(t, code, 0)
	case <-time.After(20 * time.Second):
		t.Fatal("tail did not end on cancel")
	}
	return out.String(), errb.String()
}

func TestEventsTail(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	prio := 5
	ev := events.Event{Kind: events.KindJob, JobID: "jid0000000042", BatchID: "bid0000000007",
		From: "Downloading", To: "Processing", Priority: &prio, Message: "hello\nthere\x1b[2J\u202e"}
	out, stderr := tail(t, d, ev)
	// Before any event, one line says what it waits for.
	if want := "note: waiting for events on ingestq.> from " + d.bus.ClientURL() + "; each is printed as it comes (Ctrl-C stops)\n"; stderr != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
	first, _, _ := strings.Cut(out, "\n")
	// A message's controls (a foreign writer's) are shown as escapes.
	want := regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d\d\d test  job jid0000000042 \(bid0000000007\)  Downloading → Processing  \[hello there\\u001b\[2J\\u202e\]  priority=5$`)
	if !want.MatchString(first) {
		t.Errorf("tail line %q", first)
	}

	// -o json, on a narrower subject: one event a line.
	ev.JobID = "jid0000000043"
	out, stderr = tail(t, d, ev, "-o", "json", "ingestq.job.processing.*")
	if stderr != "" {
		t.Errorf("tail -o json: stderr %q", stderr)
	}
	first, _, _ = strings.Cut(out, "\n")
	var got events.Event
	if err := json.Unmarshal([]byte(first), &got); err != nil || got.JobID != ev.JobID || got.To != "Processing" || got.Host != "test" ||
		got.Message != ev.Message || !strings.Contains(first, `\u202e`) {
		t.Errorf("tail -o json line %q (%v)", first, err)
	}
}

func TestAdminEvents(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	nc, err := nats.Connect(d.bus.ClientURL())
	d.ok(err)
	t.Cleanup(nc.Close)
	sub, err := nc.SubscribeSync("ingestq.admin.>")
	d.ok(err)
	d.ok(nc.Flush())
	next := func() (string, events.Event) {
		t.Helper()
		m, err := sub.NextMsg(20 * time.Second)
		d.ok(err)
		var ev events.Event
		d.ok(json.Unmarshal(m.Data, &ev))
		return m.Subject, ev
	}

	out, stderr, code := d.cli("hold", "queue")
	wantCode(t, code, 0)
	if out != "queue ingest held: no new step of any batch or job starts (steps under way finish) until `ingestq release queue`\n" || stderr != "" {
		t.Errorf("hold queue: %q, stderr %q", out, stderr)
	}
	subject, ev := next()
	if subject != "ingestq.admin.hold" || ev.Kind != events.KindAdmin || ev.To != "hold" || ev.Attrs["queue"] != "ingest" ||
		ev.ID == "" || ev.Time.IsZero() || ev.Message != "queue ingest held" || ev.Actor == "" {
		t.Errorf("%s: %+v", subject, ev)
	}

	bid := d.batch("uuid-admin", "demo")
	jid := d.job(bid, 5, "demo")
	_, _, code = d.cli("hold", "job", jid)
	wantCode(t, code, 0)
	if subject, ev = next(); subject != "ingestq.admin.hold" || ev.JobID != jid || ev.BatchID != bid {
		t.Errorf("%s: %+v", subject, ev)
	}
	_, _, code = d.cli("release", "batch", "uuid-admin")
	wantCode(t, code, 0) // Pending, not Held: nothing done, and nothing announced
	_, _, code = d.cli("report", bid)
	wantCode(t, code, 1)
	_, _, code = d.cli("release", "job", jid)
	wantCode(t, code, 0)
	if subject, ev = next(); subject != "ingestq.admin.release" || ev.JobID != jid {
		t.Errorf("%s: %+v", subject, ev)
	}

	// The admin events are recorded, and read like this.
	d.flush()
	out, _, code = d.cli("events", "replay")
	wantCode(t, code, 0)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	by := "  by " + ev.Actor
	wants := []string{"admin hold queue ingest" + by + "  [queue ingest held]",
		"job " + jid + " (" + bid + ")  Pending → Held" + by + "  priority=5 action=hold", "admin hold job " + jid + " (" + bid + ")" + by,
		"job " + jid + " (" + bid + ")  Held → Pending" + by + "  priority=5 action=release", "admin release job " + jid + " (" + bid + ")" + by}
	if len(lines) != len(wants) {
		t.Fatalf("replay:\n%s", out)
	}
	for i, w := range wants {
		if !strings.HasSuffix(lines[i], "  "+w) {
			t.Errorf("line %q, want it to end with %q", lines[i], w)
		}
	}

	// No NATS: the change is made all the same (exit 0: ZooKeeper is the
	// truth), and stderr says its event is not recorded, naming the NATS
	// tried and how to name the daemon's.
	url := "nats://" + closedAddr(t)
	out, stderr, code = runEnv(t, map[string]string{"USER": "alice"}, "--zk", zktest.Shared(t).Addr, "--zk-root", d.root,
		"--nats", url, "release", "queue")
	wantCode(t, code, 0)
	if out != "queue ingest released: daemons start new steps again\n" {
		t.Errorf("release queue without NATS: %q", out)
	}
	if lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n"); len(lines) != 1 || !strings.Contains(stderr, "WRN") ||
		!strings.Contains(stderr, "not recorded") || !strings.Contains(stderr, url) || !strings.Contains(stderr, "--nats") || !strings.Contains(stderr, cli.EnvNATS) {
		t.Errorf("stderr %q: want one warning that the event is not recorded, naming %s and --nats", stderr, url)
	}
	held, err := d.q.QueueHeld(t.Context(), "ingest")
	d.ok(err)
	if held {
		t.Error("queue still held")
	}
	// A submission's event alone is not an operator's: no warning.
	d.publishDemo()
	_, stderr, code = d.run("--nats", url, "submit", "--profile", "demo", "passthrough:1")
	wantCode(t, code, 0)
	if stderr != "" {
		t.Errorf("submit without NATS: stderr %q", stderr)
	}
}

// An operator's moves are published once, by the CLI, under the arrival
// ID a daemon looks up (decisions 131, 222): the daemon that reports a
// cancelled batch, or moves a requeued job on, finds them and publishes no
// "recovered" copy. They name their actor, as the admin events do. A
// batch's replay is in the order things happened, and its report event
// gives counts, not the lengths of lists ("objects=0").
func TestAdminMovesRecordedOnce(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	cancelled := d.batch("uuid-cancelled", "demo")
	d.moveBatch(cancelled, queue.Processing)
	j1 := d.job(cancelled, 5, "demo")
	d.moveJob(j1, "", queue.Estimating, queue.Provisioning, queue.Downloading)
	requeued := d.batch("uuid-requeued", "demo")
	d.moveBatch(requeued, queue.Processing)
	rb, err := d.q.LoadBatch(t.Context(), requeued)
	d.ok(err)
	j, err := d.q.CreateJob(t.Context(), rb, queue.JobSpec{Priority: 5, // a job the pass-through daemon takes
		Config: queue.JobConfig{Profile: "demo", PayloadURL: reactor.PassThroughScheme + "1"}})
	d.ok(err)
	j2 := j.ID
	d.moveJob(j2, "", queue.Estimating, queue.Provisioning, queue.Downloading)
	d.moveJob(j2, "gone", queue.Failed)

	as := func(args ...string) {
		t.Helper()
		_, stderr, code := runEnv(t, map[string]string{"USER": "alice"},
			append([]string{"--zk", zktest.Shared(t).Addr, "--zk-root", d.root, "--nats", d.bus.ClientURL()}, args...)...)
		wantCode(t, code, 0)
		if stderr != "" {
			t.Errorf("%v: stderr %q", args, stderr)
		}
	}
	as("cancel", cancelled)
	as("requeue", j2)
	j1Failed, err := d.q.LoadJob(t.Context(), j1)
	d.ok(err)

	// The daemon starts now: it reports the cancelled batch (checking its
	// job's end) and moves the requeued job on (checking its arrival).
	reported := make(chan string, 4)
	unsub, err := d.bus.Subscribe("ingestq.batch.>", func(ev events.Event) {
		if ev.To == string(queue.Completed) || ev.To == string(queue.Failed) {
			reported <- ev.BatchID
		}
	})
	d.ok(err)
	defer unsub()
	d.start()
	for left := map[string]bool{cancelled: true, requeued: true}; len(left) > 0; {
		select {
		case bid := <-reported:
			delete(left, bid)
		case <-time.After(30 * time.Second):
			t.Fatalf("batches %v did not report; job %s is %s, job %s is %s", left, j1, d.jobState(j1), j2, d.jobState(j2))
		}
	}
	d.flush()

	replay := func(args ...string) []events.Event {
		t.Helper()
		out, _, code := d.cli(append([]string{"events", "replay", "-o", "json"}, args...)...)
		wantCode(t, code, 0)
		return parseEvents(t, out)
	}
	var moves []events.Event
	for _, ev := range replay("--job", j1) {
		if ev.Kind == events.KindJob {
			moves = append(moves, ev)
		}
	}
	if len(moves) != 1 || moves[0].ID != j1Failed.ArrivalID() || moves[0].RecoveredBy != "" || moves[0].Actor != "alice" ||
		moves[0].From != "Downloading" || moves[0].To != "Failed" || moves[0].Message != "cancelled by alice" || moves[0].Attrs["action"] != "cancel" {
		t.Errorf("job %s's events: %+v; want one Downloading → Failed, ID %s, by alice", j1, moves, j1Failed.ArrivalID())
	}
	var requeues int
	for _, ev := range replay("--job", j2) {
		switch {
		case ev.RecoveredBy != "":
			t.Errorf("job %s: a recovered event %+v: the requeue's move was not found", j2, ev)
		case ev.Kind == events.KindJob && ev.From == "Failed":
			requeues++
			if ev.To != "Downloading" || ev.Actor != "alice" || ev.Attrs["action"] != "requeue" || !strings.HasPrefix(ev.ID, j2+".downloading.") {
				t.Errorf("requeue's move: %+v", ev)
			}
		case ev.Kind == events.KindAdmin && ev.Actor != "alice":
			t.Errorf("admin event without its actor: %+v", ev)
		}
	}
	if requeues != 1 {
		t.Errorf("job %s: %d requeue moves, want 1", j2, requeues)
	}

	// The batch's replay, in the order things happened (a recovered event
	// has its move's time to the second only: left out of the check).
	evs := replay("--batch", cancelled)
	var last time.Time
	for _, ev := range evs {
		if ev.RecoveredBy != "" {
			continue
		}
		if ev.Time.Before(last) {
			t.Errorf("--batch replay not in time order: %s %s %s → %s after %s", ev.Time.Format(time.StampMicro), ev.Kind, ev.From, ev.To, last.Format(time.StampMicro))
		}
		last = ev.Time
	}
	out, _, code := d.cli("events", "replay", "--batch", cancelled)
	wantCode(t, code, 0)
	if strings.Contains(out, "\n\n") || !strings.Contains(out, "admin cancel batch "+cancelled+"  by alice") {
		t.Errorf("--batch text:\n%s", out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "Reporting → Failed") && (strings.Contains(l, "objects=") || !strings.Contains(l, "failed_count=1") || !strings.Contains(l, "successful_count=0")) {
			t.Errorf("the report's line %q: want its counts, not its lists' lengths", l)
		}
	}
}

// noWarningButNATS tells whether stderr is empty, or only the warning of
// an operator's action whose event NATS did not take (a test without a
// daemon's NATS).
func noWarningButNATS(stderr string) bool {
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	return stderr == "" || len(lines) == 1 && strings.Contains(lines[0], " WRN the change is made, but its event is not recorded")
}

// A stream kept while its queue was made anew (ZooKeeper's data thrown
// away, the data folder kept) holds the old queue's events under the same
// ids: replay, and what access show says of a request no longer in the
// queue, read only the events no older than the queue.
func TestReplayReadsThisQueuesEvents(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	bid := d.batch("uuid-anew", "demo")
	old := time.Now().Add(-2 * time.Hour)
	d.bus.Publish(events.Event{Time: old, Kind: events.KindBatch, BatchID: bid, From: "Pending", To: "Failed", Message: "another queue's"})
	d.bus.Publish(events.Event{Time: old, Kind: events.KindAccess, AccessID: "small/qid0000000005", To: "Pending",
		Attrs: map[string]any{"ark": "ark:/99999/fk4old"}})
	d.bus.Publish(events.Event{Kind: events.KindBatch, BatchID: bid, From: "Pending", To: "Processing", Message: "this queue's"})
	d.flush()
	for _, args := range [][]string{{"--batch", bid}, {"--batch", "uuid-anew"}, {"--since", "3h"}} {
		out, _, code := d.cli(append([]string{"events", "replay"}, args...)...)
		wantCode(t, code, 0)
		if strings.Contains(out, "another queue's") || !strings.Contains(out, "this queue's") {
			t.Errorf("events replay %s: %q, want this queue's event only", strings.Join(args, " "), out)
		}
	}
	_, stderr, code := d.cli("access", "show", "small/qid0000000005")
	wantCode(t, code, 1)
	wantErrLine(t, stderr, "access request small/qid0000000005: no such access request (this queue has not made it)")
}
