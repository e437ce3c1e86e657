package dashboard

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch"
)

// refTimeout bounds the read of when new refs were made.
const refTimeout = 5 * time.Second

// hub is what the dashboard knows live: the job state folders as its own
// ZooKeeper watches list them (a move by any writer, Merritt's services
// included, changes a folder), the finishes per minute, and the pages
// open in browsers, told of every change.
type hub struct {
	q       *queue.Queue
	log     *slog.Logger
	watcher *zkwatch.Watcher
	started time.Time
	unsubs  []func()

	mu      sync.Mutex
	refs    map[queue.State]map[string]time.Time // state → ref → when it was made (zero: not read)
	listed  map[queue.State]bool                 // the folder was listed at least once
	series  series
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
// access request's state change no folder.
func newHub(q *queue.Queue, session *zkwatch.Session, bus *events.Bus, log *slog.Logger) (*hub, error) {
	h := &hub{q: q, log: log, started: time.Now(), refs: map[queue.State]map[string]time.Time{},
		listed: map[queue.State]bool{}, clients: map[chan string]struct{}{}}
	for _, s := range queue.JobMachine.States {
		h.refs[s] = map[string]time.Time{}
	}
	if bus != nil {
		for _, subject := range []string{"ingestq.batch.>", "ingestq.admin.>", "ingestq.access.>"} {
			unsub, err := bus.Subscribe(subject, func(events.Event) { h.notify("events") })
			if err != nil {
				h.close()
				return nil, err
			}
			h.unsubs = append(h.unsubs, unsub)
		}
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

// onChange keeps the view of a state folder, counts the finishes, and
// tells the pages.
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
	if !c.Rescan && h.listed[s] && (s == queue.Completed || s == queue.Failed) {
		h.series.add(s, len(c.Added), time.Now())
	}
	h.listed[s] = true
	return changed
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

// series counts the jobs that entered Completed and Failed, per minute,
// as the watches saw them.
type series struct {
	minutes map[int64]*[2]int // unix minute → completed, failed
}

func (s *series) add(state queue.State, n int, at time.Time) {
	if s.minutes == nil {
		s.minutes = map[int64]*[2]int{}
	}
	m := at.Unix() / 60
	if s.minutes[m] == nil {
		s.minutes[m] = &[2]int{}
	}
	i := 0
	if state == queue.Failed {
		i = 1
	}
	s.minutes[m][i] += n
	for k := range s.minutes {
		if k <= m-seriesMinutes {
			delete(s.minutes, k)
		}
	}
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
	Since             time.Time // when counting began (the dashboard started), if within the hour
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
	if now.Sub(h.started) < seriesMinutes*time.Minute {
		t.Since = h.started.UTC()
	}
	return t
}
