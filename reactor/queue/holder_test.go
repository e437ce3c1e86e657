package queue_test

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// A daemon's acquisition names it in the job's status (holder), kept by a
// move that keeps the lock and dropped by one that releases it; the next
// daemon to acquire a job its holder let go without moving it learns that
// holder (TakenFrom), and one acquiring a job moved on learns none. A
// queue of no registered host (a CLI's) leaves the status as it is.
func TestAcquisitionNamesTheJobsHolder(t *testing.T) {
	r := newRun(t)
	ctx := t.Context()
	connA, qa, qb := r.hostsAB()
	b := r.processing(true)
	j := r.job(b, "jid0", 5, nil)
	a := queue.JobHolder{Host: "a", Session: connA.SessionID(), Version: 1} // its acquisition of the new job (version 0)
	holder := func(s queue.State) *queue.JobHolder {
		t.Helper()
		got, err := r.q.LoadJob(ctx, j.ID)
		r.ok(err)
		if got.State() != s {
			t.Fatalf("job in %s, want %s", got.State(), s)
		}
		return got.Status.Holder
	}

	got, err := qa.TryAcquireJob(ctx, queue.Pending, j.Ref(), queue.Admission{})
	if err != nil || got == nil || got.TakenFrom != nil {
		t.Fatalf("a's acquisition in Pending: %+v %v, want the job, taken from none", got, err)
	}
	if h := holder(queue.Pending); h == nil || *h != a {
		t.Fatalf("holder %+v after a's acquisition, want %+v", h, a)
	}
	r.ok(qa.SetJobStatus(ctx, got, queue.Estimating, queue.JobChange{})) // kept: a runs Estimating too
	if h := holder(queue.Estimating); h == nil || *h != a {
		t.Fatalf("holder %+v after a's move that kept the lock, want %+v", h, a)
	}
	r.ok(qa.UnlockJob(ctx, got)) // let go without a move (a step's wait)
	got, err = qb.TryAcquireJob(ctx, queue.Estimating, j.Ref(), queue.Admission{})
	if err != nil || got == nil || got.TakenFrom == nil || *got.TakenFrom != a {
		t.Fatalf("b's acquisition in Estimating: %+v %v, want the job, taken from %+v", got, err, a)
	}
	r.ok(qb.SetJobStatus(ctx, got, queue.Provisioning, queue.JobChange{Release: true}))
	if h := holder(queue.Provisioning); h != nil {
		t.Fatalf("holder %+v after b's move that released the lock, want none", h)
	}
	got, err = qa.TryAcquireJob(ctx, queue.Provisioning, j.Ref(), queue.Admission{})
	if err != nil || got == nil || got.TakenFrom != nil {
		t.Fatalf("a's acquisition in Provisioning: %+v %v, want the job, taken from none", got, err)
	}
	r.ok(qa.UnlockJob(ctx, got))
	got, err = r.q.TryAcquireJob(ctx, queue.Provisioning, j.Ref(), queue.Admission{})
	if err != nil || got == nil || got.TakenFrom != nil {
		t.Fatalf("the CLI's acquisition: %+v %v, want the job, taken from none", got, err)
	}
	a.Version = 5 // a's second acquisition: after its move, b's acquisition and b's move
	if h := holder(queue.Provisioning); h == nil || *h != a {
		t.Fatalf("holder %+v after the CLI's acquisition, want a's still (%+v)", h, a)
	}
}

// A move that keeps the lock names the session that took the job (its
// acquisition's holder), not the Queue's session at the move: after that
// session expired, a move (the reactor's retryMove going on through the
// outage) named the new session, which holds no lock, so that the next
// taker said nothing of a job whose holder's session had ended, and a try
// of the move made again after one whose reply was lost wrote other bytes
// than the first, which then could not be confirmed as landed.
func TestAKeptLockMoveNamesTheSessionThatTookTheJob(t *testing.T) {
	r := newRun(t)
	ctx := t.Context()
	proxy := zktest.ProxyToShared(t)
	t.Cleanup(func() { _ = proxy.Close() })
	s, err := zkwatch.Dial(ctx, zkwatch.Config{Servers: []string{proxy.Addr()}, SessionTimeout: time.Second, Logger: testLogger(t)})
	r.ok(err)
	t.Cleanup(s.Close)
	qa, err := queue.New(s.Conn, r.root, queue.WithLogger(testLogger(t)))
	r.ok(err)
	r.ok(qa.RegisterHost(ctx, "a", nil))
	j := r.job(r.processing(true), "jid0", 5, nil)
	got, err := qa.TryAcquireJob(ctx, queue.Pending, j.Ref(), queue.Admission{})
	if err != nil || got == nil {
		t.Fatalf("a's acquisition: %+v %v, want the job", got, err)
	}
	took := queue.JobHolder{Host: "a", Session: s.Conn.SessionID(), Version: 1}

	// The session expires under the held job (its lock goes), and a new one
	// is opened.
	ok, _, lockGone, err := r.conn.ExistsW(r.q.Path("/jobs/" + j.ID + "/lock"))
	if err != nil || !ok {
		t.Fatalf("a's lock: %v %v, want it there", ok, err)
	}
	expired := s.Expirations()
	proxy.Pause()
	proxy.Cut()
	waitEvent(t, lockGone, zk.EventNodeDeleted, "the paused session's lock to go with it")
	proxy.Resume()
	r.ok(s.WaitExpirations(ctx, expired+1))

	r.ok(qa.SetJobStatus(ctx, got, queue.Estimating, queue.JobChange{}))
	after, err := r.q.LoadJob(ctx, j.ID)
	r.ok(err)
	if h := after.Status.Holder; h == nil || *h != took {
		t.Fatalf("holder %+v after a's move that kept the lock, want the session that took the job (%+v; now 0x%x)", h, took, s.Conn.SessionID())
	}
}

// An access request's status names its holder as a job's does: written by
// a daemon's acquisition, kept by its move to Processing, dropped by the
// move that ends it; the next daemon to take a Processing request its
// holder did not move on learns that holder. Another tool's request is
// taken with its status written back byte for byte, naming no holder.
func TestAcquisitionNamesTheAccessRequestsHolder(t *testing.T) {
	r := newRun(t)
	ctx := t.Context()
	connA, qa, qb := r.hostsAB()
	a := queue.JobHolder{Host: "a", Session: connA.SessionID(), Version: 1} // its acquisition of the new request (version 0)
	tok := queue.AccessToken{Token: "t-holder", ARK: "ark:/1/holder", Format: queue.FormatZip, TokenStatus: queue.TokenNotReady}
	made, err := r.q.CreateAccess(ctx, queue.AccessSmall, tok.Map(nil))
	r.ok(err)
	holder := func(s queue.State) *queue.JobHolder {
		t.Helper()
		got, err := r.q.LoadAccess(ctx, made.Queue, made.ID)
		r.ok(err)
		if got.State() != s {
			t.Fatalf("request %s, want %s", got.State(), s)
		}
		return got.Status.Holder
	}

	got, _, err := qa.AcquireAccessWork(ctx, queue.AccessSmall, nil)
	if err != nil || got == nil || got.Ref() != made.Ref() || got.TakenFrom != nil {
		t.Fatalf("a's acquisition: %+v %v, want %s, taken from none", got, err, made.Ref())
	}
	if h := holder(queue.Pending); h == nil || *h != a {
		t.Fatalf("holder %+v after a's acquisition, want %+v", h, a)
	}
	r.ok(qa.SetAccessStatus(ctx, got, queue.Processing, queue.AccessChange{}))
	if h := holder(queue.Processing); h == nil || *h != a {
		t.Fatalf("holder %+v after a's move to Processing, want %+v", h, a)
	}
	r.ok(qa.UnlockAccess(ctx, got)) // a's lock gone, the request not moved on
	got, _, err = qb.AcquireAccessWork(ctx, queue.AccessSmall, nil)
	if err != nil || got == nil || got.TakenFrom == nil || *got.TakenFrom != a {
		t.Fatalf("b's acquisition in Processing: %+v %v, want %s taken from %+v", got, err, made.Ref(), a)
	}
	r.ok(qb.SetAccessStatus(ctx, got, queue.Completed, queue.AccessChange{}))
	if h := holder(queue.Completed); h != nil {
		t.Fatalf("holder %+v of a Completed request, want none", h)
	}

	// Another tool's request, its status as that tool wrote it.
	p := r.q.Path("/access/small/" + r.husk("/access/small/", "qid"))
	status := []byte(`{"status": "Pending", "last_modified": "2026-11-28T10:00:00+0000", "message": "", "retry": 0}`)
	_, err = r.conn.Create(p+"/token", []byte(`{"cloud-content-byte": 10}`), 0, zk.WorldACL(zk.PermAll))
	r.ok(err)
	_, err = r.conn.Create(p+"/status", status, 0, zk.WorldACL(zk.PermAll))
	r.ok(err)
	got, _, err = qa.AcquireAccessWork(ctx, queue.AccessSmall, nil)
	if err != nil || got == nil || got.Status.Holder != nil {
		t.Fatalf("a's acquisition of another tool's request: %+v %v, want it, naming no holder", got, err)
	}
	if data, _, err := r.conn.Get(p + "/status"); err != nil || string(data) != string(status) {
		t.Fatalf("another tool's status after a's acquisition: %s %v, want it as written: %s", data, err, status)
	}
}
