package reactor

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ingestq/ingestq/reactor/queue"
)

// worker pools: a pool for batch work, a jobPool per job state.
type waker interface {
	Wake()
	start(acquire, work context.Context, wg *sync.WaitGroup)
}

// pool is the workers of batch work: pending batches, or batches to report. Workers sleep until woken, then take and
// do work until there is none left to take.
type pool struct {
	name    string
	workers int
	// step takes one item and does it; it reports false when it found
	// nothing to take. It is given the work context, which outlives the
	// acquire context by the shutdown grace period.
	step func(ctx context.Context) (bool, error)
	wake wakeup
	log  *slog.Logger
}

// wakeup is a wake-up channel of capacity 1: wake-ups that arrive while one
// is pending merge into it.
type wakeup chan struct{}

// Wake asks for a look for work. It never blocks.
func (w wakeup) Wake() {
	select {
	case w <- struct{}{}:
	default:
	}
}

func newPool(name string, workers int, step func(context.Context) (bool, error), log *slog.Logger) *pool {
	return &pool{name: name, workers: max(workers, 1), step: step, wake: make(wakeup, 1), log: log}
}

// Wake asks a worker to look for work. It never blocks.
func (p *pool) Wake() { p.wake.Wake() }

// start runs the workers until acquire ends; a step under way then runs on
// under work until it ends or work is cancelled.
func (p *pool) start(acquire, work context.Context, wg *sync.WaitGroup) {
	for range p.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-acquire.Done():
					return
				case <-p.wake:
				}
				p.drain(acquire, work)
			}
		}()
	}
}

// drain does work until there is none; every item taken wakes one more
// worker, so a burst fans out over the pool.
func (p *pool) drain(acquire, work context.Context) {
	for acquire.Err() == nil {
		did, err := p.step(work)
		if err != nil {
			p.log.Warn("reactor: looking for work failed; retrying at the next wake-up", "pool", p.name, "err", err)
			return
		}
		if !did {
			return
		}
		p.Wake()
	}
}

// deferrals remembers jobs that asked to wait (Provisioning short of
// space), wait for their batch (Pending) or for the host holding their
// files, so a pool passes over them until their time comes or what they
// wait for releases them.
type deferrals struct {
	mu    sync.Mutex
	until map[string]deferral
	byKey map[string][]string // what they wait for (a batch, a host) → jids
}

// deferral is a job's wait: until t at the latest, or until what it waits
// for (key; "" for nothing but t) releases it.
type deferral struct {
	t   time.Time
	key string
}

// addFor defers jid until what it waits for (key: a batch id, a host)
// releases it, or t at the latest (a release whose news was lost).
func (d *deferrals) addFor(jid, key string, t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.set(jid, deferral{t: t, key: key})
	if d.byKey == nil {
		d.byKey = map[string][]string{}
	}
	d.byKey[key] = append(d.byKey[key], jid)
}

// release ends the deferral of the jobs waiting for key, and says how
// many there were. A job deferred again since for another reason (its
// step asked to wait, another host to wait for) still waits: the release
// is of this key's deferral, not of the job's.
func (d *deferrals) release(key string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	jids := d.byKey[key]
	delete(d.byKey, key)
	n := 0
	for _, jid := range jids {
		if w, ok := d.until[jid]; ok && w.key == key {
			delete(d.until, jid)
			n++
		}
	}
	return n
}

func (d *deferrals) add(jid string, t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.set(jid, deferral{t: t})
}

// set defers jid as w says, in place of any deferral before; d.mu is held.
func (d *deferrals) set(jid string, w deferral) {
	if d.until == nil {
		d.until = map[string]deferral{}
	}
	d.until[jid] = w
}

// skip tells whether jid still waits; it forgets jobs whose time has come.
func (d *deferrals) skip(jid string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	w, ok := d.until[jid]
	if ok && time.Now().Before(w.t) {
		return true
	}
	delete(d.until, jid)
	return false
}

// jobPool is the workers of one job state. When woken, its dispatcher lists
// the state's folder once and hands the refs, in priority order, to the
// workers, one ref to one worker: the workers of a daemon never race each
// other for a job, and a folder is listed once per round, not once per job.
// A wake-up during a round starts a new listing at once, so a job of higher
// priority that arrives is not left behind a long list.
type jobPool struct {
	name    string
	state   queue.State
	workers int
	wake    wakeup
	refs    chan string
	// listing is the folder as its watch last listed it, with the refs this
	// daemon moved in since (arrived): a round works from it without asking
	// ZooKeeper. nil until the first listing: list asks then.
	listing atomic.Pointer[[]string]
	views   sync.Map                                // ref → handoff: the job this daemon moved in, as it wrote it
	gone    sync.Map                                // ref → time: passed over (left), until a listing lacks it
	list    func() ([]string, error)                // the folder from ZooKeeper, in acquisition order
	skip    func(ref string) bool                   // not now: held queue, a job waiting for its timer
	try     func(ctx context.Context, ref string)   // acquire the ref's job and run its step
	run     func(ctx context.Context, j *queue.Job) // run the step of a job handed over locked (hand)
	// direct takes a job this daemon moved into the state keeping its lock
	// to a waiting worker; idle counts the workers waiting, a hint for
	// whether to keep the lock at all.
	direct chan *queue.Job
	idle   atomic.Int32
	log    *slog.Logger
}

// Wake asks the dispatcher for a new round. It never blocks.
func (p *jobPool) Wake() { p.wake.Wake() }

func (p *jobPool) start(acquire, work context.Context, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.dispatch(acquire)
	}()
	for range max(p.workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				p.idle.Add(1)
				select {
				case <-acquire.Done():
					p.idle.Add(-1)
					return
				case ref := <-p.refs:
					p.idle.Add(-1)
					p.try(work, ref)
				case j := <-p.direct:
					p.idle.Add(-1)
					p.run(work, j)
				}
			}
		}()
	}
}

func (p *jobPool) dispatch(acquire context.Context) {
	for {
		select {
		case <-acquire.Done():
			return
		case <-p.wake:
		}
		for p.round(acquire) {
		}
	}
}

// hand gives j, locked by this session, to a worker waiting for work; it
// reports false when none is waiting (none idle, or the pool stopping).
func (p *jobPool) hand(j *queue.Job) bool {
	select {
	case p.direct <- j:
		return true
	default:
		return false
	}
}

// handoff is a job this daemon moved into the pool's state, as it wrote
// it, so that a worker can acquire it without reading it.
type handoff struct {
	job *queue.Job
	at  time.Time
}

// handoffTTL is how long a hand-off is kept for a worker here: one that
// another daemon took instead is forgotten after it.
const handoffTTL = 10 * time.Second

// listed takes the folder's listing from its watch (sorted, read-only),
// and forgets stale hand-offs.
func (p *jobPool) listed(children []string) {
	p.listing.Store(&children)
	p.views.Range(func(ref, v any) bool {
		if time.Since(v.(handoff).at) > handoffTTL {
			p.views.Delete(ref)
		}
		return true
	})
	p.gone.Range(func(ref, at any) bool {
		if _, listed := slices.BinarySearch(children, ref.(string)); !listed || time.Since(at.(time.Time)) > handoffTTL {
			p.gone.Delete(ref)
		}
		return true
	})
}

// left notes a job this daemon has just moved out of the pool's state (or
// found locked by another session), so that a round passes over its ref
// while the listing still shows it (the listing may predate the move)
// instead of reading the job to find it gone. A listing without the ref
// ends that; so does handoffTTL, for a job that a foreign writer moved
// back in before the watch listed the folder again.
func (p *jobPool) left(ref string) {
	p.gone.Store(ref, time.Now())
}

// back forgets that job jid left the pool's state (left): an operator may
// have moved it back in.
func (p *jobPool) back(jid string) {
	p.gone.Range(func(ref, _ any) bool {
		if jidOf(ref.(string)) == jid {
			p.gone.Delete(ref)
		}
		return true
	})
}

// taken returns the hand-off of ref, if there is one, and forgets it.
func (p *jobPool) taken(ref string) *queue.Job {
	if v, ok := p.views.LoadAndDelete(ref); ok {
		return v.(handoff).job
	}
	return nil
}

// arrived adds a job this daemon has just moved into the folder (view: as
// it wrote it), so that a round can take it before the folder's watch
// reports it, and a worker without reading it. A listing the watch took
// before the move may replace it meanwhile: the watch then fires for the
// move, and the next listing has it.
func (p *jobPool) arrived(view *queue.Job) {
	ref := view.Ref()
	p.gone.Delete(ref)
	p.views.Store(ref, handoff{job: view, at: time.Now()})
	for {
		old := p.listing.Load()
		if old == nil {
			return // no listing yet: the first round lists the folder
		}
		i, found := slices.BinarySearch(*old, ref)
		if found {
			return
		}
		refs := slices.Insert(slices.Clip(*old), i, ref)
		if p.listing.CompareAndSwap(old, &refs) {
			return
		}
	}
}

// folder is the folder's refs in acquisition order: the watch's listing,
// or ZooKeeper's before there is one.
func (p *jobPool) folder() ([]string, error) {
	if l := p.listing.Load(); l != nil {
		return *l, nil
	}
	return p.list()
}

// round hands out the folder's refs; it reports true when a wake-up arrived
// meanwhile, so the caller starts again with the newer listing.
func (p *jobPool) round(acquire context.Context) bool {
	refs, err := p.folder()
	if err != nil {
		p.log.Warn("reactor: listing failed; retrying at the next wake-up", "pool", p.name, "err", err)
		return false
	}
	for _, ref := range refs {
		if _, gone := p.gone.Load(ref); gone || p.skip(ref) {
			continue
		}
		select {
		case p.refs <- ref:
		case <-p.wake:
			return true
		case <-acquire.Done():
			return false
		}
	}
	return false
}
