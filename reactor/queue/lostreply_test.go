package queue_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/internal/queuetest"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// An object's lock through a moment of ZooKeeper away, as when a server of
// the ensemble restarts or its leader is elected: the session lives on, and
// so would a lock left behind, the object "locked by another job" for as
// long as the daemon runs. A lock whose create got no answer, and landed
// once the connection was back, is this session's own. Before, LockStorage
// failed, and the lock was left to the session.
func TestObjectLockWhoseReplyWasLost(t *testing.T) {
	q, proxy := proxiedQueue(t, zktest.Root(t))
	const ark = "ark:/99999/fk4lostreply"
	ok, err := throughPause(t, proxy, q, func() (bool, error) { return q.LockStorage(t.Context(), ark, "") })
	held, herr := q.HoldsStorage(t.Context(), ark)
	if err != nil || !ok || !held {
		t.Fatalf("a lock whose create got no answer: LockStorage = %v, %v; this session holds it: %v (%v); want true, its own", ok, err, held, herr)
	}
}

// An unlock that met a moment of ZooKeeper away frees the lock once the
// connection is back. Before, UnlockStorage failed at once, and the lock
// was left to the session.
func TestObjectUnlockThroughAnOutage(t *testing.T) {
	q, proxy := proxiedQueue(t, zktest.Root(t))
	const ark = "ark:/99999/fk4unlock"
	if ok, err := q.LockStorage(t.Context(), ark, ""); err != nil || !ok {
		t.Fatalf("LockStorage = %v, %v", ok, err)
	}
	ok, err := throughPause(t, proxy, q, func() (bool, error) { return q.UnlockStorage(t.Context(), ark) })
	held, herr := q.HoldsStorage(t.Context(), ark)
	if err != nil || !ok || held {
		t.Fatalf("an unlock that met an outage: UnlockStorage = %v, %v; lock still held %v (%v); want true, and released", ok, err, held, herr)
	}
}

// An admin's job lock through a moment of ZooKeeper away: a lock whose
// create got no answer, and landed, is this session's own, and one that
// another session holds is still ErrLocked. Before, LockJob failed ("no
// answer from ZooKeeper") while the session held the lock, which nothing
// then released.
func TestAdminLockWhoseReplyWasLost(t *testing.T) {
	r := newRun(t)
	_, j := r.oneJob()
	q, proxy := proxiedQueue(t, r.root)
	var locked *queue.Job
	_, err := throughPause(t, proxy, q, func() (bool, error) {
		var err error
		locked, err = q.LockJob(t.Context(), j.ID)
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("a job lock whose create got no answer: LockJob = %v; want it taken", err)
	}
	// Only the session that holds the lock deletes it on unlock.
	r.ok(q.UnlockJob(t.Context(), locked))
	if after, err := r.q.LoadJob(t.Context(), j.ID); err != nil || after.Locked {
		t.Fatalf("after this session's unlock the job is locked: %v (%v); want the lock its own, and gone", after.Locked, err)
	}

	held, err := r.q.LockJob(t.Context(), j.ID)
	r.ok(err)
	_, err = throughPause(t, proxy, q, func() (bool, error) {
		_, err := q.LockJob(t.Context(), j.ID)
		return false, err
	})
	if !errors.Is(err, queue.ErrLocked) {
		t.Fatalf("a job locked by another session, through a pause: LockJob = %v; want ErrLocked", err)
	}
	r.ok(r.q.UnlockJob(t.Context(), held))
}

// lostReplyTimeout is how long these tests' queues wait for a reply: a
// reply held in the paused proxy is lost after it. Each such loss costs
// it, and a reply not held must come within it: at 300 ms, under other
// tests' load, about 1 run in 100 had one of those late.
const lostReplyTimeout = time.Second

// proxiedQueue is a queue whose session reaches the shared server through
// a proxy, with requests given up on after lostReplyTimeout.
func proxiedQueue(t *testing.T, root string) (*queue.Queue, *zktest.Proxy) {
	proxy := zktest.ProxyToShared(t)
	q, err := queue.New(zktest.Connect(t, proxy.Addr()), root, queue.WithLogger(testLogger(t)),
		queue.WithRequestTimeout(lostReplyTimeout))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Init(t.Context()); err != nil {
		t.Fatal(err)
	}
	return q, proxy
}

// throughPause runs call with the proxy paused until call asks ZooKeeper
// again (its first request got no answer) or ends, then resumes it, and
// returns what call returned.
func throughPause(t *testing.T, proxy *zktest.Proxy, q *queue.Queue, call func() (bool, error)) (bool, error) {
	t.Helper()
	got := make(chan result[bool], 1)
	reads, writes := q.Requests()
	proxy.Pause()
	go func() {
		ok, err := call()
		got <- result[bool]{ok, err}
	}()
	r := resumeWhenSent(proxy, q, reads+writes+2, got)
	return r.v, r.err
}

type result[T any] struct {
	v   T
	err error
}

// resumeWhenSent resumes the proxy once q has sent n requests in all, or
// the call whose result comes on got has ended, and returns that result.
func resumeWhenSent[T any](proxy *zktest.Proxy, q *queue.Queue, n uint64, got chan result[T]) result[T] {
	tick := time.NewTicker(10 * time.Millisecond) // no event says a request was sent: poll the count
	defer tick.Stop()
	for {
		select {
		case r := <-got:
			proxy.Resume()
			return r
		case <-tick.C:
		}
		if reads, writes := q.Requests(); reads+writes >= n {
			proxy.Resume()
			return <-got
		}
	}
}

// Two minters of one counter race, and the one whose multi got no answer
// (its server gone with it) finds the counter at the number it wrote,
// written by the other: only its own record proves that its write landed.
// Before, the counter's bytes did, and both jobs got the same value (seen
// in TestZooKeeperRollingRestartAndLeaderKill: two jobs of one batch given
// one ARK, the second object stored as its version 2).
func TestMintWhoseReplyWasLostToARacer(t *testing.T) {
	proxy := zktest.ProxyToShared(t)
	root := zktest.Root(t)
	var armed atomic.Bool
	var once sync.Once
	held := make(chan struct{})
	// The queue logs each request before it sends it: A's minting multi is
	// held in the paused proxy.
	log := slog.New(onLog(func(_, op string) {
		if op == "multi" && armed.Load() {
			once.Do(func() { proxy.Pause(); close(held) })
		}
	}))
	qa, err := queue.New(zktest.Connect(t, proxy.Addr()), root, queue.WithLogger(log), queue.WithRequestTimeout(lostReplyTimeout))
	if err != nil {
		t.Fatal(err)
	}
	qb, err := queue.New(zktest.Connect(t), root, queue.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	if err := qb.Init(t.Context()); err != nil {
		t.Fatal(err)
	}
	format := func(n uint64) string { return strconv.FormatUint(n, 10) }
	if v, err := qb.Mint(t.Context(), "c", "jid0000000001", format); err != nil || v != "1" {
		t.Fatalf("the first mint: %q, %v", v, err)
	}

	armed.Store(true)
	got := make(chan result[string], 1)
	go func() {
		v, err := qa.Mint(t.Context(), "c", "jid0000000002", format)
		got <- result[string]{v, err}
	}()
	select {
	case <-held:
	case r := <-got:
		t.Fatalf("A minted %q (%v) without a multi", r.v, r.err)
	}
	reads, writes := qa.Requests()
	vb, err := qb.Mint(t.Context(), "c", "jid0000000003", format)
	if err != nil {
		t.Fatal(err)
	}
	// Once A gives its multi up and asks whether it landed, everything
	// goes through.
	r := resumeWhenSent(proxy, qa, reads+writes+1, got)
	if r.err != nil || r.v == vb {
		t.Fatalf("A minted %q (%v) and B %q; want two values", r.v, r.err, vb)
	}
	if have, ok, err := qb.Minted(t.Context(), "jid0000000002"); err != nil || !ok || have != r.v {
		t.Fatalf("A's record: %q, %v, %v; want %q", have, ok, err, r.v)
	}
}

// onLog is a slog handler that calls f with each record's message and
// the op of a ZooKeeper request the queue logs (at debug level, before
// sending it; "" in other records).
type onLog func(msg, op string)

func (f onLog) Enabled(context.Context, slog.Level) bool { return true }
func (f onLog) WithAttrs([]slog.Attr) slog.Handler       { return f }
func (f onLog) WithGroup(string) slog.Handler            { return f }
func (f onLog) Handle(_ context.Context, r slog.Record) error {
	op := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "op" {
			op = a.Value.String()
		}
		return true
	})
	f(r.Message, op)
	return nil
}

// Two reporters of one daemon (its batch workers share its session) look at
// one batch at once: A locks it and moves it to Reporting, and B's multi,
// sent after A's landed, is refused and its reply lost. The lock, this
// session's, is A's. Before, B took it for its own: both held the batch,
// and B announced a move to Reporting at a stamp ZooKeeper never had (seen
// in TestZooKeeperRollingRestartAndLeaderKill: `Reporting:2`). Now B waits
// for A's look to end, and reads the batch locked.
func TestTwoReportersOfOneSessionLookAtOneBatch(t *testing.T) {
	r := newRun(t)
	ctx := t.Context()
	r.twoDoneJobs()

	proxy := zktest.ProxyToShared(t)
	var multis atomic.Int32
	aAtMulti, bAtMulti, bWaits, held := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{})
	var bWaitsOnce sync.Once
	gotA, gotB := make(chan result[*queue.Batch], 1), make(chan result[*queue.Batch], 1)
	aDone, bDone := make(chan struct{}), make(chan struct{})
	log := slog.New(onLog(func(msg, op string) {
		if strings.HasPrefix(msg, waitingForTurn) { // B's, A's look being under way
			bWaitsOnce.Do(func() { close(bWaits) })
		}
		if op != "multi" {
			return
		}
		switch multis.Add(1) {
		case 1: // A's, sent once B has read the batch too (or waits for A, or gave it up)
			close(aAtMulti)
			select {
			case <-bAtMulti:
			case <-bWaits:
			case <-bDone:
			}
		case 2: // B's, held in the paused proxy once A's has landed
			close(bAtMulti)
			<-aDone
			proxy.Pause()
			close(held)
		}
	}))
	q, err := queue.New(zktest.Connect(t, proxy.Addr()), r.root, queue.WithLogger(log), queue.WithRequestTimeout(lostReplyTimeout))
	r.ok(err)
	acquire := func(got chan result[*queue.Batch], done chan struct{}) {
		defer close(done)
		b, _, err := q.AcquireCompletedBatch(ctx, nil, nil)
		got <- result[*queue.Batch]{b, err}
	}
	go acquire(gotA, aDone)
	<-aAtMulti
	go acquire(gotB, bDone)
	a := <-gotA
	var rb result[*queue.Batch]
	select {
	case <-held:
		reads, writes := q.Requests()
		rb = resumeWhenSent(proxy, q, reads+writes+1, gotB)
	case rb = <-gotB:
	}
	if a.err != nil || a.v == nil || rb.err != nil || rb.v != nil {
		t.Fatalf("A acquired %s (%v), B %s (%v); want A the batch, B none", idOf(a.v), a.err, idOf(rb.v), rb.err)
	}
}

// A daemon's intake looks for a Pending batch (all of them, as at its
// start) while its reporter looks at a Processing one whose jobs are done,
// named by the news of its last job's end. The intake's look passes it
// over; the reporter's must still take it. With 1119's turns (bfa0362) the
// reporter's look passed over a batch another look here was reading, with
// nothing to watch, and the news was spent: the batch was not reported
// until the rescan (TestAdminMovesRecordedOnce, cmd/ingestq/cli).
func TestAReportLookWaitsForAnIntakeLookAtTheBatch(t *testing.T) {
	r := newRun(t)
	ctx := t.Context()
	b, _, _ := r.twoDoneJobs()

	reporterWaits, reporterDone := make(chan struct{}), make(chan struct{})
	var once sync.Once
	log := slog.New(onLog(func(msg, _ string) {
		if strings.HasPrefix(msg, waitingForTurn) {
			once.Do(func() { close(reporterWaits) })
		}
	}))
	q, err := queue.New(zktest.Connect(t), r.root, queue.WithLogger(log))
	r.ok(err)
	got := make(chan result[*queue.Batch], 1)
	_, _, err = q.AcquirePendingBatchOf(ctx, nil, nil, func(string) {
		// The intake's look has read the batch (Processing), and is
		// still under way: the reporter looks now.
		go func() {
			defer close(reporterDone)
			rb, _, err := q.AcquireCompletedBatch(ctx, []string{b.ID}, nil)
			got <- result[*queue.Batch]{rb, err}
		}()
		select {
		case <-reporterWaits:
		case <-reporterDone:
		}
	})
	r.ok(err)
	if rb := <-got; rb.err != nil || rb.v == nil || rb.v.ID != b.ID {
		t.Fatalf("the reporter's look beside the intake's acquired %s (%v); want %s", idOf(rb.v), rb.err, b.ID)
	}
}

// waitingForTurn begins the message a queue logs when one of its
// acquisitions waits for another's look at a batch to end.
const waitingForTurn = "queue: another acquisition here is looking at the batch or job"

func idOf(b *queue.Batch) string {
	if b == nil {
		return "none"
	}
	return b.ID
}

// A batch's unlock whose reply was lost is tried again (the reactor's
// retry) after another worker of the daemon, on the same session, took the
// batch: the lock there is the session's, but not the one the first worker
// held. Before, the second try deleted it, and the batch, its reporter at
// work, was free for any look to take and report again.
func TestBatchUnlockTriedAgainLeavesAnotherWorkersLock(t *testing.T) {
	r := newRun(t)
	ctx := t.Context()
	b, _, _ := r.twoDoneJobs()

	proxy := zktest.ProxyToShared(t)
	var armed atomic.Bool
	log := slog.New(onLog(func(_, op string) {
		if op == "delete" && armed.CompareAndSwap(true, false) {
			proxy.Pause() // the unlock's delete is held: its reply comes too late
		}
	}))
	q, err := queue.New(zktest.Connect(t, proxy.Addr()), r.root, queue.WithLogger(log), queue.WithRequestTimeout(lostReplyTimeout))
	r.ok(err)
	first, _, err := q.AcquireCompletedBatch(ctx, []string{b.ID}, nil)
	if err != nil || first == nil {
		t.Fatalf("the first worker acquired %s (%v); want %s", idOf(first), err, b.ID)
	}
	armed.Store(true)
	err = q.UnlockBatch(ctx, first)
	proxy.Resume() // the delete lands; the session's next requests follow it
	if !queue.Transient(err) {
		t.Fatalf("an unlock whose reply was lost: %v; want a transient error, for the caller to try again", err)
	}
	second, _, err := q.AcquireCompletedBatch(ctx, []string{b.ID}, nil)
	if err != nil || second == nil {
		t.Fatalf("the second worker acquired %s (%v); want %s", idOf(second), err, b.ID)
	}
	r.ok(q.UnlockBatch(ctx, first)) // the first worker's try again
	if after, err := r.q.LoadBatch(ctx, b.ID); err != nil || !after.Locked {
		t.Fatalf("after the first worker's unlock was tried again, the batch the second holds is locked: %v (%v); want true, its lock left", after != nil && after.Locked, err)
	}
	r.ok(q.UnlockBatch(ctx, second))
}

// hookedQueue is a proxied queue (as proxiedQueue) whose requests are
// told, by op, to the hook onRequest sets (nil: none), on the goroutine
// that sends them, before they are sent. warned counts the warnings that
// an orphaned lock was released.
func hookedQueue(t *testing.T, root string) (q *queue.Queue, proxy *zktest.Proxy, onRequest func(func(op string)), warned *atomic.Int32) {
	proxy = zktest.ProxyToShared(t)
	var hook atomic.Pointer[func(op string)]
	warned = new(atomic.Int32)
	log := slog.New(onLog(func(msg, op string) {
		if msg == "queue: released a lock this session held but no worker used" {
			warned.Add(1)
		}
		if f := hook.Load(); f != nil && op != "" {
			(*f)(op)
		}
	}))
	var closed atomic.Bool
	q, err := queue.New(zktest.Connect(t, proxy.Addr()), root, queue.WithLogger(log), queue.WithRequestTimeout(lostReplyTimeout),
		queue.WithClosed(closed.Load))
	if err != nil {
		t.Fatal(err)
	}
	// Before the connection's close (cleanups run last first): an admin's
	// releaser whose request the close cuts short then stops, as on serve's.
	t.Cleanup(func() { closed.Store(true) })
	onRequest = func(f func(op string)) {
		if f == nil {
			hook.Store(nil)
			return
		}
		hook.Store(&f)
	}
	return q, proxy, onRequest, warned
}

// lostCommitQueue is a hookedQueue and lose, which runs call so that its
// first multi lands but call sees an error: the multi is held in the
// paused proxy past the request timeout, and call's context ends at the
// request that follows it (the check whether it landed), as when ZooKeeper
// cannot say before maxOutages. The proxy resumes once call has returned:
// the multi lands, ahead of the session's next requests.
func lostCommitQueue(t *testing.T, root string) (q *queue.Queue, lose func(call func(context.Context) error) error, warned *atomic.Int32) {
	q, proxy, onRequest, warned := hookedQueue(t, root)
	return q, loseOn(t, proxy, onRequest), warned
}

// holdCommit is a request hook (on the caller's goroutine: the queue logs
// a request before it sends it) that holds the call's first multi in the
// paused proxy and ends the call's context (cancel) at the request that
// follows it.
func holdCommit(proxy *zktest.Proxy, cancel context.CancelFunc) func(op string) {
	sent := false
	return func(op string) {
		switch {
		case op == "multi" && !sent:
			sent = true
			proxy.Pause()
		case sent:
			cancel()
		}
	}
}

// loseOn is lostCommitQueue's lose for a hookedQueue's proxy and hook.
func loseOn(t *testing.T, proxy *zktest.Proxy, onRequest func(func(op string))) func(call func(context.Context) error) error {
	return func(call func(context.Context) error) error {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		onRequest(holdCommit(proxy, cancel))
		err := call(ctx)
		onRequest(nil)
		proxy.Resume()
		return err
	}
}

// A batch acquisition whose commit landed although its caller saw an error:
// the lock, this session's, is no worker's. Before, every later look, of
// this daemon or another, found the batch locked and waited on its lock
// for as long as the session lived: the batch was never reported. Now a
// look here, in the batch's turn, releases it and takes the batch.
func TestBatchLockOfAFailedAcquisitionIsReleased(t *testing.T) {
	r := newRun(t)
	ctx := t.Context()
	b, _, _ := r.twoDoneJobs()
	q, lose, warned := lostCommitQueue(t, r.root)
	err := lose(func(ctx context.Context) error {
		got, _, err := q.AcquireCompletedBatch(ctx, []string{b.ID}, nil)
		if got != nil {
			t.Errorf("the acquisition whose reply was lost returned %s", got.ID)
		}
		return err
	})
	if err == nil {
		t.Fatal("an acquisition whose reply was lost and could not be confirmed returned no error")
	}
	if seen, err := q.LoadBatch(ctx, b.ID); err != nil || !seen.Locked || seen.State() != queue.Reporting {
		t.Fatalf("after the failed acquisition: %+v (%v); want the batch Reporting and locked: its commit landed", seen, err)
	}
	if other, _, err := r.q.AcquireCompletedBatch(ctx, []string{b.ID}, nil); err != nil || other != nil {
		t.Fatalf("another session's look acquired %s (%v); want none: the lock is not its own", idOf(other), err)
	}
	got, waits, err := q.AcquireCompletedBatch(ctx, []string{b.ID}, nil)
	if err != nil || got == nil || got.ID != b.ID {
		t.Fatalf("a later look here acquired %s (%v), waits %v; want %s, the orphaned lock released", idOf(got), err, waits, b.ID)
	}
	if n := warned.Load(); n != 1 {
		t.Fatalf("warnings of an orphaned lock released: %d; want 1", n)
	}
	r.ok(q.UnlockBatch(ctx, got))
}

// lostMoveTakenOver runs on a lostCommitQueue the intake's move of a new
// batch to Processing, which releases its lock, so that it lands but its
// caller sees an error that is not a stale view; then a reporter of the
// same Queue (the same session) takes the batch. It returns the queue, the
// intake's view, the move, and the reporter's view.
func lostMoveTakenOver(t *testing.T, r *run) (q *queue.Queue, intake *queue.Batch, move queue.BatchChange, reporter *queue.Batch) {
	t.Helper()
	ctx := t.Context()
	r.batch()
	q, lose, _ := lostCommitQueue(t, r.root)
	intake, _, err := q.AcquirePendingBatch(ctx, nil)
	if err != nil || intake == nil {
		t.Fatalf("the intake acquired %s (%v); want the batch", idOf(intake), err)
	}
	move = lostMove(t, q, lose, intake)
	reporter, _, err = q.AcquireCompletedBatch(ctx, []string{intake.ID}, nil)
	if err != nil || reporter == nil {
		t.Fatalf("the reporter acquired %s (%v); want %s: the move landed", idOf(reporter), err, intake.ID)
	}
	return q, intake, move, reporter
}

// lostMove runs on q (lose its lostCommitQueue's) the move of a new batch
// the intake acquired to Processing, which releases its lock, so that it
// lands but its caller sees an error that is not a stale view: the
// intake's view is still marked as the batch's holder, its lock gone, as
// after a session expiry. It returns the move.
func lostMove(t *testing.T, q *queue.Queue, lose func(call func(context.Context) error) error, intake *queue.Batch) (move queue.BatchChange) {
	t.Helper()
	none := 0
	move = queue.BatchChange{JobCount: &none, Release: true, At: q.Now()}
	if err := lose(func(ctx context.Context) error { return q.SetBatchStatus(ctx, intake, queue.Processing, move) }); err == nil || errors.Is(err, queue.ErrStale) {
		t.Fatalf("a move whose reply was lost: %v; want an error, not a stale view", err)
	}
	return move
}

// The intake's move of a batch to Processing, which releases its lock,
// lands but its caller sees an error; a reporter of the same daemon (the
// same session) takes the batch, and the move is tried again (the
// reactor's retryMove): its fence finds the batch moved on, and its first
// try cannot be confirmed (MaybeApplied). Before, that stale view let go
// of any lock of the session, the reporter's: the batch was free for any
// look to take and report again. Now only the view that holds the batch
// lets go of its lock.
func TestStaleMoveLeavesAnotherWorkersBatchLock(t *testing.T) {
	r := newRun(t)
	ctx := t.Context()
	q, intake, move, reporter := lostMoveTakenOver(t, r)
	move.Retried = true
	if err := q.SetBatchStatus(ctx, intake, queue.Processing, move); !queue.MaybeApplied(err) {
		t.Fatalf("the move tried again: %v; want a stale view that may have landed", err)
	}
	if after, err := r.q.LoadBatch(ctx, intake.ID); err != nil || !after.Locked {
		t.Fatalf("after the intake's stale move, the batch the reporter holds is locked: %v (%v); want true, its lock left", after != nil && after.Locked, err)
	}
	r.ok(q.UnlockBatch(ctx, reporter))
}

// The intake's move lost as above, the reactor's moveBatch unlocks the
// batch (an error that is not a stale view; an expired session leaves a
// view the same way: its lock gone, the view still marked its holder)
// after a reporter of the same daemon took it. Before, the intake's unlock
// deleted the lock there, the session's: the reporter's, and the batch was
// free for any look to take and report again. Now a view that is no longer
// the one marked as the holder leaves the lock.
func TestUnlockAfterALostMoveLeavesAnotherWorkersBatchLock(t *testing.T) {
	r := newRun(t)
	ctx := t.Context()
	q, intake, _, reporter := lostMoveTakenOver(t, r)
	r.ok(q.UnlockBatch(ctx, intake))
	if after, err := r.q.LoadBatch(ctx, intake.ID); err != nil || !after.Locked {
		t.Fatalf("after the intake's unlock, the batch the reporter holds is locked: %v (%v); want true, its lock left", after != nil && after.Locked, err)
	}
	r.ok(q.UnlockBatch(ctx, reporter))
	if after, err := r.q.LoadBatch(ctx, intake.ID); err != nil || after.Locked {
		t.Fatalf("after the reporter's unlock, the batch is locked: %v (%v); want false", after != nil && after.Locked, err)
	}
}

// 1147's window, and 1138's expired session: the intake's view is still
// marked as the batch's holder, its lock gone (its move lost as above; an
// expired session leaves a view the same), and a reporter of the same
// Queue has taken the batch but not yet marked its view (its commit's reply
// held, then confirmed) when the intake unlocks. The mark is the intake's,
// so the unlock's first try read the lock there, the session's, and took
// it for the intake's own: the reporter went on with its batch unlocked,
// free for any look to take and report again. Now the intake's view knows
// its lock's creation from its acquisition, whether its reply came or was
// lost and the lock then found.
func TestUnlockLeavesALockTakenHereBeforeItsMark(t *testing.T) {
	for _, lostReply := range []bool{false, true} {
		t.Run(fmt.Sprint("acquisition's reply lost: ", lostReply), func(t *testing.T) {
			unlockInTheMarksWindow(t, lostReply)
		})
	}
}

// unlockInTheMarksWindow is one run of it, the intake's acquisition's reply
// lost (and the lock then found) or not.
func unlockInTheMarksWindow(t *testing.T, lostReply bool) {
	r := newRun(t)
	ctx := t.Context()
	r.batch()
	q, proxy, onRequest, _ := hookedQueue(t, r.root)
	var mu sync.Mutex
	step := 0
	on := func(steps ...func(op string) bool) { // each step, once, on the op it waits for
		mu.Lock()
		defer mu.Unlock()
		step = 0
		onRequest(func(op string) {
			mu.Lock()
			defer mu.Unlock()
			if step < len(steps) && steps[step](op) {
				step++
			}
		})
	}
	if lostReply { // held past the request timeout, then let through at the check whether it landed
		on(func(op string) bool { return op == "multi" && pause(proxy) },
			func(op string) bool { return op == "exists" && resume(proxy) })
	}
	intake, _, err := q.AcquirePendingBatch(ctx, nil)
	onRequest(nil)
	if err != nil || intake == nil {
		t.Fatalf("the intake acquired %s (%v); want the batch", idOf(intake), err)
	}
	lostMove(t, q, loseOn(t, proxy, onRequest), intake)

	confirming := make(chan struct{})
	on(func(op string) bool { return op == "multi" && pause(proxy) }, // the reporter's commit, held: it lands at Resume
		func(op string) bool { // the reporter's check whether it landed, held behind it
			if op == "exists" {
				close(confirming)
			}
			return op == "exists"
		},
		func(op string) bool { return op == "exists" && resume(proxy) }) // the intake's unlock's read, behind both
	got := make(chan result[*queue.Batch], 1)
	go func() {
		b, _, err := q.AcquireCompletedBatch(ctx, []string{intake.ID}, nil)
		got <- result[*queue.Batch]{b, err}
	}()
	select {
	case <-confirming:
	case g := <-got:
		t.Fatalf("the reporter's acquisition returned %s (%v) before checking its commit", idOf(g.v), g.err)
	}
	r.ok(q.UnlockBatch(ctx, intake))
	reporter := <-got
	onRequest(nil)
	if reporter.err != nil || reporter.v == nil {
		t.Fatalf("the reporter acquired %s (%v); want %s, its commit confirmed", idOf(reporter.v), reporter.err, intake.ID)
	}
	if after, err := r.q.LoadBatch(ctx, intake.ID); err != nil || !after.Locked {
		t.Fatalf("after the intake's unlock, the batch the reporter holds is locked: %v (%v); want true, its lock left", after != nil && after.Locked, err)
	}
	r.ok(q.UnlockBatch(ctx, reporter.v))
}

// pause and resume pause and resume proxy, and say true (for a step of
// unlockInTheMarksWindow's).
func pause(proxy *zktest.Proxy) bool  { proxy.Pause(); return true }
func resume(proxy *zktest.Proxy) bool { proxy.Resume(); return true }

// An admin's batch or job lock (LockBatch, LockJob on a session of its
// own, as the API's) whose create landed although the lock failed (its
// reply lost, and ZooKeeper unable to say before the request ended): no
// look on that session releases it, and every host waits on it. Before,
// the batch stayed locked, never reported, and the job never taken, until
// the daemon restarted. Now the lock is released once ZooKeeper answers,
// and another session takes the batch, or the job.
func TestAdminLockWhoseReplyWasLostIsReleased(t *testing.T) {
	for _, kind := range []string{"batch", "job"} {
		t.Run(kind, func(t *testing.T) {
			r := newRun(t)
			admin, lose, _ := lostCommitQueue(t, r.root)
			a := r.adminItem(admin, kind)
			there, _, created, err := r.conn.ExistsW(a.lock) // set first: the lock may come and go at once
			if err != nil || there {
				t.Fatalf("before the admin's lock, %s is there: %v (%v)", a.lock, there, err)
			}
			if err := lose(func(ctx context.Context) error { _, err := a.locked(ctx); return err }); err == nil {
				t.Fatal("an admin's lock whose reply was lost and could not be confirmed returned no error")
			}
			waitEvent(t, created, zk.EventNodeCreated, "the admin's lock to land")
			there, _, gone, err := r.conn.ExistsW(a.lock)
			r.ok(err)
			if there {
				waitEvent(t, gone, zk.EventNodeDeleted, "the admin's failed lock to be released")
			}
			a.take()
		})
	}
}

// adminItem is what an admin test does with one batch or job (kind): a
// Processing batch whose jobs are done, or a Pending job, of a run.
type adminItem struct {
	lock    string                                                                    // its lock's path
	locked  func(ctx context.Context) (unlock func(context.Context) error, err error) // the admin's lock, and its view's unlock
	refused func(ctx context.Context) error                                           // an admin action refused: its lock, then its unlock
	take    func()                                                                    // r.q's worker takes it, or fails the test
}

func (r *run) adminItem(admin *queue.Queue, kind string) adminItem {
	if kind == "job" {
		_, j := r.oneJob()
		return adminItem{
			lock: r.q.Path("/jobs/" + j.ID + "/lock"),
			locked: func(ctx context.Context) (func(context.Context) error, error) {
				view, err := admin.LockJob(ctx, j.ID)
				return func(ctx context.Context) error { return admin.UnlockJob(ctx, view) }, err
			},
			refused: func(ctx context.Context) error { // only a Failed job can be requeued
				_, err := admin.RequeueJob(ctx, j.ID, "")
				return err
			},
			take: func() { r.acquire(queue.Pending, j.ID) },
		}
	}
	b, _, _ := r.twoDoneJobs()
	return adminItem{
		lock: r.q.Path("/batches/" + b.ID + "/lock"),
		locked: func(ctx context.Context) (func(context.Context) error, error) {
			view, err := admin.LockBatch(ctx, b.ID)
			return func(ctx context.Context) error { return admin.UnlockBatch(ctx, view) }, err
		},
		refused: func(ctx context.Context) error { // only a Pending batch can be held
			_, err := admin.HoldBatch(ctx, b.ID)
			return err
		},
		take: func() {
			if got, _, err := r.q.AcquireCompletedBatch(r.t.Context(), []string{b.ID}, nil); err != nil || got == nil {
				r.t.Fatalf("another session's look acquired %s (%v); want %s, the admin's lock gone", idOf(got), err, b.ID)
			}
		},
	}
}

// Two admin actions on one batch or job, on one session (the API's): the
// first one's lock went without its view knowing (its release move landed,
// its reply lost and not confirmed; an expired session leaves a view the
// same), and the second one locks the item while the first's unlock is
// between its look at the marks (the first's view still marked) and its
// read of the lock. An admin's view knew no lock creation, so that unlock
// took the lock there, the session's, for its own and deleted the second
// action's: a worker could take the item while that admin held it, whose
// fenced change then failed as stale.
// Now an admin's view knows its lock's creation from its load, and the
// unlock leaves a lock made since.
func TestAdminUnlockLeavesANewerAdminsLock(t *testing.T) {
	for _, kind := range []string{"batch", "job"} {
		t.Run(kind, func(t *testing.T) {
			r := newRun(t)
			ctx := t.Context()
			admin, _, onRequest, _ := hookedQueue(t, r.root)
			a := r.adminItem(admin, kind)
			unlockFirst, err := a.locked(ctx)
			r.ok(err)
			r.ok(r.conn.Delete(a.lock, -1)) // the first's lock gone, its view still marked
			var unlockSecond func(context.Context) error
			var secondErr error
			onRequest(func(op string) {
				if op != "exists" { // the first's unlock's read of the lock
					return
				}
				onRequest(nil)
				unlockSecond, secondErr = a.locked(ctx)
			})
			err = unlockFirst(ctx)
			onRequest(nil)
			r.ok(err)
			if unlockSecond == nil || secondErr != nil {
				t.Fatalf("the second admin's lock, in the first's unlock: %v (%v); want it taken", unlockSecond != nil, secondErr)
			}
			if there, _, err := r.conn.Exists(a.lock); err != nil || !there {
				t.Fatalf("after the first admin's unlock, the second's lock is there: %v (%v); want true, left", there, err)
			}
			r.ok(unlockSecond(ctx))
			a.take()
		})
	}
}

// waitEvent waits up to 30 s for a watch's event of type want; what names
// what it waits for.
func waitEvent(t testing.TB, ev <-chan zk.Event, want zk.EventType, what string) {
	t.Helper()
	select {
	case e := <-ev:
		if e.Type != want {
			t.Fatalf("waiting for %s: %v; want %v", what, e.Type, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("waited 30 s for %s", what)
	}
}

// The releaser an admin's failed LockBatch starts (releaseOrphanLater)
// ends once its session is closed: the lock, if any, went with it. A
// closed connection answers every request ErrConnectionClosed, as a broken
// one does, so only WithClosed tells the queue; the harness's queue had
// none, and the releaser tried every 2 s until the test binary ended
// (goleak fails the package on it).
func TestAdminLockReleaserEndsWhenItsSessionCloses(t *testing.T) {
	r := newRun(t)
	b, _, _ := r.twoDoneJobs()
	proxy := zktest.ProxyToShared(t)
	var hook atomic.Pointer[func(op string)]
	trying, ended := make(chan struct{}), make(chan struct{})
	var tryingOnce, endedOnce sync.Once
	log := slog.New(onLog(func(msg, op string) {
		switch msg {
		case "queue: an admin's failed lock or unlock may have left its lock; released once ZooKeeper answers":
			tryingOnce.Do(func() { close(trying) })
		case "queue: could not release a lock an admin's failed lock or unlock may have left":
			endedOnce.Do(func() { close(ended) })
		}
		if f := hook.Load(); f != nil && op != "" {
			(*f)(op)
		}
	}))
	s, err := zkwatch.Dial(t.Context(), zkwatch.Config{Servers: []string{proxy.Addr()}, SessionTimeout: zktest.SessionTimeout, Logger: log})
	r.ok(err)
	t.Cleanup(s.Close)
	admin := queuetest.Queue(t, s, r.root, log)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	f := holdCommit(proxy, cancel) // the proxy stays paused after LockBatch: the releaser's first try is unanswered
	hook.Store(&f)
	_, err = admin.LockBatch(ctx, b.ID)
	hook.Store(nil)
	if err == nil {
		t.Fatal("an admin's lock whose reply was lost and could not be confirmed returned no error")
	}
	waitClosed(t, trying, "the releaser's first try, unanswered (the proxy still paused)")
	s.Close()
	waitClosed(t, ended, "the releaser to stop after its session was closed")
}

// waitClosed waits up to 15 s for ch to be closed; what names what it
// waits for.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(15 * time.Second):
		t.Fatalf("waited 15 s for %s", what)
	}
}

// An admin action's lock whose unlock fails, its request ended (the API's
// client gone: the unlock was then never sent) or ZooKeeper silent: the
// lock, the API session's, stayed, and every host waited on it until the
// daemon restarted (1179's orphan, left by the unlock). Now the unlock
// outlives the request, and one that fails is tried again once ZooKeeper
// answers; a worker of another session then takes the batch or the job.
func TestAdminUnlockThatFailedIsReleased(t *testing.T) {
	for _, c := range []struct {
		kind   string
		silent bool
	}{{"batch", false}, {"batch", true}, {"job", false}, {"job", true}} {
		t.Run(fmt.Sprintf("%s, ZooKeeper silent: %v", c.kind, c.silent), func(t *testing.T) {
			r := newRun(t)
			admin, proxy, onRequest, _ := hookedQueue(t, r.root)
			a := r.adminItem(admin, c.kind)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var gone <-chan zk.Event
			onRequest(func(op string) {
				if op != "exists" || gone != nil { // the unlock's read, after the refusal
					return
				}
				there, _, ev, err := r.conn.ExistsW(a.lock)
				if err != nil || !there {
					t.Errorf("at the admin's unlock, %s is there: %v (%v); want true", a.lock, there, err)
				}
				gone = ev
				if c.silent {
					proxy.Pause()
				} else {
					cancel()
				}
			})
			err := a.refused(ctx)
			onRequest(nil)
			proxy.Resume()
			if !errors.Is(err, queue.ErrRefused) {
				t.Fatalf("an admin action the %s's state refuses: %v; want a refusal", c.kind, err)
			}
			if gone == nil {
				t.Fatal("the admin's action sent no unlock")
			}
			waitEvent(t, gone, zk.EventNodeDeleted, "the admin's lock to be released")
			a.take()
		})
	}
}
