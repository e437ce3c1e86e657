package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Every change through the API names who asked for it, by the token's
// name: in the admin event, in the moves it made (each published under the
// move's arrival ID, which a daemon that finds the move looks up, so it is
// recorded once), and, the same way for fail as for cancel, in the status
// message an action writes when given none.
func TestActionsNameTheirActor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bt := b.batch("uuid-actor", "demo")
	b.processing(bt.ID)
	failed := b.job(bt.ID, 5, 0, queue.Estimating, queue.Provisioning, queue.Downloading)

	var o struct{ Message string }
	b.do("POST", "jobs/"+failed+"/fail", operateToken, nil).ok(t, http.StatusOK, &o)
	j := b.jobState(failed)
	if j.State() != queue.Failed || j.Status.Message != "failed by alice" || o.Message != "job "+failed+" is Failed: failed by alice" {
		t.Errorf("fail without a message: %s %q, answer %q; want \"failed by alice\"", j.State(), j.Status.Message, o.Message)
	}
	b.do("PUT", "holds/queues/ingest", adminToken, nil).ok(t, http.StatusOK, nil)

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	must(t, b.bus.Flush(ctx))
	// As the daemon that reports the batch asks (publishUnlessRecorded).
	move := events.Event{Kind: events.KindJob, ID: j.ArrivalID(), BatchID: bt.ID, JobID: failed, To: string(queue.Failed)}
	if ok, err := b.bus.Recorded(ctx, move); !ok || err != nil {
		t.Errorf("the fail's move is not recorded under its arrival ID %s (%v): a daemon would publish it again as recovered", move.ID, err)
	}
	var moves, admin []events.Event
	must(t, events.Replay(ctx, b.bus.Conn(), "", events.Filter{}, func(ev events.Event) error {
		switch ev.Kind {
		case events.KindJob:
			moves = append(moves, ev)
		case events.KindAdmin:
			admin = append(admin, ev)
		}
		return nil
	}))
	if len(moves) != 1 || moves[0].ID != j.ArrivalID() || moves[0].Actor != "alice" || moves[0].From != "Downloading" ||
		moves[0].Message != "failed by alice" || moves[0].Attrs["action"] != "fail" {
		t.Errorf("job moves %+v; want the fail's, by alice, under %s", moves, j.ArrivalID())
	}
	if len(admin) != 2 || admin[0].To != "fail" || admin[0].Actor != "alice" || admin[1].To != "hold" || admin[1].Actor != "admin token" {
		t.Errorf("admin events %+v; want fail by alice, hold by \"admin token\"", admin)
	}
}
