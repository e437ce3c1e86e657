package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	"golang.org/x/sync/errgroup"
)

// Queue reads and writes the ingest queue in ZooKeeper, under an optional
// root prefix. It is safe for concurrent use; it owns no goroutines.
type Queue struct {
	zk     door
	root   string
	log    *slog.Logger
	now    func() time.Time
	closed func() bool // the connection was closed on purpose: stop retrying
	// folders are folders seen to exist: ingestq's own (ensureDirs) and a
	// batch's (createIn)
	folders seen
	// unreadable are jobs found unreadable after their lock went out with
	// their reads (TryAcquireJob), by id and status version: read before
	// they are locked, until they change.
	unreadable seen
	// badBatches are the unreadable batches tryBatch has warned of, by id,
	// what was wrong and the period (unreadableRepeat) it was said in:
	// said once a period, and at once when what is wrong changes.
	badBatches seen
	// turns are the batches and jobs (by id: a bid and a jid never
	// share one) an acquisition of this Queue is reading and locking,
	// each with a channel closed when it is done (turn). A job's is taken
	// by an admin's lock only.
	turns sync.Map
	// held are the batches whose lock a view of this Queue holds, and the
	// jobs an admin's view holds, each with that view (*Batch, *Job):
	// marked in the turn as the lock is taken, unmarked once the view
	// lets go. A lock of this session on a batch not here is an orphan
	// (tryBatch), and so is an admin's on a job (releaseOrphanLater).
	held sync.Map
	// takesJobs is set once a worker acquired a job through this Queue:
	// its session's job locks are then workers', which only the
	// reactor's claims tell from an orphan (decisions 226, 1184).
	takesJobs atomic.Bool
	// nameWait is how long RegisterHost and AnnounceRoute wait for another
	// session's node of their name to go (WithNameWait).
	nameWait time.Duration
	// host is the name RegisterHost registered: the Holder an
	// acquisition writes into a job's status.
	host atomic.Pointer[string]
	// fence is the session's own node that a lock's delete checks
	// (deleteOwn).
	fence fenceNode
}

// Option configures a Queue.
type Option func(*Queue)

// WithLogger sets where the queue reports skipped (malformed) nodes.
func WithLogger(l *slog.Logger) Option { return func(q *Queue) { q.log = l } }

// WithClosed tells the queue how to know that its connection was closed on
// purpose (zkwatch.Session.Closed): a change then stops trying again
// through the outage at once, instead of after its whole back-off, and the
// releaser of an admin's failed lock or unlock stops
// (releaseOrphanLater), which else tries until the process ends: a closed
// connection tells nothing.
func WithClosed(closed func() bool) Option { return func(q *Queue) { q.closed = closed } }

// WithNameWait makes RegisterHost and AnnounceRoute wait up to d for a
// node of their name that another session holds to go, before refusing
// the name: a daemon of that name killed just now keeps its node until its
// session expires, and the daemon restarted in its place (by systemd, a
// few seconds later) should wait for that rather than fail. A live daemon
// of that name keeps its node, and the name is refused after d.
func WithNameWait(d time.Duration) Option { return func(q *Queue) { q.nameWait = d } }

// WithRequestTimeout bounds each request to ZooKeeper (default
// DefaultRequestTimeout): a request the client holds through an outage
// ends with ErrNoAnswer instead of waiting for ZooKeeper to come back.
func WithRequestTimeout(d time.Duration) Option { return func(q *Queue) { q.zk.timeout = d } }

// WithClock sets the clock used for last_modified.
func WithClock(now func() time.Time) Option { return func(q *Queue) { q.now = now } }

// New returns a Queue on conn. root is "" or an absolute path without a
// trailing slash ("/ingestq"); every node lives under it.
func New(conn *zk.Conn, root string, opts ...Option) (*Queue, error) {
	if root != "" && (!strings.HasPrefix(root, "/") || strings.HasSuffix(root, "/") || path.Clean(root) != root) {
		return nil, fmt.Errorf("zk root %q: want an absolute path like /ingestq, without a trailing slash", root)
	}
	q := &Queue{zk: door{conn: conn, timeout: DefaultRequestTimeout, sent: new(Requests)}, root: root, log: slog.Default(), now: time.Now, closed: func() bool { return false }}
	for _, o := range opts {
		o(q)
	}
	q.zk.log = q.log
	return q, nil
}

// Root is the root prefix ("" for none).
func (q *Queue) Root() string { return q.root }

// Path is the absolute ZooKeeper path of a queue path ("/jobs" → "/root/jobs").
func (q *Queue) Path(rel string) string { return q.root + rel }

func (q *Queue) rel(abs string) string { return strings.TrimPrefix(abs, q.root) }

// Roots are the folders every queue has (mrt-zk's list), created by Init.
func Roots() []string {
	roots := []string{"/batches", "/batch-uuids", "/jobs", "/jobs/states"}
	for _, f := range JobFolders() {
		roots = append(roots, "/jobs/states/"+f)
	}
	return append(roots, "/access", "/access/small", "/access/large", "/locks", "/locks/queue",
		"/locks/localid", "/locks/storage", "/locks/inventory", "/locks/collections")
}

// Init creates the root prefix and the queue's folders where missing.
func (q *Queue) Init(ctx context.Context) error {
	var paths []string
	if q.root != "" {
		parts := strings.Split(q.root[1:], "/")
		for i := range parts {
			paths = append(paths, "/"+strings.Join(parts[:i+1], "/"))
		}
	}
	for _, r := range Roots() {
		paths = append(paths, q.Path(r))
	}
	for _, p := range paths {
		if _, err := q.zk.create(ctx, p, nil, 0); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	return nil
}

// Exists tells whether a queue is there: its /batches and /jobs folders,
// which mrt-zk and Init both make. Read-only tools ask before they read, so
// that a mistyped root is said to be one instead of read as an empty queue.
func (q *Queue) Exists(ctx context.Context) (bool, error) {
	for _, p := range []string{"/batches", "/jobs"} {
		ok, _, err := q.zk.exists(ctx, q.Path(p))
		if err != nil {
			return false, fmt.Errorf("zookeeper: look for %s: %w", q.Path(p), err)
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

// Made is when the queue was made: its /batches folder's creation, by
// ZooKeeper's clock.
func (q *Queue) Made(ctx context.Context) (time.Time, error) {
	st, err := q.batchesStat(ctx)
	if err != nil {
		return time.Time{}, err
	}
	return time.UnixMilli(st.Ctime), nil
}

// Identity names this queue among others: the transaction and time that
// made its /batches, which a changed list of ZooKeeper servers, or the
// ensemble restored from a backup, keeps; another root, or a queue made
// afresh, has another.
func (q *Queue) Identity(ctx context.Context) (string, error) {
	st, err := q.batchesStat(ctx)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("zxid 0x%x at %s", st.Czxid, time.UnixMilli(st.Ctime).UTC().Format(time.RFC3339Nano)), nil
}

func (q *Queue) batchesStat(ctx context.Context) (*zk.Stat, error) {
	ok, st, err := q.zk.exists(ctx, q.Path("/batches"))
	if err == nil && !ok {
		err = zk.ErrNoNode
	}
	if err != nil {
		return nil, fmt.Errorf("zookeeper: look for %s: %w", q.Path("/batches"), err)
	}
	return st, nil
}

// get reads a node; a missing node is (nil, nil, zk.ErrNoNode).
func (q *Queue) get(ctx context.Context, p string) ([]byte, *zk.Stat, error) {
	data, st, err := q.zk.get(ctx, p)
	if err != nil {
		return nil, nil, fmt.Errorf("get %s: %w", q.rel(p), err)
	}
	return data, st, nil
}

func (q *Queue) children(ctx context.Context, p string) ([]string, error) {
	kids, err := q.zk.children(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", q.rel(p), err)
	}
	return kids, nil
}

// read is one node fetched by getAll.
type read struct {
	data []byte
	stat *zk.Stat
	err  error
}

// getAll fetches nodes concurrently: go-zookeeper pipelines requests on one
// connection, so n reads cost about one round trip.
func (q *Queue) getAll(ctx context.Context, paths ...string) []read {
	return q.zk.getMany(ctx, paths)
}

// getAllAfter is getAll with paths[first] (an item's status) read before
// the rest. getAll's reads reach ZooKeeper in any order, so one read may
// come before a creation's multi and the next after it: a status said
// Pending while the submission beside it looked missing. Writers create
// the status with the other nodes or after them, so a status read first
// vouches for the rest, at the price of a second round trip.
func (q *Queue) getAllAfter(ctx context.Context, first int, paths ...string) []read {
	head := q.zk.getMany(ctx, paths[first:first+1])
	rest := q.zk.getMany(ctx, slices.Delete(slices.Clone(paths), first, first+1))
	return slices.Insert(rest, first, head[0])
}

// each runs fn(i) for every i in [0, n), at most limit at once.
func each(n, limit int, fn func(i int)) {
	var g errgroup.Group
	g.SetLimit(limit)
	for i := range n {
		g.Go(func() error { fn(i); return nil })
	}
	_ = g.Wait() // fn returns no error
}

// releaseOwnLock deletes an ephemeral lock only if this session owns it.
func (q *Queue) releaseOwnLock(ctx context.Context, p string) error {
	_, err := q.releaseOwn(ctx, p, nil)
	return err
}

// releaseOwn is releaseOwnLock, telling whether it deleted the lock. With
// made (nil: any of this session's locks) it releases the one lock a
// holder took: made keeps that lock's creation (its zxid), known from the
// acquisition or learnt at the first try. A try after one whose delete
// landed but whose reply was lost finds there a lock another acquisition
// of this session took since, as much this session's: it leaves it.
func (q *Queue) releaseOwn(ctx context.Context, p string, made *int64) (bool, error) {
	ok, st, err := q.zk.exists(ctx, p)
	if err != nil || !ok || !q.zk.owns(st) {
		return false, err
	}
	if made != nil {
		if *made != 0 && *made != st.Czxid {
			return false, nil
		}
		*made = st.Czxid
	}
	if _, err := q.deleteOwn(ctx, p, st); err != nil {
		return false, fmt.Errorf("unlock %s: %w", q.rel(p), err)
	}
	return true, nil // deleted, or gone with its session
}

// Now is the queue's clock (last_modified stamps use it).
func (q *Queue) Now() time.Time { return q.now() }
