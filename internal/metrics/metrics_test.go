package metrics

import (
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ingestq/ingestq/internal/promtest"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/reactor/stalled"
	"github.com/ingestq/ingestq/zkwatch"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(zktest.WithShared(m)) }

type env struct {
	t       *testing.T
	session *zkwatch.Session
	q       *queue.Queue
	b       *queue.Batch
}

func newEnv(t *testing.T) *env {
	s, err := zkwatch.Dial(t.Context(), zkwatch.Config{Servers: []string{zktest.Shared(t).Addr}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	q, err := queue.New(s.Conn, zktest.Root(t))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, session: s, q: q}
	e.ok(q.Init(t.Context()))
	_, err = q.CreateBatch(t.Context(), queue.SubmissionOf(map[string]any{"profile_name": "demo"}))
	e.ok(err)
	e.b, _, err = q.AcquirePendingBatch(t.Context(), nil)
	e.ok(err)
	e.ok(q.SetBatchStatus(t.Context(), e.b, queue.Processing, queue.BatchChange{Release: true}))
	return e
}

func (e *env) ok(err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

// job makes a job of profile and moves it through states.
func (e *env) job(profile string, states ...queue.State) string {
	e.t.Helper()
	j, err := e.q.CreateJob(e.t.Context(), e.b, queue.JobSpec{Priority: 5, Config: queue.JobConfig{Profile: profile}})
	e.ok(err)
	for _, s := range states {
		l, err := e.q.LockJob(e.t.Context(), j.ID)
		e.ok(err)
		e.ok(e.q.SetJobStatus(e.t.Context(), l, s, queue.JobChange{Release: true}))
	}
	return j.ID
}

// /metrics, scraped over HTTP, counts the queue's jobs per state and
// profile as ZooKeeper lists them, follows a job that moves, and reads the
// session's state.
func TestQueueNumbersOverHTTP(t *testing.T) {
	e := newEnv(t)
	var pending []string
	for range 3 {
		pending = append(pending, e.job("demo"))
	}
	e.job("other", queue.Estimating, queue.Provisioning, queue.Downloading)
	e.job("", queue.Estimating, queue.Failed)
	e.job("demo", queue.Held)
	m := New(Config{Queue: e.q, Session: e.session, Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)

	// Every state has a series for each profile seen: 0 where it has none
	// of its jobs, so that an emptied state reads 0, not a series gone.
	want := map[string]float64{}
	for _, s := range queue.JobMachine.States {
		for _, p := range []string{"demo", "other", "none"} {
			want["state="+s.Folder()+",profile="+p] = 0
		}
	}
	want["state=pending,profile=demo"], want["state=downloading,profile=other"] = 3, 1
	want["state=failed,profile=none"], want["state=held,profile=demo"] = 1, 1
	fams := promtest.Scrape(t, srv.URL)
	if got := fams.Values("ingestq_jobs", "state", "profile"); !promtest.Equal(got, want) {
		t.Errorf("ingestq_jobs %v, want %v", got, want)
	}
	if got := fams.Values("ingestq_zookeeper_connected"); got[""] != 1 {
		t.Errorf("ingestq_zookeeper_connected %v, want 1", got)
	}
	stalledNow := fams.Values("ingestq_stalled_jobs", "state")
	if len(stalledNow) != len(stalled.States) || stalledNow["state=pending"] != 0 {
		t.Errorf("ingestq_stalled_jobs %v: want every state a job can stall in, none stalled yet", stalledNow)
	}
	if fams["go_goroutines"] == nil || fams["process_resident_memory_bytes"] == nil {
		t.Errorf("the Go and process collectors are missing")
	}

	l, err := e.q.LockJob(t.Context(), pending[0])
	e.ok(err)
	e.ok(e.q.SetJobStatus(t.Context(), l, queue.Estimating, queue.JobChange{Release: true}))
	want["state=pending,profile=demo"], want["state=estimating,profile=demo"] = 2, 1
	if got := promtest.Scrape(t, srv.URL).Values("ingestq_jobs", "state", "profile"); !promtest.Equal(got, want) {
		t.Errorf("after a move: ingestq_jobs %v, want %v", got, want)
	}
}

// The oldest job's age and the stalled count come from when each ref was
// made; a job that left its state and came back between two scrapes is
// read again (its ref is new under the same name), not taken for old.
// An empty queue has a series of every state, 0 (profile none); the HELP
// texts name every label value the daemon uses.
func TestEmptyStatesAndHelp(t *testing.T) {
	e := newEnv(t)
	m := New(Config{Queue: e.q, Session: e.session, Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	m.Moved("access", queue.Processing, "completed")
	m.StepRan(queue.Storing, reactor.StepAbandoned, time.Second)
	fams := promtest.Scrape(t, srv.URL)
	got := fams.Values("ingestq_jobs", "state", "profile")
	if len(got) != len(queue.JobMachine.States) || got["state=completed,profile=none"] != 0 {
		t.Errorf("ingestq_jobs of an empty queue %v: want every state, 0", got)
	}
	for name, words := range map[string][]string{
		"ingestq_transitions_total":     {"access"},
		"ingestq_step_duration_seconds": {"abandoned"},
	} {
		f := fams[name]
		if f == nil {
			t.Fatalf("no %s", name)
		}
		for _, w := range words {
			if !strings.Contains(f.GetHelp(), w) {
				t.Errorf("%s HELP %q does not name %q", name, f.GetHelp(), w)
			}
		}
	}
}

func TestOldestAndStalled(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	th, err := stalled.Parse("1h")
	e.ok(err)
	v := newQueueView(e.q, e.session, th, slog.New(slog.DiscardHandler))
	a := e.job("demo")
	refTime := func(jid string) time.Time {
		refs, _, err := e.q.Refs(ctx, queue.Pending)
		e.ok(err)
		times, err := e.q.RefTimes(ctx, queue.Pending, refs)
		e.ok(err)
		return times["05-"+jid]
	}
	tA := refTime(a)
	snap, err := v.scan(ctx, tA.Add(30*time.Minute))
	e.ok(err)
	if snap.oldest[queue.Pending] != 30*time.Minute || snap.stalled[queue.Pending] != 0 {
		t.Fatalf("30 min after: oldest %v, stalled %d; want 30m, none", snap.oldest[queue.Pending], snap.stalled[queue.Pending])
	}

	_, err = e.q.HoldJob(ctx, a)
	e.ok(err)
	_, err = e.q.ReleaseJob(ctx, a)
	e.ok(err)
	tA2 := refTime(a)
	b := e.job("demo")
	tB := refTime(b)
	now := tB.Add(90 * time.Minute)
	snap, err = v.scan(ctx, now)
	e.ok(err)
	if snap.oldest[queue.Pending] != now.Sub(tA2) {
		t.Errorf("oldest %v, want %v (since its return at %v, not since %v)", snap.oldest[queue.Pending], now.Sub(tA2), tA2, tA)
	}
	if snap.stalled[queue.Pending] != 2 || snap.stalled[queue.Held] != 0 {
		t.Errorf("stalled %v, want both Pending jobs", snap.stalled)
	}
	if len(v.entered) != 2 || len(v.profile) != 2 {
		t.Errorf("kept %d ref times and %d profiles, want the 2 jobs' only", len(v.entered), len(v.profile))
	}
}
