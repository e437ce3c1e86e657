package handlers_test

import (
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/internal/metrics"
	"github.com/ingestq/ingestq/internal/pgtest"
	"github.com/ingestq/ingestq/internal/promtest"
	"github.com/ingestq/ingestq/internal/s3test"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// A back end that hangs (SIGSTOP, as in the operator's walk-through: its
// connections stay open and nothing answers) is a back end out, found out
// within its timeout: the job waits in its state, its attempts unspent (more
// waits than its 2 attempts), its message naming the back end; once the
// server runs again, the job completes. A frozen store kept Storing up to
// ten minutes (minio-go's ten tries of a minute), a frozen PostgreSQL kept
// Recording for good, the job saying nothing but its lock.
func TestHungS3WaitsForIt(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t) // not parallel: the AWS_* variables are the process's
	target := srv.URL(srv.Addr, "ocfl") + "&idletimeout=1s"
	freeze := freezer(t, srv.Freeze)
	obs := watchBackEnds(t)
	r := newRig(t, nil, withStorage(target), withAttempts(2, 10*time.Millisecond), obs.option(),
		beforeStep(queue.Storing, func(*queue.Job) { freeze() }))
	b := r.submitObject("/obj.checkm", object{"a.txt": []byte("alpha\n")})
	obs.storingWaits(t, r, b.ID, target, "stalled: no byte moved for 1s")
	completesThawed(t, r, b.ID, srv.Thaw)
	if got, gauge := obs.out(t), "backend=storage target "+target; got[gauge] != 0 || len(got) != 1 {
		t.Errorf("once the store answers, ingestq_backend_out is %v; want 0 for %q", got, gauge)
	}
}

// backEnds is waitsSeen, telling the daemon's metrics of back ends out
// and counting the attempts steps spent (retried or failed).
type backEnds struct {
	waitsSeen
	m      *metrics.Metrics
	scrape string
	spent  *atomic.Int32
}

// watchBackEnds returns a backEnds whose metrics the test can scrape.
func watchBackEnds(t *testing.T) backEnds {
	m := metrics.New(metrics.Config{Logger: slog.New(slog.DiscardHandler)})
	scrape := httptest.NewServer(m.Handler())
	t.Cleanup(scrape.Close)
	return backEnds{waitsSeen{states: make(chan queue.State, 100), stored: func() {}}, m, scrape.URL, &atomic.Int32{}}
}

// option has the rig's daemon observed by o.
func (o backEnds) option() rigOption {
	return func(_ *handlers.Config, rc *reactor.Config) { rc.Observer = o }
}

func (o backEnds) BackEnd(what string, out bool) { o.m.BackEnd(what, out) }

func (o backEnds) StepRan(s queue.State, r reactor.StepResult, d time.Duration) {
	if r == reactor.StepRetry || r == reactor.StepFailed {
		o.spent.Add(1)
	}
	o.waitsSeen.StepRan(s, r, d)
}

// out is ingestq_backend_out, by "backend=…".
func (o backEnds) out(t *testing.T) map[string]float64 {
	return promtest.Scrape(t, o.scrape).Values("ingestq_backend_out", "backend")
}

// storingWaits checks that batch bid's job waits in Storing for target (3
// waits with 2 attempts), its message saying says, no attempt spent, and
// that ingestq_backend_out is 1 for target.
func (o backEnds) storingWaits(t *testing.T, r *rig, bid, target, says string) {
	t.Helper()
	o.waited(t, queue.Storing, 3, "storage target "+target)
	checkWaiting(t, r.jobsOf(bid)["manifest"], queue.Storing, "storage target "+target+" is unavailable", says)
	if n := o.spent.Load(); n != 0 {
		t.Errorf("steps spent %d attempts; want none, waiting for storage target %s", n, target)
	}
	if got, gauge := o.out(t), "backend=storage target "+target; got[gauge] != 1 {
		t.Errorf("while storage target %s hangs, ingestq_backend_out is %v; want 1 for %q", target, got, gauge)
	}
}

// completesThawed thaws a frozen back end and checks that batch bid then
// completes.
func completesThawed(t *testing.T, r *rig, bid string, thaw func() error) {
	t.Helper()
	if err := thaw(); err != nil {
		t.Fatal(err)
	}
	if b := r.waitBatch(bid, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("batch %s (%s), want Completed", b.State(), b.Status.Message)
	}
}

func TestHungPostgresWaitsForIt(t *testing.T) {
	t.Parallel()
	pg := pgtest.Start(t)
	db := pgtest.NewDatabase(t, pg) + "&query_timeout=1s"
	obs := waitsSeen{states: make(chan queue.State, 100), stored: freezer(t, pg.Freeze)}
	r := newRig(t, nil, withInventory(db), withAttempts(2, 10*time.Millisecond),
		func(_ *handlers.Config, rc *reactor.Config) { rc.Observer = obs })
	b := r.submitObject("/obj.checkm", object{"a.txt": []byte("alpha\n")})
	obs.waited(t, queue.Recording, 3, "the inventory")
	checkWaiting(t, r.jobsOf(b.ID)["manifest"], queue.Recording, "the inventory is unavailable", "no answer in 1s (query_timeout)")
	completesThawed(t, r, b.ID, pg.Thaw)
}

// freezer returns a function that freezes a server the first time it is
// called (the test's end stops it, frozen or not).
func freezer(t *testing.T, freeze func() error) func() {
	return sync.OnceFunc(func() {
		if err := freeze(); err != nil {
			t.Error(err)
		}
	})
}

// checkWaiting checks that j waits in state s for a back end, its message
// holding each of says.
func checkWaiting(t *testing.T, j *queue.Job, s queue.State, says ...string) {
	t.Helper()
	if j.State() != s || !strings.HasPrefix(j.Status.Message, reactor.WaitingPrefix) {
		t.Fatalf("job %s, message %q: want %s, waiting for a back end", j.State(), j.Status.Message, s)
	}
	for _, say := range says {
		if !strings.Contains(j.Status.Message, say) {
			t.Errorf("job's message %q says nothing of %q", j.Status.Message, say)
		}
	}
}
