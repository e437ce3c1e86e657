package queue_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingestq/ingestq/reactor/queue"
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

// proxiedQueue is a queue whose session reaches the shared server through
// a proxy, with requests given up on after 300 ms.
func proxiedQueue(t *testing.T, root string) (*queue.Queue, *zktest.Proxy) {
	proxy := zktest.ProxyToShared(t)
	q, err := queue.New(zktest.Connect(t, proxy.Addr()), root, queue.WithLogger(testLogger(t)),
		queue.WithRequestTimeout(300*time.Millisecond))
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
	log := slog.New(onRequest(func(op string) {
		if op == "multi" && armed.Load() {
			once.Do(func() { proxy.Pause(); close(held) })
		}
	}))
	qa, err := queue.New(zktest.Connect(t, proxy.Addr()), root, queue.WithLogger(log), queue.WithRequestTimeout(300*time.Millisecond))
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

// onRequest is a slog handler that calls f with the op of each ZooKeeper
// request a queue logs (at debug level, before sending it).
type onRequest func(op string)

func (f onRequest) Enabled(context.Context, slog.Level) bool { return true }
func (f onRequest) WithAttrs([]slog.Attr) slog.Handler       { return f }
func (f onRequest) WithGroup(string) slog.Handler            { return f }
func (f onRequest) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "op" {
			f(a.Value.String())
		}
		return true
	})
	return nil
}
