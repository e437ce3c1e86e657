package reactor

import (
	"errors"
	"testing"
	"time"

	"github.com/ingestq/ingestq/reactor/queue"
)

// A listing of a state's folder that lacks a job found waiting there ends
// its wait here only when it was taken after the job arrived: a job handed
// on to a worker here runs its step before the watch's next listing comes,
// which may have been taken before the job arrived. Lacking the job, that
// listing ended the back end's outage while the back end was still out
// (the gauge cleared, the state took jobs again, and a step that got an
// answer later no longer released the waiting job). A listing taken after
// one that came later, or after one that showed the job, still ends it.
func TestAListingFromBeforeAJobArrivedLeavesItsWaitForABackEnd(t *testing.T) {
	var told []bool
	o := newOutages(nil, func(queue.State, string, time.Time) {})
	o.tell = func(_ string, out bool) { told = append(told, out) }
	out := UnavailableToAll("the inventory", errors.New("refused"))
	o.listed(queue.Recording, nil) // the watch's first listing, empty
	o.down(queue.Recording, "05-jid0000000001", out, time.Minute)
	o.listed(queue.Recording, nil) // taken before the job arrived, come after its step
	if len(told) != 1 || !told[0] || !o.paused(queue.Recording) {
		t.Fatalf("after a listing taken before the waiting job arrived: told %v, Recording paused %v; want the inventory out, Recording paused",
			told, o.paused(queue.Recording))
	}
	o.listed(queue.Recording, nil) // taken after the one before came: the job has gone (another host took it)
	if len(told) != 2 || told[1] || o.paused(queue.Recording) {
		t.Fatalf("after the next listing without the job: told %v, Recording paused %v; want the inventory back, Recording not paused",
			told, o.paused(queue.Recording))
	}

	o.listed(queue.Recording, []string{"05-jid0000000002"}) // the job's arrival listed before its step
	o.down(queue.Recording, "05-jid0000000002", out, time.Minute)
	o.listed(queue.Recording, nil) // so taken after it arrived: the job has gone
	if len(told) != 4 || !told[2] || told[3] {
		t.Fatalf("a job listed in Recording before it found the inventory out, then not: told %v; want the inventory out, then back", told)
	}
}
