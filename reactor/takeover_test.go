package reactor_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/internal/queuetest"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch"
)

// A job taken over in Downloading from a daemon whose session ended says so
// in the taker's log and in the job's events, which showed the dead
// host's progress, a silence, and another host's progress from the start.
// A job its holder let go while it lives (a wait) is taken as any other:
// nothing said.
func TestAJobTakenFromADeadHostSaysSo(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	batches := e.outside("ingestq.batch.>")
	dead, dq, b, jobs := hostsBatch(e, "host-dead", 2)
	lost := heldInDownloading(t, dq, jobs[0])
	// Let go: acquired in Downloading and unlocked, as a step's wait does.
	letGo := walkWithoutEvents(t, dq, jobs[1], queue.Downloading)
	letGo, err := dq.TryAcquireJob(ctx, queue.Downloading, letGo.Ref(), queue.Admission{})
	if err != nil || letGo == nil {
		t.Fatalf("acquire %s in Downloading: %v %v", jobs[1].ID, letGo, err)
	}
	if err := dq.UnlockJob(ctx, letGo); err != nil {
		t.Fatal(err)
	}

	jobEvents := e.outside("ingestq.job.>")
	logs, log := e.logged()
	e.daemon("host-a", func(c *reactor.Config) { c.Logger = log })
	takeOvers := func(jid string) []events.Event {
		return takeOversUntil(t, jobEvents, jid, func(ev events.Event) bool {
			return ev.Kind == events.KindJob && ev.To == "Completed" && ev.JobID == jid
		})
	}
	if said := takeOvers(letGo.ID); len(said) > 0 {
		t.Fatalf("take-over events %+v of a job its live holder let go", said)
	}
	dead.Close() // host-dead's node and its lock on the lost job go
	said := takeOvers(lost.ID)
	want := "taken over from host-dead (its session ended) in Downloading"
	if len(said) != 1 || said[0].JobID != lost.ID || said[0].Kind != events.KindProgress || said[0].Message != want || said[0].Attrs["taken_over_from"] != "host-dead" {
		t.Fatalf("take-over events %+v; want one progress event of %s: %q, taken_over_from host-dead", said, lost.ID, want)
	}
	if rep := e.waitBatch(batches, b.ID); rep.To != "Completed" {
		t.Fatalf("batch ended %s: %s", rep.To, rep.Message)
	}
	if lines := logs.Lines("taken over from host-dead"); len(lines) != 1 || !strings.Contains(lines[0], "job="+lost.ID) {
		t.Fatalf("host-a logged %q; want one line of the take-over of %s", lines, lost.ID)
	}
}

// hostSession is a session registered as host, and its Queue.
func hostSession(e *env, host string) (*zkwatch.Session, *queue.Queue) {
	s := e.session()
	q := e.queue(s)
	if err := q.RegisterHost(e.t.Context(), host, []byte(`{}`)); err != nil {
		e.t.Fatal(err)
	}
	return s, q
}

// hostsBatch is hostSession, and a batch of n jobs it made and moved to
// Processing.
func hostsBatch(e *env, host string, n int) (*zkwatch.Session, *queue.Queue, *queue.Batch, []*queue.Job) {
	s, q := hostSession(e, host)
	b, jobs := foreignBatch(e, q, n)
	foreignProcessing(e.t, q, b, n)
	return s, q, b, jobs
}

// heldInDownloading walks j to Downloading by moves that keep its lock, as
// a daemon running each next step itself does, and holds it there: q's
// session and host are its holder.
func heldInDownloading(t *testing.T, q *queue.Queue, j *queue.Job) *queue.Job {
	t.Helper()
	held, err := q.TryAcquireJob(t.Context(), queue.Pending, j.Ref(), queue.Admission{})
	if err != nil || held == nil {
		t.Fatalf("acquire %s: %v %v", j.ID, held, err)
	}
	for _, to := range []queue.State{queue.Estimating, queue.Provisioning, queue.Downloading} {
		if err := q.SetJobStatus(t.Context(), held, to, queue.JobChange{}); err != nil {
			t.Fatal(err)
		}
	}
	return held
}

// Jobs this host held before its restart (its session ended: a stop, a
// crash; then the same --host again) are resumed: each job's event says
// "resumed after this host's restart", and the log says how many in one
// line. Before, each logged and published "taken over from host-a's
// earlier session (it ended)": noise in the operator's log and the
// depositor's events, as if another host had died.
func TestJobsResumedAfterARestartAreCountedInOneLine(t *testing.T) {
	e := newEnv(t)
	earlier, eq, _, jobs := hostsBatch(e, "host-a", 2)
	for _, j := range jobs {
		heldInDownloading(t, eq, j)
	}
	earlier.Close() // host-a stops: its node and its locks go

	jobEvents := e.outside("ingestq.job.>")
	logs, log := e.logged()
	e.daemon("host-a", func(c *reactor.Config) { c.Logger = log })
	resumed := map[string][]events.Event{}
	for done := 0; done < len(jobs); {
		ev := await(t, jobEvents, "both jobs' completion")
		if ev.Kind == events.KindProgress && (ev.Attrs["resumed_from_session"] != nil || ev.Attrs["taken_over_from"] != nil) {
			resumed[ev.JobID] = append(resumed[ev.JobID], ev)
		}
		if ev.Kind == events.KindJob && ev.To == "Completed" {
			done++
		}
	}
	want := "resumed after this host's restart in Downloading"
	for _, j := range jobs {
		if said := resumed[j.ID]; len(said) != 1 || said[0].Message != want || said[0].Attrs["taken_over_from"] != nil {
			t.Errorf("%s's events of its resumption %+v; want one progress event %q, no taken_over_from", j.ID, said, want)
		}
	}
	logs.WaitFor(t, "reactor: resumed the jobs this host held before its restart", "jobs=2")
	if lines := logs.Lines("taken over"); len(lines) > 0 {
		t.Errorf("host-a logged %q; want no take-over of its own jobs", lines)
	}
}

// Only the daemon that wins a job's lock says it takes over a job whose
// files are on a host that is gone: it was said in the admission, before
// the lock, and two hosts said it of one job that one of them ran.
func TestOnlyTheWinnerSaysItTakesOverAJob(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	b, jobs := foreignBatch(e, e.q, 1)
	foreignProcessing(t, e.q, b, 1)
	j := walkWithoutEvents(t, e.q, jobs[0], queue.Processing)
	j, err := e.q.TryAcquireJob(ctx, queue.Processing, j.Ref(), queue.Admission{})
	if err != nil || j == nil {
		t.Fatalf("acquire %s: %v %v", jobs[0].ID, j, err)
	}
	cfg := j.Config
	cfg.WorkingDir, cfg.WorkingHost = "/work/"+j.ID, "host-gone" // downloaded there
	if err := e.q.UpdateJob(ctx, j, queue.JobChange{Config: &cfg}); err != nil {
		t.Fatal(err)
	}
	if err := e.q.UnlockJob(ctx, j); err != nil {
		t.Fatal(err)
	}

	// Another session takes the lock once host-a has found the files' host
	// gone, before its own lock: host-a loses the job.
	other := e.queue(e.session())
	var mu sync.Mutex
	var held *queue.Job
	lost, looked := make(chan struct{}), false
	hook := queuetest.OnRequest(func(_, path string) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case held == nil && strings.HasSuffix(path, "/hosts/host-gone"):
			var err error
			if held, err = other.LockJob(context.Background(), j.ID); err != nil {
				t.Error(err)
			}
		case held != nil && !looked && strings.HasSuffix(path, "/jobs/"+j.ID+"/lock"):
			looked = true
			close(lost) // host-a's look at the lock that beat it (an orphan of its own?)
		}
	})
	logs := &logtest.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	done := e.outside("ingestq.job.completed." + j.ID)
	e.daemon("host-a", func(c *reactor.Config) {
		var err error
		c.Logger = log
		if c.Queue, err = queue.New(c.Session.Conn, e.root, queue.WithLogger(slog.New(hook))); err != nil {
			t.Fatal(err)
		}
	})
	await(t, lost, "host-a to lose the job's lock")
	if lines := logs.Lines("taking over a job whose files are on a host that is gone"); len(lines) > 0 {
		t.Fatalf("host-a, which lost the lock, logged %q", lines)
	}
	mu.Lock()
	err = other.UnlockJob(ctx, held)
	mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	await(t, done, "the job to complete on host-a")
	// (Once in Processing: the pass-through step does not fetch the files
	// here, and the next states find them on host-gone still.)
	if lines := logs.Lines("taking over a job whose files are on a host that is gone", "job="+j.ID, "state=Processing", "files_on=host-gone"); len(lines) != 1 {
		t.Fatalf("host-a, which won the lock, logged %q; want one line", lines)
	}
}

// An access request taken over in Processing from a daemon whose session
// ended says so in the taker's log and as the request's progress event (not
// a move), heard on ingestq.access.>; the taker's status names it while it
// assembles, and a request its holder let go while it lives is taken with
// nothing said.
func TestAnAccessRequestTakenFromADeadHostSaysSo(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	dead, dq := hostSession(e, "host-dead")
	// processing takes the oldest Pending request on dq to Processing, as
	// host-dead's worker does before it assembles.
	processing := func(ark string) *queue.Access {
		t.Helper()
		made := e.accessRequest(ark)
		a, _, err := dq.AcquireAccessWork(ctx, queue.AccessSmall, nil)
		if err != nil || a == nil || a.Ref() != made.Ref() {
			t.Fatalf("host-dead's acquisition: %+v %v, want %s", a, err, made.Ref())
		}
		if err := dq.SetAccessStatus(ctx, a, queue.Processing, queue.AccessChange{}); err != nil {
			t.Fatal(err)
		}
		return a
	}
	letGo := processing("ark:/1/let-go")
	lost := processing("ark:/1/lost")
	if err := dq.UnlockAccess(ctx, letGo); err != nil {
		t.Fatal(err)
	}

	requests := e.outside("ingestq.access.>")
	logs, log := e.logged()
	proceed := make(chan struct{}, 2) // a token for each assembly
	proceed <- struct{}{}             // the let-go request's
	h := newAssembler(proceed)
	e.daemon("host-a", func(c *reactor.Config) {
		c.Logger = log
		c.Access, c.AccessWorkers = h, map[string]int{queue.AccessSmall: 1, queue.AccessLarge: 0}
	})
	takeOvers := func(ref string) []events.Event {
		return takeOversUntil(t, requests, ref, func(ev events.Event) bool {
			return ev.Kind == events.KindAccess && ev.To == "Completed" && ev.AccessID == ref
		})
	}
	if got := await(t, h.started, "the let-go request's assembly"); got != letGo.Ref() {
		t.Fatalf("assembled %s first, want %s", got, letGo.Ref())
	}
	if said := takeOvers(letGo.Ref()); len(said) > 0 {
		t.Fatalf("take-over events %+v of a request its live holder let go", said)
	}
	dead.Close() // host-dead's node and its lock on the lost request go
	if got := await(t, h.started, "the lost request's assembly"); got != lost.Ref() {
		t.Fatalf("assembled %s, want %s", got, lost.Ref())
	}
	if a, err := e.q.LoadAccess(ctx, lost.Queue, lost.ID); err != nil || a.Status.Holder == nil || a.Status.Holder.Host != "host-a" {
		t.Fatalf("the lost request while host-a assembles it: %+v %v, want its holder host-a", a, err)
	}
	proceed <- struct{}{}
	said := takeOvers(lost.Ref())
	want := "taken over from host-dead (its session ended) in Processing"
	if len(said) != 1 || said[0].AccessID != lost.Ref() || said[0].Kind != events.KindProgress || said[0].Message != want ||
		said[0].Attrs["taken_over_from"] != "host-dead" {
		t.Fatalf("take-over events %+v; want one progress event of %s: %q, taken_over_from host-dead", said, lost.Ref(), want)
	}
	if lines := logs.Lines("taken over from host-dead"); len(lines) != 1 || !strings.Contains(lines[0], "request="+lost.Ref()) {
		t.Fatalf("host-a logged %q; want one line of the take-over of %s", lines, lost.Ref())
	}
}

// takeOversUntil reads events from ch until done says id completed, and
// returns the take-overs among them.
func takeOversUntil(t *testing.T, ch <-chan events.Event, id string, done func(events.Event) bool) (said []events.Event) {
	t.Helper()
	for {
		ev := await(t, ch, id+"'s completion")
		if ev.Attrs["taken_over_from"] != nil {
			said = append(said, ev)
		}
		if done(ev) {
			return said
		}
	}
}
