package cli_test

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ingestq/ingestq/cmd/ingestq/cli"
	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/internal/logtest"
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

func TestEventsReplay(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.start()
	_, _, code := d.cli("submit", "--profile", "demo", "--wait", "passthrough:5")
	wantCode(t, code, 0)
	b := d.onlyBatch()
	d.flush()

	// Text, by batch: the batch's own events, then each job's timeline.
	out, _, code := d.cli("events", "replay", "--batch", b.ID)
	wantCode(t, code, 0)
	groups := strings.Split(strings.TrimSuffix(out, "\n"), "\n\n")
	if len(groups) != 6 {
		t.Fatalf("%d groups, want the batch's and 5 jobs':\n%s", len(groups), out)
	}
	var batchSteps []string
	for _, l := range strings.Split(groups[0], "\n") {
		_, step, ok := strings.Cut(l, "test  batch "+b.ID+"  ")
		if !ok {
			t.Fatalf("not a line of batch %s: %q", b.ID, l)
		}
		step, _, _ = strings.Cut(step, "  ")
		batchSteps = append(batchSteps, step)
	}
	if want := []string{"Pending → Processing", "Processing → Reporting", "Reporting → Completed"}; !slices.Equal(batchSteps, want) {
		t.Errorf("batch timeline %q, want %q", batchSteps, want)
	}
	jids := map[string]bool{}
	for _, g := range groups[1:] {
		var steps []string
		jid := ""
		for _, l := range strings.Split(g, "\n") {
			m := lineRE.FindStringSubmatch(l)
			if m == nil || m[2] != b.ID || (jid != "" && m[1] != jid) {
				t.Fatalf("line %q: want one job of %s per group", l, b.ID)
			}
			jid = m[1]
			steps = append(steps, m[3])
		}
		if !slices.Equal(steps, jobTimeline) {
			t.Errorf("%s timeline %q, want %q", jid, steps, jobTimeline)
		}
		jids[jid] = true
	}
	if len(jids) != 5 {
		t.Errorf("%d jobs, want 5", len(jids))
	}

	// -o json, the batch by its uuid: the same events, in stream order
	// (which is each job's order; publishers' clocks may interleave jobs).
	out, _, code = d.cli("events", "replay", "-o", "json", "--batch", b.UUID())
	wantCode(t, code, 0)
	evs := parseEvents(t, out)
	if len(evs) != 3+5*8 {
		t.Fatalf("%d events, want 43", len(evs))
	}
	byJob := map[string][]string{}
	for _, ev := range evs {
		if ev.BatchID != b.ID {
			t.Fatalf("--batch %s replays %+v", b.UUID(), ev)
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
	if n := len(parseEvents(t, out)); n != 43 {
		t.Errorf("--since 10m: %d events, want 43", n)
	}
	future := time.Now().Add(time.Hour)
	out, _, code = d.cli("events", "replay", "-o", "json", "--since", future.Format(time.RFC3339))
	wantCode(t, code, 0)
	if n := len(parseEvents(t, out)); n != 0 {
		t.Errorf("--since in the future: %d events", n)
	}
	out, _, code = d.cli("events", "replay", "--batch", b.ID, "--since", future.Format(time.DateTime))
	wantCode(t, code, 0)
	if out != "" {
		t.Errorf("--since in the future, text: %q", out)
	}
	_, stderr, code := d.cli("events", "replay", "--since", "yesterday")
	wantCode(t, code, 2)
	wantErrLine(t, stderr, `"yesterday"`, "duration")
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
		{[]string{"events", "tail", "job.>"}, []string{`"job.>"`, "starts with ingestq."}},
	} {
		_, stderr, code := runEnv(t, nil, append([]string{"--zk", "127.0.0.1:1", "--nats", url}, c.args...)...)
		wantCode(t, code, 2)
		wantErrLine(t, stderr, c.want...)
	}
}

// tail runs `events tail` until an event published while it runs shows,
// and returns its output.
func tail(t *testing.T, d *daemon, ev events.Event, args ...string) string {
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
	if errb.String() != "" {
		t.Errorf("stderr %q", errb.String())
	}
	return out.String()
}

func TestEventsTail(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	prio := 5
	ev := events.Event{Kind: events.KindJob, JobID: "jid0000000042", BatchID: "bid0000000007",
		From: "Downloading", To: "Processing", Priority: &prio, Message: "hello\nthere"}
	out := tail(t, d, ev)
	first, _, _ := strings.Cut(out, "\n")
	want := regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d\d\d test  job jid0000000042 \(bid0000000007\)  Downloading → Processing  \[hello there\]  priority=5$`)
	if !want.MatchString(first) {
		t.Errorf("tail line %q", first)
	}

	// -o json, on a narrower subject: one event a line.
	ev.JobID = "jid0000000043"
	out = tail(t, d, ev, "-o", "json", "ingestq.job.processing.*")
	first, _, _ = strings.Cut(out, "\n")
	var got events.Event
	if err := json.Unmarshal([]byte(first), &got); err != nil || got.JobID != ev.JobID || got.To != "Processing" || got.Host != "test" {
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
	if out != "queue ingest held\n" || stderr != "" {
		t.Errorf("hold queue: %q, stderr %q", out, stderr)
	}
	subject, ev := next()
	if subject != "ingestq.admin.hold" || ev.Kind != events.KindAdmin || ev.To != "hold" || ev.Attrs["queue"] != "ingest" ||
		ev.ID == "" || ev.Time.IsZero() || ev.Message != "queue ingest held" {
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
	wants := []string{"admin hold queue ingest  [queue ingest held]", "admin hold job " + jid + " (" + bid + ")", "admin release job " + jid + " (" + bid + ")"}
	if len(lines) != len(wants) {
		t.Fatalf("replay:\n%s", out)
	}
	for i, w := range wants {
		if !strings.HasSuffix(lines[i], "  "+w) {
			t.Errorf("line %q, want it to end with %q", lines[i], w)
		}
	}

	// No NATS: the change is made all the same, silently.
	_, stderr, code = d.run("--nats", "nats://"+closedAddr(t), "release", "queue")
	wantCode(t, code, 0)
	if stderr != "" {
		t.Errorf("stderr %q", stderr)
	}
	held, err := d.q.QueueHeld(t.Context(), "ingest")
	d.ok(err)
	if held {
		t.Error("queue still held")
	}
}
