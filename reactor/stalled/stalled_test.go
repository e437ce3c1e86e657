package stalled_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/reactor/stalled"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(zktest.WithShared(m)) }

// env is a queue on the shared ZooKeeper with one Processing batch.
type env struct {
	t *testing.T
	q *queue.Queue
	b *queue.Batch
}

func newEnv(t *testing.T) *env {
	e := &env{t: t, q: open(t, zktest.Root(t))}
	ctx := t.Context()
	e.ok(e.q.Init(ctx))
	_, err := e.q.CreateBatch(ctx, queue.SubmissionOf(map[string]any{"profile_name": "demo"}))
	e.ok(err)
	b, _, err := e.q.AcquirePendingBatch(ctx, nil)
	e.ok(err)
	e.ok(e.q.SetBatchStatus(ctx, b, queue.Processing, queue.BatchChange{Release: true}))
	e.b = b
	return e
}

func open(t *testing.T, root string) *queue.Queue {
	q, err := queue.New(zktest.Connect(t), root)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func (e *env) ok(err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

// other is another session on the queue: a daemon registered as host
// name working states (none registered when name is "").
func (e *env) other(name string, states ...queue.State) *queue.Queue {
	q := open(e.t, e.q.Root())
	if name != "" {
		info := reactor.HostInfo{Name: name, States: []string{}}
		for _, s := range states {
			info.States = append(info.States, string(s))
		}
		data, _ := json.Marshal(info)
		e.ok(q.RegisterHost(e.t.Context(), name, data))
	}
	return q
}

// job makes a job and moves it through states, with message set by the
// last move.
func (e *env) job(spec queue.JobSpec, message string, states ...queue.State) string {
	e.t.Helper()
	spec.Config.Profile = "demo"
	j, err := e.q.CreateJob(e.t.Context(), e.b, spec)
	e.ok(err)
	for i, s := range states {
		l, err := e.q.LockJob(e.t.Context(), j.ID)
		e.ok(err)
		c := queue.JobChange{Release: true}
		if i == len(states)-1 {
			c.Message = message
		}
		e.ok(e.q.SetJobStatus(e.t.Context(), l, s, c))
	}
	return j.ID
}

func (e *env) find(th stalled.Thresholds, now time.Time) map[string]stalled.Stall {
	e.t.Helper()
	jobs, problems, err := e.q.ListJobs(e.t.Context(), "")
	e.ok(err)
	if len(problems) > 0 {
		e.t.Fatal(problems)
	}
	found, err := stalled.Find(e.t.Context(), e.q, jobs, th, now)
	e.ok(err)
	// A listing's check, one job at a time, flags the same jobs alike.
	check := stalled.Lister(e.t.Context(), e.q, th, now)
	for _, j := range jobs {
		st, err := check(j)
		e.ok(err)
		if want, ok := found[j.ID]; ok != (st != nil) || ok && !reflect.DeepEqual(*st, want) {
			e.t.Errorf("%s: Lister says %+v, Find %+v", j.ID, st, want)
		}
	}
	return found
}

var upTo = []queue.State{queue.Estimating, queue.Provisioning, queue.Downloading, queue.Processing, queue.Storing}

// Each reason the queue shows for a job that stays in its state: the
// lock's holder (a live host, or a session that is no host), a retried
// error under the lock, an operator's hold, no live consumer of the state,
// a wait for room in Provisioning, a back end out of reach (not the host
// holding its files, which works it), a depositor's busy server (not
// "waiting": no worker is what it lacks), the host holding its files, and
// nothing at all (no worker took it yet). A job within its threshold, and
// a job that stopped (Failed), is not flagged.
func TestEachReason(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	h1 := e.other("h1", queue.Estimating, queue.Provisioning, queue.Downloading)
	e.other("h2", queue.Processing)
	stranger := e.other("")

	locked := e.job(queue.JobSpec{}, "", upTo[:3]...)
	_, err := h1.LockJob(ctx, locked)
	e.ok(err)
	retrying := e.job(queue.JobSpec{}, reactor.RetryingPrefix+" (attempt 1 of 3): GET https://example.org/a: 503", upTo[:3]...)
	_, err = h1.LockJob(ctx, retrying)
	e.ok(err)
	foreign := e.job(queue.JobSpec{}, "", upTo[:1]...)
	_, err = stranger.LockJob(ctx, foreign)
	e.ok(err)
	held := e.job(queue.JobSpec{}, "", queue.Held)
	noConsumer := e.job(queue.JobSpec{}, "", upTo...) // Storing: nobody works it
	provisioning := e.job(queue.JobSpec{SpaceNeeded: 3 << 20}, "waiting for room: needs 3 MiB", upTo[:2]...)
	elsewhere := e.job(queue.JobSpec{Config: queue.JobConfig{WorkingHost: "h2"}}, "", upTo[:4]...)
	backEnd := e.job(queue.JobSpec{Config: queue.JobConfig{WorkingHost: "h2"}},
		reactor.WaitingPrefix+": the inventory is unavailable: dial tcp 127.0.0.1:5432: connect: connection refused", upTo[:4]...)
	waiting := e.job(queue.JobSpec{}, "", upTo[:3]...)
	busyServer := e.job(queue.JobSpec{}, "waiting for a busy server: producer/a.txt: download https://example.org/a.txt: HTTP 503 Service Unavailable; "+
		"next try at 2026-11-28 01:25:58, spending no attempt", upTo[:3]...) // the handlers' message
	failed := e.job(queue.JobSpec{}, "boom", queue.Estimating, queue.Failed)

	th, err := stalled.Parse("1h")
	e.ok(err)
	if got := e.find(th, time.Now()); len(got) != 0 {
		t.Fatalf("within the threshold, flagged %v", got)
	}
	found := e.find(th, time.Now().Add(2*time.Hour))
	want := map[string]struct {
		kind  stalled.Kind
		parts []string
	}{
		locked:       {stalled.KindLocked, []string{"lock held by host h1 since "}},
		retrying:     {stalled.KindRetrying, []string{"retrying after error (attempt 1 of 3): GET https://example.org/a: 503", "lock held by host h1"}},
		foreign:      {stalled.KindLocked, []string{"lock held by session 0x", "(no live ingestq host: another program, or a daemon that died) since "}},
		held:         {stalled.KindHeld, []string{"held: no daemon takes it until it is released"}},
		noConsumer:   {stalled.KindNoConsumer, []string{"no consumer of state Storing is running"}},
		provisioning: {stalled.KindProvisioning, []string{"waiting in Provisioning for 3145728 bytes (3 MiB)", "last message: waiting for room: needs 3 MiB"}},
		elsewhere:    {stalled.KindFilesElsewhere, []string{"waiting for host h2, which holds its files"}},
		backEnd:      {stalled.KindBackEnd, []string{"waiting for a back end: the inventory is unavailable: dial tcp 127.0.0.1:5432"}},
		waiting:      {stalled.KindWaiting, []string{"not taken by a worker yet (hosts working Downloading: h1)"}},
		busyServer:   {stalled.KindBusyServer, []string{"waiting for a busy server: producer/a.txt: download https://example.org/a.txt: HTTP 503"}},
	}
	for jid, w := range want {
		st, ok := found[jid]
		if !ok {
			t.Errorf("%s (%s) not flagged", jid, w.kind)
			continue
		}
		if st.Kind != w.kind || st.For < time.Hour || st.JID != jid {
			t.Errorf("%s: %+v, want kind %s, stalled over an hour", jid, st, w.kind)
		}
		for _, p := range w.parts {
			if !strings.Contains(st.Reason, p) {
				t.Errorf("%s: reason %q lacks %q", jid, st.Reason, p)
			}
		}
	}
	if _, ok := found[failed]; ok || len(found) != len(want) {
		t.Errorf("flagged %d jobs (the Failed one: %v), want %d", len(found), ok, len(want))
	}

	// A hold of the whole ingest queue is why an unlocked job stays put.
	_, err = e.q.HoldQueue(ctx, queue.QueueIngest)
	e.ok(err)
	found = e.find(th, time.Now().Add(2*time.Hour))
	if st := found[waiting]; st.Kind != stalled.KindHeld || !strings.Contains(st.Reason, "the ingest queue is held since") {
		t.Errorf("with the queue held: %+v", st)
	}
	if st := found[locked]; st.Kind != stalled.KindLocked {
		t.Errorf("a locked job with the queue held: %+v, want still locked (its step runs)", st)
	}
}

// With the default thresholds a job waiting for a busy server is listed
// (busy_server) once it has been in its state for half the
// --fetch-busy-limit its message gives, in Downloading (threshold 2 h) and
// Estimating (1 h) alike. Before, the limit (1 h) failed it before
// Downloading's threshold, so `ls jobs --stalled` never listed it. A busy
// message without the limit is listed at the threshold, as any other
// wait; a state not watched is not.
func TestBusyServerListedAtHalfItsLimit(t *testing.T) {
	e := newEnv(t)
	e.other("h1", upTo...)
	const busy = "waiting for a busy server: producer/a.txt: download https://example.org/a.txt: HTTP 503 Service Unavailable; " +
		"next try at 2026-11-28 01:25:58, spending no attempt; the job fails if it is still busy at 2026-11-28 02:25:57 (--fetch-busy-limit 1h)"
	downloading := e.job(queue.JobSpec{}, busy, upTo[:3]...)
	estimating := e.job(queue.JobSpec{}, busy, upTo[:1]...)
	noLimit := e.job(queue.JobSpec{}, "waiting for a busy server: producer/a.txt: download https://example.org/a.txt: HTTP 503 Service Unavailable", upTo[:3]...)
	plain := e.job(queue.JobSpec{}, "", upTo[:3]...)
	// A job's note follows the limit (queue.KeepNote): read before, 1h); note: … did not parse.
	noted := e.job(queue.JobSpec{}, busy+"; note: every file is stored under its own name, but a.txt and A.txt share one", upTo[:3]...)
	longer := e.job(queue.JobSpec{}, strings.Replace(busy, "(--fetch-busy-limit 1h)", "(--fetch-busy-limit 1h30m)", 1), upTo[:3]...)
	th := stalled.Defaults()
	if got := e.find(th, time.Now().Add(29*time.Minute)); len(got) != 0 {
		t.Errorf("29 minutes into a wait of at most an hour, flagged %v", got)
	}
	found := e.find(th, time.Now().Add(31*time.Minute))
	for _, jid := range []string{downloading, estimating, noted} {
		if st, ok := found[jid]; !ok || st.Kind != stalled.KindBusyServer {
			t.Errorf("%s, 31 minutes into a wait of at most an hour: %+v (flagged %v); want busy_server", jid, st, ok)
		}
	}
	if st := found[downloading]; st.Reason != busy {
		t.Errorf("%s's reason %q, want its message", downloading, st.Reason)
	}
	if len(found) != 3 {
		t.Errorf("flagged %v; want only the three jobs whose message gives a limit of 1h (not %s, %s, %s)", found, noLimit, plain, longer)
	}
	if _, ok := e.find(th, time.Now().Add(46*time.Minute))[longer]; !ok {
		t.Errorf("%s, 46 minutes into a wait of at most 1h30m, not flagged", longer)
	}
	if _, ok := e.find(th, time.Now().Add(2*time.Hour+time.Minute))[noLimit]; !ok {
		t.Errorf("%s, waiting for a busy server past Downloading's threshold, not flagged", noLimit)
	}
	delete(th, queue.Downloading)
	if _, ok := e.find(th, time.Now().Add(31*time.Minute))[downloading]; ok {
		t.Errorf("%s flagged in Downloading, a state given no threshold", downloading)
	}
}

// The thresholds: defaults, one duration for every state, per-state
// overrides in any order, and clear refusals.
func TestParse(t *testing.T) {
	th, err := stalled.Parse("")
	if err != nil || th.String() != stalled.Defaults().String() {
		t.Fatalf("Parse(\"\") = %v, %v; want the defaults", th, err)
	}
	if got, want := th.String(), "pending=1h,estimating=1h,provisioning=2h,downloading=2h,processing=1h,storing=2h,recording=1h,notify=1h,held=24h"; got != want {
		t.Errorf("defaults %s, want %s", got, want)
	}
	th, err = stalled.Parse("Downloading=90m, 30m ,held=72h")
	if err != nil {
		t.Fatal(err)
	}
	if th[queue.Downloading] != 90*time.Minute || th[queue.Pending] != 30*time.Minute || th[queue.Held] != 72*time.Hour {
		t.Errorf("Parse: %s", th)
	}
	if !strings.Contains(th.String(), "downloading=1h30m") {
		t.Errorf("String() = %s", th)
	}
	for spec, want := range map[string]string{
		"downloading=soon": `"downloading=soon": want a positive duration`,
		"0s":               `"0s": want a positive duration`,
		"1h,2h":            `"2h": a duration for every state is given twice`,
		"shipping=1h":      `"shipping=1h": no job state "shipping" (states: pending, estimating,`,
		"completed=1h":     `"completed=1h": a Completed job has stopped; it never stalls (states: pending,`,
	} {
		if _, err := stalled.Parse(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", spec, err, want)
		}
	}
}
