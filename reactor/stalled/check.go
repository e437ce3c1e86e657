package stalled

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Kind sorts the reasons a job stalls, for the metrics and for tools.
type Kind string

// The kinds of reason, in the order Check looks for them.
const (
	KindRetrying       Kind = "retrying"        // its step failed and is tried again, under a live lock
	KindLocked         Kind = "locked"          // a session holds its lock: a step runs (or hangs)
	KindHeld           Kind = "held"            // the job, or the whole ingest queue, is held
	KindNoConsumer     Kind = "no_consumer"     // no live ingestq host works its state
	KindProvisioning   Kind = "provisioning"    // it waits for room in the working storage
	KindBackEnd        Kind = "back_end"        // its step found a back end out of reach, and waits for it
	KindBusyServer     Kind = "busy_server"     // a depositor's server answered its download 503 or 429, and it waits as asked
	KindFilesElsewhere Kind = "files_elsewhere" // it waits for the host that holds its files
	KindWaiting        Kind = "waiting"         // nothing holds it back: no worker has taken it yet
)

// BusyServerPrefix starts the status message of a job (or a Pending
// batch) that waits for a depositor's server that answered busy (503,
// 429), unlocked, spending no attempt (handlers): KindBusyServer.
const BusyServerPrefix = "waiting for a busy server"

// Stall is a job flagged as stalled, and why.
type Stall struct {
	JID    string        `json:"jid"`
	State  queue.State   `json:"state"`
	Since  time.Time     `json:"since"` // when it entered State
	For    time.Duration `json:"-"`
	Kind   Kind          `json:"kind"`
	Reason string        `json:"reason"`
}

// Facts is what a diagnosis reads besides the job: the live daemons and
// the ingest queue's hold.
type Facts struct {
	Hosts     []Host
	QueueHold time.Time // when the ingest queue was held; zero when it is not
}

// Host is a live daemon: its name, its session (which owns its locks) and
// what it says of itself (the states it works).
type Host struct {
	Name    string
	Session int64
	Info    reactor.HostInfo
	known   bool // Info could be read
}

// ReadFacts reads the live daemons and the holds.
func ReadFacts(ctx context.Context, q *queue.Queue) (Facts, error) {
	var f Facts
	hosts, err := q.Hosts(ctx)
	if err != nil {
		return f, fmt.Errorf("stalled work: hosts: %w", err)
	}
	for _, h := range hosts {
		x := Host{Name: h.Name, Session: h.Session}
		x.known = json.Unmarshal(h.Data, &x.Info) == nil && x.Info.States != nil
		f.Hosts = append(f.Hosts, x)
	}
	holds, err := q.Holds(ctx)
	if err != nil {
		return f, fmt.Errorf("stalled work: holds: %w", err)
	}
	for _, h := range holds {
		if h.Kind == "queue" && h.Name == queue.QueueIngest {
			f.QueueHold = h.Since
		}
	}
	return f, nil
}

// Check flags job j, which entered its state at since, when it has stayed
// there past its state's threshold at now, or waits for a busy server past
// half its --fetch-busy-limit (busyAtRisk), with the reason f shows.
func Check(j *queue.Job, since time.Time, f Facts, th Thresholds, now time.Time) (Stall, bool) {
	if !stalls(j, since, th, now) {
		return Stall{}, false
	}
	s := j.State()
	st := Stall{JID: j.ID, State: s, Since: since, For: now.Sub(since)}
	st.Kind, st.Reason = f.reason(j)
	return st, true
}

// stalls tells whether job j, in its state since since, is stalled at
// now: past its state's threshold, or waiting for a busy server past half
// its --fetch-busy-limit (busyAtRisk) in a state that has one.
func stalls(j *queue.Job, since time.Time, th Thresholds, now time.Time) bool {
	_, watched := th[j.State()]
	return th.Over(j.State(), since, now) || watched && busyAtRisk(j.Status.Message, since, now)
}

// busyAtRisk tells whether a job whose message msg says it waits for a
// busy server has been in its state, since since, longer than half the
// --fetch-busy-limit the message gives (handlers: "… (--fetch-busy-limit
// 1h)"). That limit fails the job (an hour by default) before its state's
// threshold (Downloading's two) is reached: by the threshold alone it was
// never listed. Half leaves an operator half the limit to ask the
// depositor, or fail the job, before it fails by itself; a server that
// asks for a few minutes now and then stays off the list.
func busyAtRisk(msg string, since, now time.Time) bool {
	if !strings.HasPrefix(msg, BusyServerPrefix) || since.IsZero() {
		return false
	}
	m := busyLimitGiven.FindStringSubmatch(msg)
	if m == nil {
		return false
	}
	d, err := time.ParseDuration(m[1])
	return err == nil && now.Sub(since) > d/2
}

// busyLimitGiven is the --fetch-busy-limit a busy wait's message gives,
// wherever it stands: a job's note (queue.KeepNote) follows it.
var busyLimitGiven = regexp.MustCompile(`\(--fetch-busy-limit ([^)]+)\)`)

// reason says what holds j back, the first of Kind's order that applies.
func (f Facts) reason(j *queue.Job) (Kind, string) {
	s, msg := j.State(), j.Status.Message
	consumers := f.consumers(s)
	switch {
	case j.Locked:
		h, _ := f.hostOf(j.LockSession) // its Waits: what a step running long waits on
		lock := fmt.Sprintf("lock held by %s since %s", queue.Holder(h.Name, j.LockSession), stamp(j.LockedAt))
		if reactor.Retrying(msg) {
			return KindRetrying, msg + "; " + lock
		}
		if w, ok := h.Info.Waits[j.ID]; ok {
			lock += "; its step " + w.String()
		}
		return KindLocked, lock
	case s == queue.Held:
		// Door-free: the API, the dashboard and the CLI each say how a hold
		// is released their own way (ops.ReleaseOf).
		return KindHeld, "held: no daemon takes it until it is released"
	case !f.QueueHold.IsZero():
		return KindHeld, "the ingest queue is held since " + stamp(f.QueueHold) + ": no new step starts until it is released"
	case len(consumers) == 0:
		return KindNoConsumer, fmt.Sprintf("no consumer of state %s is running (no live ingestq host works it)", s)
	case s == queue.Provisioning:
		why := fmt.Sprintf("waiting in Provisioning for %d bytes (%d MiB) of working storage", j.SpaceNeeded, j.SpaceNeeded>>20)
		return KindProvisioning, withMessage(why, msg)
	case strings.HasPrefix(msg, reactor.WaitingPrefix):
		// Not its host's: the storage or inventory its step needs is out.
		return KindBackEnd, msg
	case strings.HasPrefix(msg, BusyServerPrefix):
		// Not a worker's: the depositor's server asked to be asked later.
		return KindBusyServer, msg
	}
	if h := j.Config.WorkingHost; h != "" && reactor.NeedsFiles(s) && f.works(h, s) {
		return KindFilesElsewhere, withMessage("waiting for host "+h+", which holds its files", msg)
	}
	return KindWaiting, withMessage("not taken by a worker yet (hosts working "+string(s)+": "+strings.Join(consumers, ", ")+")", msg)
}

// consumers names the live hosts that work job state s. A host whose
// description cannot be read is counted: it lives, and may.
func (f Facts) consumers(s queue.State) []string {
	var out []string
	for _, h := range f.Hosts {
		if !h.known || h.Info.Works(s) {
			out = append(out, h.Name)
		}
	}
	return out
}

// works tells whether the live host called name works s.
func (f Facts) works(name string, s queue.State) bool {
	for _, h := range f.Hosts {
		if h.Name == name {
			return !h.known || h.Info.Works(s)
		}
	}
	return false
}

// hostOf is the live host whose session is session, if any.
func (f Facts) hostOf(session int64) (Host, bool) {
	for _, h := range f.Hosts {
		if h.Session == session {
			return h, true
		}
	}
	return Host{}, false
}

func withMessage(why, msg string) string {
	if msg == "" {
		return why
	}
	return why + "; last message: " + msg
}

func stamp(t time.Time) string { return queue.TextTime(t) }

// Find flags the stalled jobs among jobs (as the caller read them) at now,
// by jid. It reads when each entered its state, and the Facts, once.
func Find(ctx context.Context, q *queue.Queue, jobs []*queue.Job, th Thresholds, now time.Time) (map[string]Stall, error) {
	refs := map[queue.State][]string{}
	jidOf := map[string]string{} // "state/ref" → jid
	for _, j := range jobs {
		if _, ok := th[j.State()]; ok {
			refs[j.State()] = append(refs[j.State()], j.Ref())
			jidOf[j.State().Folder()+"/"+j.Ref()] = j.ID
		}
	}
	if len(refs) == 0 {
		return nil, nil
	}
	since := map[string]time.Time{} // jid → when it entered its state
	for s, rs := range refs {
		times, err := q.RefTimes(ctx, s, rs)
		if err != nil {
			return nil, fmt.Errorf("stalled work: %w", err)
		}
		for ref, t := range times {
			since[jidOf[s.Folder()+"/"+ref]] = t
		}
	}
	f, err := ReadFacts(ctx, q)
	if err != nil {
		return nil, err
	}
	out := map[string]Stall{}
	for _, j := range jobs {
		if st, ok := Check(j, since[j.ID], f, th, now); ok {
			out[j.ID] = st
		}
	}
	return out, nil
}

// Lister flags jobs one at a time, as a listing reads them page by page,
// at now: it reads the Facts once, at the first job that stalls, and
// shares them with the rest of the listing.
func Lister(ctx context.Context, q *queue.Queue, th Thresholds, now time.Time) func(*queue.Job) (*Stall, error) {
	var facts *Facts
	return func(j *queue.Job) (*Stall, error) {
		if _, ok := th[j.State()]; !ok {
			return nil, nil
		}
		times, err := q.RefTimes(ctx, j.State(), []string{j.Ref()})
		if err != nil {
			return nil, fmt.Errorf("stalled work: %w", err)
		}
		since, ok := times[j.Ref()]
		if !ok || !stalls(j, since, th, now) {
			return nil, nil
		}
		if facts == nil {
			f, err := ReadFacts(ctx, q)
			if err != nil {
				return nil, err
			}
			facts = &f
		}
		st, _ := Check(j, since, *facts, th, now)
		return &st, nil
	}
}
