package dashboard

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/internal/backoff"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch"
)

// refTimeout bounds the read of when new refs were made.
const refTimeout = 5 * time.Second

// hub is what the dashboard knows live: the job state folders as its own
// ZooKeeper watches list them (a move by any writer, Merritt's services
// included, changes a folder), the finishes per minute (from the event
// stream: the same on every host's dashboard), and the pages open in
// browsers, told of every change.
type hub struct {
	q       *queue.Queue
	log     *slog.Logger
	watcher *zkwatch.Watcher
	started time.Time
	unsubs  []func()
	// The replay of the last hour's finishes: stop ends it, replayed
	// closes when it has.
	stop     context.CancelFunc
	replayed chan struct{}

	mu      sync.Mutex
	refs    map[queue.State]map[string]time.Time // state → ref → when it was made (zero: not read)
	listed  map[queue.State]bool                 // the folder was listed at least once
	access  map[string]queue.State               // access request ref → its state as last read
	series  series
	partial bool // the last hour's finishes were not read from the stream: counted since started
	clients map[chan string]struct{}
	closed  bool
}

// folders maps each watched path to what its change is about: a job
// state, or a topic the pages are told of.
func (h *hub) folders() map[string]string {
	m := map[string]string{
		h.q.Path("/batches"):           "batches",
		h.q.Path("/locks/queue"):       "holds",
		h.q.Path("/locks/collections"): "holds",
		h.q.Path("/ingestq/hosts"):     "hosts",
		h.q.RoutesFolder():             "hosts", // a host's NATS route, announced after its node
		h.q.Path("/access/small"):      "access",
		h.q.Path("/access/large"):      "access",
	}
	for _, s := range queue.JobMachine.States {
		m[h.q.Path("/jobs/states/"+s.Folder())] = "jobs"
	}
	return m
}

// newHub starts the watches (on session) and follows the batch, admin and
// access events of the bus (nil: none): a batch's state, a release and an
// access request's state change no folder; and the jobs' finishes, the
// last hour's read from the stream.
func newHub(q *queue.Queue, session *zkwatch.Session, bus *events.Bus, log *slog.Logger) (*hub, error) {
	h := &hub{q: q, log: log, started: time.Now(), refs: map[queue.State]map[string]time.Time{},
		listed: map[queue.State]bool{}, access: map[string]queue.State{}, clients: map[chan string]struct{}{}, partial: true}
	for _, s := range queue.JobMachine.States {
		h.refs[s] = map[string]time.Time{}
	}
	if bus != nil {
		for _, subject := range []string{"ingestq.batch.>", "ingestq.admin.>", "ingestq.access.>"} {
			unsub, err := bus.Subscribe(subject, func(e events.Event) {
				if e.AccessID != "" {
					h.readAccess(e.AccessID) // a request's move changes no folder
				}
				h.notify("events")
			})
			if err != nil {
				h.close()
				return nil, err
			}
			h.unsubs = append(h.unsubs, unsub)
		}
		for _, subject := range finishSubjects {
			unsub, err := bus.Subscribe(subject, func(e events.Event) { h.finished(e, time.Now()) })
			if err != nil {
				h.close()
				return nil, err
			}
			h.unsubs = append(h.unsubs, unsub)
		}
		var ctx context.Context
		ctx, h.stop = context.WithCancel(context.Background())
		h.replayed = make(chan struct{})
		go h.replayFinished(ctx, bus)
	}
	topics := h.folders()
	h.watcher = zkwatch.NewWatcher(session, zkwatch.WatcherConfig{Logger: log}, func(c zkwatch.Change) {
		h.onChange(c, topics[c.Path])
	})
	for path := range topics {
		h.watcher.Watch(path)
	}
	return h, nil
}

// close stops the watches and the subscriptions, and ends every live
// stream.
func (h *hub) close() {
	if h.watcher != nil {
		h.watcher.Close()
	}
	if h.stop != nil {
		h.stop()
		<-h.replayed
	}
	for _, u := range h.unsubs {
		u()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for c := range h.clients {
		close(c)
	}
	clear(h.clients)
}

// onChange keeps the view of a state folder and tells the pages.
func (h *hub) onChange(c zkwatch.Change, topic string) {
	if topic == "jobs" {
		folder := c.Path[strings.LastIndex(c.Path, "/")+1:]
		s, err := queue.ParseJobState(folder)
		if err != nil {
			return
		}
		if !h.takeRefs(s, c) {
			return // a rescan that found the folder as it was
		}
	}
	if topic == "access" && !h.takeAccess(c) {
		return
	}
	h.notify(topic)
}

// takeRefs applies a state folder's change, reading when each new ref was
// made (not for Completed and Deleted: no one waits there, and they grow),
// and tells whether the folder changed.
func (h *hub) takeRefs(s queue.State, c zkwatch.Change) bool {
	var times map[string]time.Time
	if s != queue.Completed && s != queue.Deleted && len(c.Added) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), refTimeout)
		var err error
		times, err = h.q.RefTimes(ctx, s, h.unknown(s, c.Added))
		cancel()
		if err != nil {
			h.log.Debug("dashboard: when refs were made not read; their age shows at the next rescan", "state", s, "err", err)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	refs := h.refs[s]
	changed := !c.Rescan || !h.listed[s] || len(c.Added) != len(refs)
	if c.Rescan {
		keep := make(map[string]time.Time, len(c.Added))
		for _, ref := range c.Added {
			at, known := refs[ref]
			changed = changed || !known
			keep[ref] = at
		}
		h.refs[s], refs = keep, keep
	}
	for _, ref := range c.Removed {
		delete(refs, ref)
	}
	for _, ref := range c.Added {
		if at, ok := times[ref]; ok {
			refs[ref] = at
		} else if _, ok := refs[ref]; !ok {
			refs[ref] = time.Time{}
		}
	}
	h.listed[s] = true
	return changed
}

// takeAccess applies an access queue folder's change: it reads the state
// of each new request and, at a rescan, of each that may still move (a
// move by a writer that publishes no event shows then). It tells whether
// the pages should look again: the folder changed, or a request's state
// did. The overview counts from this, so that a refresh reads no request.
func (h *hub) takeAccess(c zkwatch.Change) bool {
	name := c.Path[strings.LastIndex(c.Path, "/")+1:]
	ref := func(qid string) string { return name + "/" + qid }
	h.mu.Lock()
	var read []string
	for _, qid := range c.Added {
		if st, known := h.access[ref(qid)]; !known || st != queue.Completed && st != queue.Deleted {
			read = append(read, qid) // Completed and Deleted requests only go
		}
	}
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), refTimeout)
	states, err := h.q.AccessStates(ctx, name, read)
	cancel()
	if err != nil {
		h.log.Debug("dashboard: access requests' states not read; they show at the next rescan", "queue", name, "err", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	before := maps.Clone(h.access)
	if c.Rescan {
		listed := make(map[string]bool, len(c.Added))
		for _, qid := range c.Added {
			listed[ref(qid)] = true
		}
		maps.DeleteFunc(h.access, func(r string, _ queue.State) bool { return strings.HasPrefix(r, name+"/") && !listed[r] })
	}
	for _, qid := range c.Removed {
		delete(h.access, ref(qid))
	}
	for qid, st := range states {
		h.access[ref(qid)] = st
	}
	return !c.Rescan || !maps.Equal(before, h.access)
}

// readAccess reads the state of the request ref (small/qid…) again, after
// its event: gone, or not readable, it is no longer counted.
func (h *hub) readAccess(ref string) {
	name, qid, _ := strings.Cut(ref, "/")
	ctx, cancel := context.WithTimeout(context.Background(), refTimeout)
	states, err := h.q.AccessStates(ctx, name, []string{qid})
	cancel()
	if err != nil {
		h.log.Debug("dashboard: an access request's state not read; it shows at the next rescan", "ref", ref, "err", err)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if st, ok := states[qid]; ok {
		h.access[ref] = st
	} else {
		delete(h.access, ref)
	}
}

// accessCounts counts the requests of both queues by state, in the access
// state machine's order: the states with requests only.
func (h *hub) accessCounts() []accessCount {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := map[queue.State]*accessCount{}
	for ref, st := range h.access {
		if n[st] == nil {
			n[st] = &accessCount{State: st}
		}
		if strings.HasPrefix(ref, queue.AccessLarge+"/") {
			n[st].Large++
		} else {
			n[st].Small++
		}
	}
	var out []accessCount
	for _, s := range queue.AccessMachine.States {
		if c := n[s]; c != nil {
			out = append(out, *c)
		}
	}
	return out
}

// unknown is the refs among added whose time is not known yet.
func (h *hub) unknown(s queue.State, added []string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, ref := range added {
		if h.refs[s][ref].IsZero() {
			out = append(out, ref)
		}
	}
	return out
}

// notify tells every live page that topic changed. A page with a notice
// still pending gets no second one: it fetches after the pending one.
func (h *hub) notify(topic string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.clients {
		select {
		case c <- topic:
		default:
		}
	}
}

// subscribe gives a live page its notices; the channel closes with the
// hub. nil after close.
func (h *hub) subscribe() (<-chan string, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, func() {}
	}
	c := make(chan string, 1)
	h.clients[c] = struct{}{}
	return c, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.clients[c]; ok {
			delete(h.clients, c)
			close(c)
		}
	}
}

// StateCount is a job state's line of the overview.
type StateCount struct {
	State     queue.State
	Jobs      int
	Known     bool          // the folder was listed
	OldestJID string        // the job longest there ("" when none, or not for this state)
	OldestAge time.Duration // how long it has been there
}

// counts is every job state's count, and the oldest job of each state a
// job can wait in, from the watched folders.
func (h *hub) counts(now time.Time) []StateCount {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]StateCount, 0, len(stateOrder))
	for _, s := range stateOrder {
		sc := StateCount{State: s, Jobs: len(h.refs[s]), Known: h.listed[s]}
		var oldest time.Time
		for ref, at := range h.refs[s] {
			if !at.IsZero() && (oldest.IsZero() || at.Before(oldest)) {
				oldest, sc.OldestJID = at, jidOf(ref)
			}
		}
		if !oldest.IsZero() {
			sc.OldestAge = now.Sub(oldest)
		}
		out = append(out, sc)
	}
	return out
}

// stateOrder is the job states as the overview lists them: the pipeline,
// then where jobs wait on an operator, then the ends.
var stateOrder = []queue.State{queue.Pending, queue.Estimating, queue.Provisioning, queue.Downloading,
	queue.Processing, queue.Storing, queue.Recording, queue.Notify, queue.Held, queue.Failed, queue.Completed, queue.Deleted}

func jidOf(ref string) string {
	_, jid, _ := strings.Cut(ref, "-")
	return jid
}

// seriesMinutes is how far back the finishes per minute go.
const seriesMinutes = 60

// finishSubjects are the events of jobs that entered Completed or Failed.
// Every daemon's dashboard counts them from the one event stream (with
// --nats-cluster or a shared --nats), by the events' times, so that all
// show the same: the watches each dashboard has only see the moves made
// while it runs, in the minute it happens to list them.
var finishSubjects = []string{"ingestq.job.completed.*", "ingestq.job.failed.*"}

// replayFinished counts the finishes of the last hour recorded before the
// dashboard subscribed. While the stream does not answer (a cluster
// forming or electing its leader, which Replay waits for) or is not made
// yet (its daemon's cluster forming), it asks again, and the chart says it
// counts from the dashboard's start. That wait is said at info: every host
// of a cluster started at once meets it for a few seconds. A warning comes
// for any other error, or once the wait has lasted streamWaitWarn.
func (h *hub) replayFinished(ctx context.Context, bus *events.Bus) {
	defer close(h.replayed)
	since := h.started.Add(-seriesMinutes * time.Minute)
	count := func(e events.Event) error { h.finished(e, time.Now()); return nil }
	waiting, warned := false, false
	wait := func(err error) {
		if !waiting && !warned {
			waiting = true
			h.log.Info("dashboard: waiting for the event stream (the NATS cluster forming or electing a leader?) to count the "+
				"last hour's finished jobs; the chart counts from the daemon's start meanwhile", "err", err)
		}
	}
	for tries := 1; ; tries++ {
		var err error
		for _, subject := range finishSubjects {
			if err == nil {
				err = events.Replay(ctx, bus.Conn(), "", events.Filter{Subject: subject, Since: since}, count, events.WhenWaiting(wait))
			}
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return // closed
		}
		forming := events.Unavailable(bus.Conn(), err) || errors.Is(err, jetstream.ErrStreamNotFound)
		if !warned && (!forming || time.Since(h.started) >= streamWaitWarn) {
			warned = true
			h.log.Warn("dashboard: the last hour's finished jobs not read from the event stream yet; asking again", "err", err)
		} else {
			wait(err)
			h.log.Debug("dashboard: the last hour's finished jobs not read from the event stream yet; asking again", "err", err)
		}
		if !backoff.Sleep(ctx, backoff.Delay(time.Second, time.Minute, tries)) {
			return
		}
	}
	if waiting || warned {
		h.log.Info("dashboard: read the last hour's finished jobs from the event stream")
	}
	h.mu.Lock()
	h.partial = false
	h.mu.Unlock()
	h.notify("jobs")
}

// streamWaitWarn is how long the dashboard waits for the event stream
// before it warns: longer than a cluster takes to form or elect (seconds),
// and than Replay's own wait (30 s).
const streamWaitWarn = 2 * time.Minute

// finished counts a job's entry into Completed or Failed in the minute of
// its event, once per event ID: a live event can come twice (a resend),
// and the replay overlaps the live ones.
func (h *hub) finished(e events.Event, now time.Time) {
	h.mu.Lock()
	counted := h.series.add(e, now)
	h.mu.Unlock()
	if counted {
		h.notify("jobs")
	}
}

// series counts the jobs that entered Completed and Failed, per minute.
type series struct {
	minutes map[int64]*[2]int // unix minute → completed, failed
	ids     map[string]int64  // the events counted → their minute
	pruned  int64             // the minute up to which both were last pruned
}

// add counts e, a Completed or Failed job event, unless it was counted
// already or is older than the hour to now; it forgets minutes past.
func (s *series) add(e events.Event, now time.Time) bool {
	if s.minutes == nil {
		s.minutes, s.ids = map[int64]*[2]int{}, map[string]int64{}
	}
	m, end := e.Time.Unix()/60, now.Unix()/60
	if _, dup := s.ids[e.ID]; dup || m <= end-seriesMinutes {
		return false
	}
	if s.minutes[m] == nil {
		s.minutes[m] = &[2]int{}
	}
	i := 0
	if strings.EqualFold(e.To, string(queue.Failed)) {
		i = 1
	}
	s.minutes[m][i]++
	s.ids[e.ID] = m
	if end > s.pruned { // once a minute
		s.pruned = end
		maps.DeleteFunc(s.minutes, func(k int64, _ *[2]int) bool { return k <= end-seriesMinutes })
		maps.DeleteFunc(s.ids, func(_ string, k int64) bool { return k <= end-seriesMinutes })
	}
	return true
}

// Minute is one bar of the throughput chart.
type Minute struct {
	At                time.Time
	Completed, Failed int
}

// Throughput is the finishes of the last hour, oldest minute first.
type Throughput struct {
	Minutes           []Minute
	Completed, Failed int       // in the hour
	Max               int       // the busiest minute's finishes
	Since             time.Time // when counting began (the dashboard started), if within the hour and the stream's record of the hour before was not read
}

func (h *hub) throughput(now time.Time) Throughput {
	h.mu.Lock()
	defer h.mu.Unlock()
	var t Throughput
	end := now.Unix() / 60
	for m := end - seriesMinutes + 1; m <= end; m++ {
		mm := Minute{At: time.Unix(m*60, 0).UTC()}
		if c := h.series.minutes[m]; c != nil {
			mm.Completed, mm.Failed = c[0], c[1]
		}
		t.Completed += mm.Completed
		t.Failed += mm.Failed
		t.Max = max(t.Max, mm.Completed+mm.Failed)
		t.Minutes = append(t.Minutes, mm)
	}
	if h.partial && now.Sub(h.started) < seriesMinutes*time.Minute {
		t.Since = h.started.UTC()
	}
	return t
}
