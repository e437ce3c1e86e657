package handlers_test

import (
	"sync"
	"testing"
	"time"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/internal/pgtest"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// A job waiting here for the inventory (its PostgreSQL stopped) that an
// operator fails leaves no job of this daemon waiting for it:
// ingestq_backend_out goes back to 0 at once, not at the daemon's next
// answer from the inventory (a minute's backoff here, and none comes while
// it stays stopped). It stayed 1 until the daemon's restart (decision 534),
// and so would it for a job another host finished.
func TestBackEndGaugeClearsWhenItsWaitingJobEndsElsewhere(t *testing.T) {
	t.Parallel()
	pg := pgtest.Start(t)
	db := pgtest.NewDatabase(t, pg)
	obs := clearedBackEnds{backEnds: watchBackEnds(t), cleared: make(chan string, 10)}
	obs.stored = sync.OnceFunc(func() {
		if err := pg.Stop(); err != nil {
			t.Error(err)
		}
	})
	r := newRig(t, nil, withInventory(db), withAttempts(2, time.Minute),
		func(_ *handlers.Config, rc *reactor.Config) { rc.Observer = obs })
	b := r.submitObject("/obj.checkm", object{"a.txt": []byte("alpha\n")})
	obs.waited(t, queue.Recording, 1, "the inventory")
	j := r.jobsOf(b.ID)["manifest"]
	checkWaiting(t, j, queue.Recording, "the inventory is unavailable")
	if got := obs.out(t); got["backend=the inventory"] != 1 {
		t.Fatalf("while the inventory is stopped, ingestq_backend_out is %v; want 1 for the inventory", got)
	}

	operator := &ops.Service{Q: r.q, Publish: r.bus.Publish, Actor: "the test"}
	if _, err := operator.FailJob(t.Context(), j.ID, "", false); err != nil {
		t.Fatal(err)
	}
	select {
	case what := <-obs.cleared:
		if what != "the inventory" {
			t.Fatalf("the daemon found %q back; want the inventory", what)
		}
	case <-time.After(faultWait):
		t.Fatalf("the job waiting for the inventory was failed by the operator, and the daemon still finds the inventory out after %s", faultWait)
	}
	if got := obs.out(t); got["backend=the inventory"] != 0 {
		t.Errorf("with no job waiting for the inventory, ingestq_backend_out is %v; want 0 for the inventory", got)
	}
}

// clearedBackEnds is backEnds that also says which back end the daemon
// no longer finds out.
type clearedBackEnds struct {
	backEnds
	cleared chan string
}

func (o clearedBackEnds) BackEnd(what string, out bool) {
	o.backEnds.BackEnd(what, out)
	if !out {
		o.cleared <- what
	}
}
