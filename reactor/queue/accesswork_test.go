package queue_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/reactor/queue"
)

func ourToken(ark string) map[string]any {
	return queue.AccessToken{Token: "t-" + ark, ARK: ark, Format: queue.FormatZip, TokenStatus: queue.TokenNotReady}.Map(nil)
}

// A request left Processing by a session that died is taken again; one
// worked by a live session is passed over with a wait on its lock.
func TestAccessWorkTakesOrphans(t *testing.T) {
	r := newRun(t)
	ctx := t.Context()
	a, err := r.q.CreateAccess(ctx, queue.AccessSmall, ourToken("ark:/1/a"))
	r.ok(err)
	connA, qa := r.second()
	got, waits, err := qa.AcquireAccessWork(ctx, queue.AccessSmall, nil)
	r.ok(err)
	if got == nil || got.ID != a.ID || len(waits) != 0 {
		t.Fatalf("acquired %v (waits %v), want %s", got, waits, a.ID)
	}
	r.ok(qa.MoveAccess(ctx, got, queue.Processing, "", nil))

	again, waits, err := r.q.AcquireAccessWork(ctx, queue.AccessSmall, nil)
	r.ok(err)
	lock := r.q.Path("/access/small/" + a.ID + "/lock")
	if again != nil || len(waits) != 1 || waits[0].Path != lock || !waits[0].Present {
		t.Fatalf("while A works it: acquired %v, waits %v; want nothing and a wait on %s", again, waits, lock)
	}
	r.closeAndWait(connA, "/access/small/"+a.ID+"/lock")
	again, _, err = r.q.AcquireAccessWork(ctx, queue.AccessSmall, nil)
	r.ok(err)
	if again == nil || again.ID != a.ID || again.State() != queue.Processing {
		t.Fatalf("after A died: acquired %v, want %s in Processing", again, a.ID)
	}
	tok, err := again.AccessToken()
	r.ok(err)
	tok.TokenStatus, tok.URL = queue.TokenReady, "http://x/p.zip"
	r.ok(r.q.MoveAccess(ctx, again, queue.Completed, "", tok.Map(again.Token)))
	done, err := r.q.FindAccess(ctx, a.ID)
	r.ok(err)
	if dt, _ := done.AccessToken(); done.State() != queue.Completed || done.Locked || dt.URL != "http://x/p.zip" || dt.ARK != "ark:/1/a" {
		t.Fatalf("completed request: %s locked=%v token %+v", done.State(), done.Locked, dt)
	}
}

// Another tool's request is left alone; a request whose status is not
// written yet (mrt-zk writes its nodes one by one) is waited for.
func TestAccessWorkLeavesOthersAndWaitsForStatus(t *testing.T) {
	r := newRun(t)
	ctx := t.Context()
	foreign, err := r.q.CreateAccess(ctx, queue.AccessLarge, map[string]any{"token": "abc", "delivery-node": 7})
	r.ok(err)
	_, err = r.conn.Create(r.q.Path("/access/large/qid9999999999"), nil, 0, zk.WorldACL(zk.PermAll))
	r.ok(err)
	got, waits, err := r.q.AcquireAccessWork(ctx, queue.AccessLarge, (*queue.Access).Ours)
	r.ok(err)
	status := r.q.Path("/access/large/qid9999999999/status")
	if got != nil || len(waits) != 1 || waits[0].Path != status || waits[0].Present {
		t.Fatalf("acquired %v, waits %v; want nothing, a wait for %s", got, waits, status)
	}
	a, err := r.q.FindAccess(ctx, foreign.ID)
	r.ok(err)
	if a.Locked || a.State() != queue.Pending || a.Queue != queue.AccessLarge {
		t.Fatalf("foreign request touched: %+v", a)
	}
}

// An operator requeues a Failed request and deletes: Failed → Deleted, a
// Completed one removed; a Pending one is refused, naming its state.
func TestAccessRequeueAndDelete(t *testing.T) {
	r := newRun(t)
	ctx := t.Context()
	a, err := r.q.CreateAccess(ctx, queue.AccessSmall, ourToken("ark:/1/b"))
	r.ok(err)
	if _, _, err := r.q.RemoveAccess(ctx, a.ID); !errors.Is(err, queue.ErrRefused) {
		t.Fatalf("delete of a Pending request: %v, want refused", err)
	}
	if _, err := r.q.RequeueAccess(ctx, a.ID); !errors.Is(err, queue.ErrRefused) {
		t.Fatalf("requeue of a Pending request: %v, want refused", err)
	}
	got, _, err := r.q.AcquireAccessWork(ctx, queue.AccessSmall, nil)
	r.ok(err)
	r.ok(r.q.MoveAccess(ctx, got, queue.Processing, "", nil))
	r.ok(r.q.MoveAccess(ctx, got, queue.Failed, "object ark:/1/b is not in storage", nil))
	if _, err := r.q.RequeueAccess(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	got, _, err = r.q.AcquireAccessWork(ctx, queue.AccessSmall, nil)
	r.ok(err)
	if got == nil || got.State() != queue.Processing {
		t.Fatalf("requeued request not taken: %v", got)
	}
	r.ok(r.q.MoveAccess(ctx, got, queue.Failed, "again", nil))
	if _, removed, err := r.q.RemoveAccess(ctx, a.ID); err != nil || removed {
		t.Fatalf("delete of a Failed request: removed %v, %v; want it kept as Deleted", removed, err)
	}
	if d, _ := r.q.FindAccess(ctx, a.ID); d.State() != queue.Deleted {
		t.Fatalf("deleted request is %s", d.State())
	}
	if _, removed, err := r.q.RemoveAccess(ctx, a.ID); err != nil || !removed {
		t.Fatalf("delete of a Deleted request: removed %v, %v; want it removed", removed, err)
	}
	if _, err := r.q.FindAccess(ctx, a.ID); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("removed request: %v, want not found", err)
	}
	all, problems, err := r.q.AccessRequests(ctx)
	r.ok(err)
	if len(all) != 0 || len(problems) != 0 {
		t.Fatalf("requests left: %v %v", all, problems)
	}
}

// Each queue numbers its requests on its own: a qid alone that both
// queues have is refused, naming both refs; a ref names one.
func TestAccessRefs(t *testing.T) {
	r := newRun(t)
	ctx := t.Context()
	small, err := r.q.CreateAccess(ctx, queue.AccessSmall, ourToken("ark:/1/s"))
	r.ok(err)
	large, err := r.q.CreateAccess(ctx, queue.AccessLarge, ourToken("ark:/1/l"))
	r.ok(err)
	if small.ID != large.ID {
		t.Fatalf("qids %s and %s: the test wants one qid in both queues", small.ID, large.ID)
	}
	if _, err := r.q.FindAccess(ctx, small.ID); !errors.Is(err, queue.ErrRefused) || !strings.Contains(err.Error(), "small/"+small.ID) {
		t.Fatalf("find %s: %v, want refused naming small/%s and large/%s", small.ID, err, small.ID, small.ID)
	}
	got, err := r.q.FindAccess(ctx, large.Ref())
	r.ok(err)
	if tok, _ := got.AccessToken(); got.Queue != queue.AccessLarge || tok.ARK != "ark:/1/l" {
		t.Fatalf("find %s: %+v", large.Ref(), got)
	}
}

// A request's move tried again after an earlier call's try got no answer
// (Retried) is recognised by its own bytes when that try had landed, as a
// job's or a batch's is (decision 228); unmarked, it is stale; when another
// writer moved the request first, it is stale and known not to have landed
// (the version it would have made holds the other's bytes), not unknown.
func TestAccessRetriedMoveRecognisesItsLandedTry(t *testing.T) {
	for _, tc := range []struct {
		name             string
		retried, foreign bool
		wantErr          error // nil: the try is recognised as landed
	}{
		{"retried", true, false, nil},
		{"not marked", false, false, queue.ErrStale},
		{"another writer", true, true, queue.ErrStale},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRun(t)
			ctx := t.Context()
			a, tok := r.processingAccess("ark:/1/r")
			view := *a // as read before the first try
			tok.TokenStatus = queue.TokenReady
			c := queue.AccessChange{Token: tok.Map(a.Token), At: r.q.Now()}
			first := c
			if tc.foreign {
				first.Message = "another writer's"
			}
			r.ok(r.q.SetAccessStatus(ctx, a, queue.Completed, first)) // lands; say its reply was lost
			c.Retried = tc.retried
			err := r.q.SetAccessStatus(ctx, &view, queue.Completed, c)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) || queue.MaybeApplied(err) {
				t.Fatalf("the second try: %v (maybe applied %v); want %v, not maybe applied", err, queue.MaybeApplied(err), tc.wantErr)
			}
			if err == nil && (view.State() != queue.Completed || view.Locked) {
				t.Fatalf("the view after a recognised try is %s, locked %v; want Completed, unlocked", view.State(), view.Locked)
			}
		})
	}
}

// A request another session has just taken (locked, still Pending) is
// waited for like one it works: should that session die before its move
// to Processing, the lock's going is what says the request is free.
func TestAccessWorkWaitsForARequestBeingTaken(t *testing.T) {
	r := newRun(t)
	ctx := t.Context()
	a, err := r.q.CreateAccess(ctx, queue.AccessSmall, ourToken("ark:/1/p"))
	r.ok(err)
	_, qa := r.second()
	if got, _, err := qa.AcquireAccessWork(ctx, queue.AccessSmall, nil); err != nil || got == nil || got.State() != queue.Pending {
		t.Fatalf("acquired %v, %v; want %s, Pending", got, err, a.ID)
	}
	got, waits, err := r.q.AcquireAccessWork(ctx, queue.AccessSmall, (*queue.Access).Ours)
	r.ok(err)
	lock := r.q.Path("/access/small/" + a.ID + "/lock")
	if got != nil || len(waits) != 1 || waits[0].Path != lock || !waits[0].Present {
		t.Fatalf("acquired %v, waits %v; want nothing and a wait on %s", got, waits, lock)
	}
}

// A requeued request's token says NotReady again, with the move: its
// token's Failed would tell a reader of the token alone (mrt-zk's Access)
// that the request failed while it is assembled again.
func TestAccessRequeueSaysNotReady(t *testing.T) {
	r := newRun(t)
	ctx := t.Context()
	a, tok := r.processingAccess("ark:/1/q")
	tok.TokenStatus = queue.TokenFailed
	r.ok(r.q.MoveAccess(ctx, a, queue.Failed, "storage away", tok.Map(a.Token)))
	_, err := r.q.RequeueAccess(ctx, a.ID)
	r.ok(err)
	again, err := r.q.FindAccess(ctx, a.ID)
	r.ok(err)
	if at, _ := again.AccessToken(); again.State() != queue.Processing || at.TokenStatus != queue.TokenNotReady || at.ARK != "ark:/1/q" {
		t.Fatalf("requeued request: %s, token %+v; want Processing, NotReady", again.State(), at)
	}
}

// processingAccess queues a request of ours for ark, takes it, and moves it
// to Processing; it returns the request and its token.
func (r *run) processingAccess(ark string) (*queue.Access, queue.AccessToken) {
	r.t.Helper()
	ctx := r.t.Context()
	_, err := r.q.CreateAccess(ctx, queue.AccessSmall, ourToken(ark))
	r.ok(err)
	a, _, err := r.q.AcquireAccessWork(ctx, queue.AccessSmall, nil)
	r.ok(err)
	r.ok(r.q.MoveAccess(ctx, a, queue.Processing, "", nil))
	tok, err := a.AccessToken()
	r.ok(err)
	return a, tok
}
