package reactor

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/ingestq/ingestq/reactor/queue"
)

// roundOf runs one dispatch round of p and returns the refs it handed out.
func roundOf(t *testing.T, p *jobPool) []string {
	t.Helper()
	got := make(chan []string)
	go func() {
		var refs []string
		for ref := range p.refs {
			refs = append(refs, ref)
		}
		got <- refs
	}()
	p.round(t.Context())
	close(p.refs)
	p.refs = make(chan string)
	return <-got
}

// A job this daemon moved out of a state is passed over while the folder's
// listing (which may predate the move) still shows it, instead of being
// read to find it gone; a listing without it ends that, so the job is
// taken again if it comes back.
func TestPoolPassesOverJobsItMovedOut(t *testing.T) {
	p := &jobPool{name: "estimating", state: queue.Estimating, refs: make(chan string), wake: make(wakeup, 1),
		skip: func(string) bool { return false }, log: slog.New(slog.DiscardHandler)}
	p.listed([]string{"05-jid1", "05-jid2", "05-jid3"})
	p.left("05-jid2")
	if got := roundOf(t, p); !slices.Equal(got, []string{"05-jid1", "05-jid3"}) {
		t.Fatalf("round handed out %v, want the refs but the one moved out", got)
	}
	p.listed([]string{"05-jid1", "05-jid2", "05-jid3"}) // a listing taken before the move
	if got := roundOf(t, p); slices.Contains(got, "05-jid2") {
		t.Fatalf("round handed out %v: a listing older than the move brought the moved job back", got)
	}
	p.listed([]string{"05-jid1", "05-jid3"})
	p.listed([]string{"05-jid1", "05-jid2", "05-jid3"}) // requeued into the state by someone
	if got := roundOf(t, p); !slices.Contains(got, "05-jid2") {
		t.Fatalf("round handed out %v: a job back in the state after a listing without it is passed over", got)
	}
}

// A batch whose news comes while a report worker tries it is not tried by
// a second worker at once; the news waits for the try's end, and is
// dropped when the try took the batch, kept (with a wake-up) when not.
func TestReportTriesABatchOnceAtATime(t *testing.T) {
	p := newPool("batch report", 2, func(context.Context) (bool, error) { return false, nil }, slog.New(slog.DiscardHandler))
	r := &Reactor{cfg: Config{Roles: AllRoles()}, pools: map[string]waker{sigReport: p}}
	r.queueReport("bid1")
	ids, ok := r.nextReport()
	if !ok || !slices.Equal(ids, []string{"bid1"}) {
		t.Fatalf("next report %v %v, want bid1", ids, ok)
	}
	r.queueReport("bid1") // its watch reports it empty while the try runs
	if ids, ok := r.nextReport(); ok {
		t.Fatalf("next report %v while bid1 is being tried, want none", ids)
	}
	r.doneReport([]string{"bid1"}, false)
	select {
	case <-p.wake:
	default:
		t.Fatal("a try that did not take the batch, with news of it waiting, woke no worker")
	}
	if ids, ok := r.nextReport(); !ok || !slices.Equal(ids, []string{"bid1"}) {
		t.Fatalf("next report %v %v after the try, want bid1 again", ids, ok)
	}
	r.queueReport("bid1")
	r.doneReport([]string{"bid1"}, true)
	if ids, ok := r.nextReport(); ok {
		t.Fatalf("next report %v after bid1 was taken, want none: its news was answered", ids)
	}
}

// The release of what a job waited for (a host, a batch) ends that wait
// only: the job's deferral since for another reason stands. Its first
// wait, passed by its time, left its name under its key; the key's
// release then ended the wait its step had asked for since, and the job
// was taken before its time.
func TestAReleaseLeavesAJobsLaterDeferral(t *testing.T) {
	var d deferrals
	now := time.Now()
	d.addFor("jid1", "host host-b", now.Add(-time.Second)) // its time passed: taken here
	if d.skip("jid1") {
		t.Fatal("a job whose deferral's time has passed is passed over")
	}
	d.add("jid1", now.Add(time.Hour)) // its step asked to wait an hour
	if n := d.release("host host-b"); n != 0 || !d.skip("jid1") {
		t.Fatalf("the host's release ended %d waits, and the job is passed over: %v; want 0, and passed over (its step's wait)", n, d.skip("jid1"))
	}
	d.addFor("jid2", "bid1", now.Add(time.Hour))
	if n := d.release("bid1"); n != 1 || d.skip("jid2") {
		t.Fatalf("its batch's release ended %d waits, and the job is passed over: %v; want 1, and taken", n, d.skip("jid2"))
	}
}
