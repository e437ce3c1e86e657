// Package reactor is ingestq's daemon core: ZooKeeper child watchers on the
// queue's folders emit signals onto the NATS bus; each state's pool of
// workers wakes on its signal, acquires work in priority order and runs the
// state's handler; every committed change is published as an event.
//
//	zkwatch.Watcher ──Change──▶ bus.Signal(watch.…) ──▶ pool.Wake ──▶ queue.Acquire… ──▶ handler
//	                                                                         │
//	                               bus.Publish(ingestq.job.<state>.<jid>) ◀──┘ commit (one multi)
//
// ZooKeeper is the source of truth and NATS only carries news: a lost signal
// never strands work, because the watcher rescans every folder at start,
// after an expiry and on a slow timer, and a pool wakes locally whenever the
// bus is not connected.
//
// A daemon works only the roles it owns (Config.Roles: job states, batch
// intake, batch reporting) and the access queues it has workers for
// (Config.AccessWorkers); other daemons or programs on the queue work the
// rest, and their moves wake it through its folder watches.
//
// A handler gets a Step: the acquired job, and Checkpoint, the one way to
// save something before its Result is written with the transition. Holds
// (the ingest queue's, the access queues', the collections') are known in
// one place (holds.go). Everything Run starts, pools, watches, timers and
// the session hook, ends before Run returns.
package reactor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch"
)

// Config wires a Reactor.
type Config struct {
	Queue   *queue.Queue
	Session *zkwatch.Session
	Bus     *events.Bus
	Host    string // names this daemon in events, logs and /ingestq/hosts; default the host name
	Version string // this daemon's version, in its host node
	// Advertise is the URL other hosts reach this daemon's HTTP server
	// at, in its host node; "" when it serves none.
	Advertise string
	// Profiles are the names of the profiles this daemon's pipeline
	// serves, in its host node: submit refuses a profile no live daemon
	// serves. None for a pass-through daemon.
	Profiles []string

	// Roles are the parts of the queue's work this daemon does (default
	// AllRoles): it has a pool, and a watch, only for those, and never
	// acquires work of another role.
	Roles    []Role
	Jobs     map[queue.State]JobHandler // one per owned state from Estimating to Notify
	Batches  BatchHandler               // Pending batches → jobs; needed when intake is owned
	Reporter Reporter                   // batch reports; needed when reporting is owned
	// Access works the access queues (nil: not here), with AccessWorkers
	// per queue (queue.AccessSmall, AccessLarge; 0: that queue not here;
	// default 2 and 1), and its sweep every AccessSweep (default 1 min).
	Access        AccessHandler
	AccessWorkers map[string]int
	AccessSweep   time.Duration

	Workers       map[queue.State]int // workers per job state; default 4
	BatchWorkers  int                 // workers for pending batches and for reports, each; default 2
	Window        int                 // objects past which a batch's jobs are made a window at a time; default 5,000
	Attempts      int                 // tries of a step before the job fails; default 3
	StateAttempts map[queue.State]int // per-state tries, overriding Attempts
	Backoff       time.Duration       // wait before the first retry, doubled each time up to 1 min; default 1 s
	Rescan        time.Duration       // safety rescan of every folder; default 1 min
	Grace         time.Duration       // how long running steps may finish at shutdown; default 30 s
	Observer      Observer            // told of steps, commits and bytes (the metrics); default none
	Logger        *slog.Logger
	// RecordForeign has the daemon watch every job state folder but
	// Pending and publish the event of each move another program made
	// there (foreign.go): at the cost of a read of each job whose ref
	// appears in a folder, but after this daemon's own moves.
	RecordForeign bool
}

// JobStates are the states a reactor works in, in pipeline order.
var JobStates = []queue.State{queue.Pending, queue.Estimating, queue.Provisioning, queue.Downloading,
	queue.Processing, queue.Storing, queue.Recording, queue.Notify}

// Reactor is the daemon core. Run it once.
type Reactor struct {
	cfg     Config
	q       *queue.Queue
	bus     *events.Bus
	log     *slog.Logger
	watcher *zkwatch.Watcher

	stopping context.Context  // ends at a stop: no new work is taken
	work     context.Context  // ends when the grace period after a stop is over
	pools    map[string]waker // by signal name
	waits    *waiter          // one-shot watches on nodes that hold work back
	working  sync.Map         // jid → *claim: the jobs this daemon's workers hold
	steps    sync.Map         // jid → *running: the job steps under way (slowSteps)
	started  sync.Map         // bids known to be past Pending: their jobs may start
	early    sync.Map         // jids this daemon's batch handler made after its gate job: they may start now
	gates    sync.Map         // bid → *[]*queue.Job: the gate jobs its batch handler made here (takeGates)
	gated    sync.Map         // jid → bid: those gate jobs, named before any folder lists them, passed over while their batch is made
	// The intake's view of /batches: the watch's listing, and the batches
	// read past Pending for good (forgotten at each full listing, so a
	// foreign writer's odd move is seen within a rescan).
	batches     atomic.Pointer[[]string]
	pastPending sync.Map
	// bid → how many jobs its batch-processing held at its watch's last
	// listing: a job this daemon moves out of a folder that held only a
	// few hands its batch to the report pool at once (jobLeft).
	inProcessing sync.Map
	published    published // the last move of each job this daemon published
	foreign      foreignMoves
	waiting      map[queue.State]*deferrals
	outages      *outages // states paused here while a back end their steps need is out
	holds        *holds
	batchDir     string // "/…/batches", to recognise batch folders
	feeds        *feeds // windowed batches (feed.go)

	// sessions are the ZooKeeper sessions this process's acquisitions
	// held jobs under (tookOver): a job this host held under another was
	// held before its restart.
	sessions sync.Map
	resumed  resumed // jobs resumed after this host's restart, said together

	// deferredBatches are the Pending batches deferred (this daemon's
	// handler's Later, or a deferral in a batch's status, batchDeferred),
	// by bid, passed over here unread until then.
	deferredBatches deferrals

	reportMu   sync.Mutex
	toReport   []string        // batches whose batch-processing emptied: tried first
	reportScan bool            // a wake-up without a batch: look at every batch
	trying     map[string]bool // batches a report worker is trying now: not tried twice at once
}

// stuckAfterGrace is how long steps cancelled at the end of the grace
// period may take to return before the session is closed under them.
const stuckAfterGrace = 2 * time.Second

// Signal names: internal subjects under events.InternalPrefix.
const (
	sigPending = "watch.batch.pending"
	sigReport  = "watch.batch.report"
)

func sigJob(s queue.State) string { return "watch.job." + s.Folder() }

// Defaults are the settings a zero Config field gets; the CLI's flags show
// them as theirs.
var Defaults = Config{BatchWorkers: 2, Window: 5000, Attempts: 3, Backoff: time.Second, Rescan: time.Minute, Grace: 30 * time.Second}

// DefaultWorkers is the number of workers of a job state Config.Workers
// does not name.
const DefaultWorkers = 4

// ErrConfig marks a Config that New refuses (errors.Is).
var ErrConfig = errors.New("reactor: bad setting")

// Check refuses settings no default can stand for (ErrConfig): counts below one,
// negative durations.
func (cfg Config) Check() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, a...))
	}
	for s, n := range cfg.Workers {
		if n < 1 {
			return bad("%s workers %d: want at least 1", s, n)
		}
	}
	for s, n := range cfg.StateAttempts {
		if n < 1 {
			return bad("%s attempts %d: want at least 1", s, n)
		}
	}
	if cfg.Window < 0 {
		return bad("window %d: want at least 1 (0 for the default)", cfg.Window)
	}
	if cfg.BatchWorkers < 0 || cfg.Attempts < 0 {
		return bad("batch workers %d, attempts %d: want at least 1 (0 for the default)", cfg.BatchWorkers, cfg.Attempts)
	}
	for q, n := range cfg.AccessWorkers {
		if n < 0 || (q != queue.AccessSmall && q != queue.AccessLarge) {
			return bad("access workers %s=%d: want small or large, and 0 or more", q, n)
		}
	}
	if cfg.Backoff < 0 || cfg.Rescan < 0 || cfg.Grace < 0 || cfg.AccessSweep < 0 {
		return bad("backoff %v, rescan %v, grace %v: durations cannot be negative", cfg.Backoff, cfg.Rescan, cfg.Grace)
	}
	return nil
}

// New checks cfg and builds a Reactor.
func New(cfg Config) (*Reactor, error) {
	if cfg.Queue == nil || cfg.Session == nil || cfg.Bus == nil {
		return nil, fmt.Errorf("reactor: Queue, Session and Bus are required")
	}
	if len(cfg.Roles) == 0 {
		cfg.Roles = AllRoles()
	}
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if err := cfg.checkHandlers(); err != nil {
		return nil, err
	}
	if cfg.Host == "" {
		cfg.Host, _ = os.Hostname()
	}
	cfg.BatchWorkers = cmp.Or(cfg.BatchWorkers, Defaults.BatchWorkers)
	cfg.Attempts = cmp.Or(cfg.Attempts, Defaults.Attempts)
	cfg.Window = cmp.Or(cfg.Window, Defaults.Window)
	cfg.Backoff = cmp.Or(cfg.Backoff, Defaults.Backoff)
	cfg.Rescan = cmp.Or(cfg.Rescan, Defaults.Rescan)
	cfg.Grace = cmp.Or(cfg.Grace, Defaults.Grace)
	cfg.AccessSweep = cmp.Or(cfg.AccessSweep, DefaultAccessSweep)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	r := &Reactor{cfg: cfg, q: cfg.Queue, bus: cfg.Bus, log: cfg.Logger.With("host", cfg.Host),
		pools: map[string]waker{}, waiting: map[queue.State]*deferrals{},
		batchDir: cfg.Queue.Path("/batches"), waits: newWaiter(cfg.Queue, cfg.Logger), feeds: newFeeds(),
		foreign: foreignMoves{listed: map[queue.State][]string{}, moving: map[string]queue.State{}}}
	r.outages = newOutages(cfg.Observer, r.waitForBackEndUntil)
	r.holds = newHolds(cfg.Queue, r.log, r.wakeAll)
	r.watcher = zkwatch.NewWatcher(cfg.Session, zkwatch.WatcherConfig{Rescan: cfg.Rescan, Logger: r.log}, r.onChange)
	for _, s := range JobStates {
		r.waiting[s] = &deferrals{}
		if r.owns(JobRole(s)) {
			r.pools[sigJob(s)] = r.newJobPool(s, cmp.Or(cfg.Workers[s], DefaultWorkers))
		}
	}
	if r.owns(RoleIntake) {
		r.pools[sigPending] = newPool("batch pending", cfg.BatchWorkers, r.pendingBatchStep, r.log)
		r.pools[sigFeed] = newPool("batch feed", cfg.BatchWorkers, r.feedStep, r.log)
	}
	if r.owns(RoleReporting) {
		r.pools[sigReport] = newPool("batch report", cfg.BatchWorkers, r.reportStep, r.log)
	}
	r.newAccessPools()
	return r, nil
}

// checkHandlers refuses an unknown role, and a role owned without the
// handler that does its work.
func (cfg Config) checkHandlers() error {
	all := AllRoles()
	for _, x := range cfg.Roles {
		if !slices.Contains(all, x) {
			return fmt.Errorf("%w: unknown role %q (known: %s)", ErrConfig, x, RoleNames(all))
		}
	}
	for _, s := range JobStates[1:] {
		if slices.Contains(cfg.Roles, JobRole(s)) && cfg.Jobs[s] == nil {
			return fmt.Errorf("reactor: no handler for %s", s)
		}
	}
	if slices.Contains(cfg.Roles, RoleIntake) && cfg.Batches == nil {
		return fmt.Errorf("reactor: intake needs a BatchHandler")
	}
	if slices.Contains(cfg.Roles, RoleReporting) && cfg.Reporter == nil {
		return fmt.Errorf("reactor: reporting needs a Reporter")
	}
	return nil
}

// Run works until ctx ends, then stops taking work, lets running steps
// finish within the grace period, cancels what is left and returns.
func (r *Reactor) Run(ctx context.Context) error {
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	r.work, r.stopping = work, ctx

	var unsubs []func()
	defer func() {
		for _, u := range unsubs {
			u()
		}
	}()
	for name, p := range r.pools {
		u, err := r.bus.SubscribeSignal(name, func(data []byte) {
			switch name {
			case sigReport:
				r.queueReport(string(data))
			case sigFeed:
				r.feeds.note(string(data))
			}
			p.Wake()
		})
		if err != nil {
			return fmt.Errorf("reactor: subscribe %s: %w", name, err)
		}
		unsubs = append(unsubs, u)
	}
	// Admin actions change statuses without a change of children (release
	// of a batch, a new report): the CLI's admin events wake every pool.
	// One naming a batch also has the reporter look at it: a report asked
	// for after the batch's last job ended has no other news to come. One
	// naming a job drops the pools' note that it left their state (a
	// requeue moves it back before the folder's watch lists it without
	// the job, and the note would pass it over until the rescan).
	u, err := r.bus.Subscribe("ingestq.admin.>", func(e events.Event) {
		if e.BatchID != "" && r.owns(RoleReporting) {
			r.queueReport(e.BatchID)
		}
		if e.JobID != "" {
			for _, p := range r.pools {
				if jp, ok := p.(*jobPool); ok {
					jp.back(e.JobID)
				}
			}
		}
		r.wakeAll()
	})
	if err != nil {
		return fmt.Errorf("reactor: subscribe admin events: %w", err)
	}
	unsubs = append(unsubs, u)
	// A batch another daemon moved to Processing releases the Pending jobs
	// this one passed over while their batch was being made; and one made
	// without jobs (its payload unreadable) is ready to report at once: no
	// batch-processing folder will ever fire for it.
	u, err = r.bus.Subscribe("ingestq.batch.processing.*", func(e events.Event) {
		r.batchStarted(e.BatchID)
		if r.owns(RoleReporting) {
			r.queueReport(e.BatchID)
			r.wake(sigReport)
		}
	})
	if err != nil {
		return fmt.Errorf("reactor: subscribe batch events: %w", err)
	}
	unsubs = append(unsubs, u)

	// Back from a ZooKeeper outage that kept the session, no folder changed,
	// so no watch fires: steps that failed meanwhile are tried again now.
	reconnected := make(wakeup, 1)
	unhook := r.cfg.Session.OnConnect(func() { r.wakeAll(); reconnected.Wake() })
	defer unhook()

	// Who works this queue: this daemon's ephemeral host node. A name a
	// live daemon holds already is refused, before any work is taken.
	since := time.Now()
	said, err := r.register(ctx, since)
	if err != nil {
		said.JobsInHand = -1 // unknown: rewritten at the next look
		if errors.Is(err, queue.ErrRefused) {
			return fmt.Errorf("reactor: %w", err)
		}
		r.log.Warn("reactor: host node not written; trying again", "err", err)
		reconnected.Wake()
	}

	for _, s := range JobStates {
		// Another consumer moving a job into a state this daemon owns
		// adds a child here, which wakes the pool.
		if r.owns(JobRole(s)) {
			r.watcher.Watch(r.q.Path("/jobs/states/" + s.Folder()))
		}
	}
	r.watchForeign()
	for _, p := range []string{"/batches", "/locks/queue", "/locks/collections"} {
		r.watcher.Watch(r.q.Path(p))
	}
	r.watchAccess()

	r.holds.load(r.work)
	var wg sync.WaitGroup
	for _, p := range r.pools {
		p.start(ctx, work, &wg)
	}
	wg.Go(func() { r.keepRegistered(ctx, since, said, reconnected) })
	if r.cfg.Access != nil {
		wg.Go(func() { r.sweepAccess(ctx) })
	}
	r.log.Info("reactor: running", "states", RoleNames(r.cfg.Roles), "rescan", r.cfg.Rescan)
	<-ctx.Done()

	r.log.Info("reactor: stopping; running steps may finish", "grace", r.cfg.Grace)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(r.cfg.Grace):
		r.log.Warn("reactor: grace period over; cancelling the steps still running")
		cancelWork()
		select {
		case <-done:
		case <-time.After(stuckAfterGrace):
			// A ZooKeeper request waits for the server for as long as the
			// client keeps reconnecting: closing the session ends it (its
			// locks go with it, and the jobs stay in their states).
			r.log.Warn("reactor: steps still waiting on ZooKeeper after the grace period; closing the session to free them")
			r.cfg.Session.Close()
			<-done
		}
	}
	r.waits.stop()
	r.watcher.Close()
	r.resumed.say(r.log)
	return nil
}

// WatcherStats are the counters of the daemon's folder watches (listings
// sent, fires): with the queue's Requests, what it asks of ZooKeeper.
func (r *Reactor) WatcherStats() zkwatch.WatcherStats { return r.watcher.Stats() }

// wakeOn watches each wait once; when one fires, the pool of signal name
// looks again (the report pool at the batch the node belongs to).
func (r *Reactor) wakeOn(waits []queue.Wait, name string) {
	for _, w := range waits {
		wake := func() { r.wake(name) }
		if name == sigReport {
			bid, _, _ := strings.Cut(strings.TrimPrefix(w.Path, r.batchDir+"/"), "/")
			wake = func() { r.queueReport(bid); r.wake(sigReport) }
		}
		r.waits.on(r.work, w, name, wake)
	}
}

// onChange turns a watcher's Change into signals, and keeps the hold flags
// and the set of watched batch folders current.
func (r *Reactor) onChange(c zkwatch.Change) {
	rel := strings.TrimPrefix(c.Path, r.q.Root())
	switch {
	case strings.HasPrefix(rel, "/jobs/states/"):
		folder := strings.TrimPrefix(rel, "/jobs/states/")
		name := "watch.job." + folder
		s, _ := queue.ParseJobState(folder)
		refs, problems := r.q.ValidRefs(s, c.Children)
		if p, ok := r.pools[name].(*jobPool); ok { // else watched for foreign moves alone (watchForeign)
			for _, err := range problems {
				r.log.Warn("reactor: skipping", "err", err)
			}
			p.listed(refs) // before the signal: the round it wakes works from it
			r.outages.listed(s, refs)
			if len(c.Added) > 0 || c.Rescan {
				r.signal(name, "")
			}
		}
		r.foreignListed(s, refs)
	case rel == "/batches":
		if c.Rescan {
			r.pastPending.Clear()
		}
		r.batches.Store(&c.Children) // before the signal: the intake works from it
		// batch-processing emptying is what says a batch may be done,
		// whoever ran its last step: the reporter watches it.
		// So is it what says a windowed batch has room for more jobs.
		watches := r.owns(RoleReporting) || r.owns(RoleIntake)
		for _, bid := range c.Added {
			if watches {
				r.watcher.Watch(r.batchProcessing(bid))
			}
		}
		for _, bid := range c.Removed {
			if watches {
				r.watcher.Unwatch(r.batchProcessing(bid))
				r.inProcessing.Delete(bid)
			}
			r.feeds.forget(bid)
			r.started.Delete(bid)
			r.pastPending.Delete(bid)
			r.waiting[queue.Pending].release(bid)
			r.deferredBatches.release(bid)
		}
		r.signal(sigPending, "")
		if c.Rescan {
			r.signal(sigReport, "")
		}
	case strings.HasSuffix(rel, "/states/batch-processing"):
		bid := strings.TrimSuffix(strings.TrimPrefix(rel, "/batches/"), "/states/batch-processing")
		r.inProcessing.Store(bid, len(c.Children))
		if c.Count == 0 {
			r.signal(sigReport, bid)
		}
		if r.owns(RoleIntake) && (c.Rescan || r.feeds.changed(bid, c.Count, r.cfg.Window)) {
			r.signal(sigFeed, bid)
		}
	case strings.HasPrefix(rel, "/access/"):
		if len(c.Added) > 0 || c.Rescan {
			r.signal("watch.access."+strings.TrimPrefix(rel, "/access/"), "")
		}
	case rel == "/locks/queue":
		r.holds.queueChanged(c)
	case rel == "/locks/collections":
		r.holds.collectionsChanged(c)
	}
}

func (r *Reactor) batchProcessing(bid string) string {
	return r.batchDir + "/" + bid + "/states/batch-processing"
}

// signal publishes a wake-up on the bus, with the batch it is about (or
// ""); while the bus is not connected the pool is woken directly, so
// ZooKeeper work goes on without NATS.
func (r *Reactor) signal(name, bid string) {
	r.bus.Signal(name, []byte(bid))
	if !r.bus.Conn().IsConnected() {
		switch name {
		case sigReport:
			r.queueReport(bid)
		case sigFeed:
			r.feeds.note(bid)
		}
		r.wake(name)
	}
}

func (r *Reactor) wakeAll() {
	r.queueReport("")
	for _, p := range r.pools {
		p.Wake()
	}
}

// queueReport notes a batch that may be ready to report, or ("") that every
// batch should be looked at.
func (r *Reactor) queueReport(bid string) {
	if !r.owns(RoleReporting) {
		return // no report pool would ever take it
	}
	r.reportMu.Lock()
	defer r.reportMu.Unlock()
	if bid == "" {
		r.reportScan = true
	} else if !slices.Contains(r.toReport, bid) {
		r.toReport = append(r.toReport, bid)
	}
}

// nextReport says where the report pool looks next: one batch, all (nil,
// true), or nowhere (false). A batch another worker is trying stays
// queued for when that try ends (doneReport).
func (r *Reactor) nextReport() (ids []string, ok bool) {
	r.reportMu.Lock()
	defer r.reportMu.Unlock()
	for i, bid := range r.toReport {
		if r.trying[bid] {
			continue
		}
		r.toReport = slices.Delete(r.toReport, i, i+1)
		if r.trying == nil {
			r.trying = map[string]bool{}
		}
		r.trying[bid] = true
		return []string{bid}, true
	}
	if r.reportScan {
		r.reportScan = false
		return nil, true
	}
	return nil, false
}

// reportRetry is how long after a failed look (ZooKeeper away, say) the
// report pool looks again at the batches it was for.
const reportRetry = time.Second

// retryReport queues again the batches a failed look was for (ids; nil: a
// look at every batch), and wakes the report pool after reportRetry: the
// news that led to the look (a batch-processing folder emptied) does not
// come twice, and the next rescan may be a minute away.
func (r *Reactor) retryReport(ids []string) {
	r.reportMu.Lock()
	switch {
	case ids == nil:
		r.reportScan = true
	case !slices.Contains(r.toReport, ids[0]):
		r.toReport = append(r.toReport, ids[0])
	}
	r.reportMu.Unlock()
	r.waits.after(reportRetry, func() { r.wake(sigReport) })
}

// doneReport ends a worker's try of the batches ids (nextReport). Once the
// batch is acquired, news of it that came during the try is answered; a
// try that did not take it leaves that news for another worker.
func (r *Reactor) doneReport(ids []string, acquired bool) {
	if len(ids) != 1 {
		return // a look at every batch: nothing was marked
	}
	r.reportMu.Lock()
	defer r.reportMu.Unlock()
	delete(r.trying, ids[0])
	i := slices.Index(r.toReport, ids[0])
	switch {
	case i < 0:
	case acquired:
		r.toReport = slices.Delete(r.toReport, i, i+1)
	default:
		r.wake(sigReport)
	}
}
