package reactor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/ingestq/ingestq/internal/backoff"
	"github.com/ingestq/ingestq/reactor/queue"
)

// A daemon rewrites its host node when its jobs in hand changed, looking
// every hostCheck (so `ingestq hosts` is at most that late, and a busy
// daemon writes it at most that often), and every HostRewrite anyway.
// ZooKeeper keeps the node itself alive with the session.
const hostCheck = time.Second

// slowStep is how long a step runs before its host's node lists what it
// waits on: a back end that hangs is found out within its own timeout
// (30 s by default), and meanwhile the job's lock alone says nothing.
const slowStep = 10 * time.Second

// HostRewrite is how often at the latest a live daemon rewrites its host
// node, whether or not anything changed.
const HostRewrite = 15 * time.Second

// HostInfo is what a daemon says of itself in /ingestq/hosts/<name>, the
// ephemeral node that lives as long as its session: `ingestq hosts`.
type HostInfo struct {
	Name         string         `json:"name"`
	Version      string         `json:"version"`
	PID          int            `json:"pid"`
	States       []string       `json:"states"`  // what it owns (serve --states): the job states by name ("Storing"), then intake, reporting
	Workers      map[string]int `json:"workers"` // per job state it owns
	BatchWorkers int            `json:"batch_workers"`
	// AccessWorkers is per access queue it works (small, large); none when
	// it assembles no packages (a pass-through daemon, or 0 workers each).
	AccessWorkers map[string]int `json:"access_workers,omitempty"`
	JobsInHand    int            `json:"jobs_in_hand"`
	// Waits is, by jid, what each of its steps running longer than
	// slowStep waits on, as the step said (Step.Doing).
	Waits map[string]WaitingOn `json:"waits,omitempty"`
	Since time.Time            `json:"since"`
	// HTTP is the URL other hosts reach its HTTP server at (serve
	// --advertise): the API is under /api/v1, the dashboard under /ui/.
	// None when it serves no HTTP (--http off), or is older.
	HTTP string `json:"http,omitempty"`
	// NATSRoute is where the other daemons' NATS servers route to its
	// own (serve --nats-cluster), set by the reader from its route node
	// (/ingestq/routes/<name>); none when it is not clustered.
	NATSRoute string `json:"nats_route,omitempty"`
	// Profiles are the profiles its pipeline serves (serve --profiles);
	// none from a pass-through daemon, or one older than this field.
	Profiles []string `json:"profiles,omitempty"`
	// Seen is when the daemon last wrote its node (set by the reader from
	// the node, not written): every 15 s while it lives, so an older one
	// is a daemon dead or cut off whose session has not ended yet.
	Seen time.Time `json:"seen,omitzero"`
}

// OwnsAll tells whether the host works every role (serve --states all).
func (h HostInfo) OwnsAll() bool { return len(h.States) == len(AllRoles()) }

// lateMargin is how long past HostRewrite a node's write may be before its
// host is late: the rewrite's own check period (hostCheck) and write, and
// a few seconds between the clocks of ZooKeeper, which stamps the node,
// and of the reader. Twice HostRewrite (30 s) was more than a session of
// 10 s and a rewrite: a killed daemon's node went before it was late.
const lateMargin = 5 * time.Second

// Late tells whether the host has not rewritten its node for over
// HostRewrite and lateMargin: a daemon dead or cut off, listed until its
// session ends. `ingestq hosts` and the dashboard both ask it.
func (h HostInfo) Late(now time.Time) bool {
	return !h.Seen.IsZero() && now.Sub(h.Seen) > HostRewrite+lateMargin
}

// Works tells whether the host works job state s (its States list it).
func (h HostInfo) Works(s queue.State) bool { return slices.Contains(h.States, string(s)) }

// hostInfo describes this daemon now.
func (r *Reactor) hostInfo(since time.Time) HostInfo {
	h := HostInfo{Name: r.cfg.Host, Version: r.cfg.Version, PID: os.Getpid(), Workers: map[string]int{},
		BatchWorkers: r.cfg.BatchWorkers, Since: since.UTC(), HTTP: r.cfg.Advertise, Profiles: r.cfg.Profiles}
	for _, s := range JobStates {
		if p, ok := r.pools[sigJob(s)].(*jobPool); ok {
			h.States = append(h.States, string(s))
			h.Workers[string(s)] = p.workers
		}
	}
	for _, x := range []Role{RoleIntake, RoleReporting} {
		if r.owns(x) {
			h.States = append(h.States, string(x))
		}
	}
	for _, name := range queue.AccessQueues {
		if p, ok := r.pools[sigAccess(name)].(*pool); ok {
			if h.AccessWorkers == nil {
				h.AccessWorkers = map[string]int{}
			}
			h.AccessWorkers[name] = p.workers
		}
	}
	h.JobsInHand, h.Waits = r.jobsInHand(), r.slowSteps()
	return h
}

// slowSteps is what each step running longer than slowStep waits on, by
// jid (nil when none).
func (r *Reactor) slowSteps() map[string]WaitingOn {
	var out map[string]WaitingOn
	now := time.Now()
	r.steps.Range(func(k, v any) bool {
		run := v.(*running)
		if w := run.step.waitingOn(now); w != nil && now.Sub(run.began) > slowStep {
			if out == nil {
				out = map[string]WaitingOn{}
			}
			out[k.(string)] = *w
		}
		return true
	})
	return out
}

// running is a step under way, for slowSteps.
type running struct {
	step  *Step
	began time.Time
}

// stepBegan lists jid's step as under way, until the returned func: which
// removes this step's entry only, as its move may have handed the job on
// to the next state's worker here, whose step is listed before this one's
// end (the next step's wait was lost from the host node).
func (r *Reactor) stepBegan(jid string, step *Step) (ended func()) {
	run := &running{step: step, began: time.Now()}
	r.steps.Store(jid, run)
	return func() { r.steps.CompareAndDelete(jid, run) }
}

// jobsInHand counts the jobs this daemon's workers hold.
func (r *Reactor) jobsInHand() int {
	n := 0
	r.working.Range(func(any, any) bool { n++; return true })
	return n
}

// register writes the host node once, and returns what it says.
func (r *Reactor) register(ctx context.Context, since time.Time) (HostInfo, error) {
	h := r.hostInfo(since)
	data, _ := json.Marshal(h) // plain fields: cannot fail
	return h, r.q.RegisterHost(ctx, r.cfg.Host, data)
}

// Register claims this daemon's host node ahead of Run, which rewrites it:
// serve registers before its NATS server joins the other daemons', so
// that a name a live daemon holds is refused before this one announces
// anything (decision 257). Only that refusal is an error; Run tries
// again after any other failure.
func (r *Reactor) Register(ctx context.Context) error {
	_, err := r.register(ctx, time.Now())
	if errors.Is(err, queue.ErrRefused) {
		return fmt.Errorf("reactor: %w", err)
	}
	return nil
}

// keepRegistered rewrites the host node when its jobs in hand or slow
// steps changed from what it said last (said) at most every hostCheck,
// every HostRewrite, and at once after a reconnect (the node went with an
// expired session), until ctx ends.
func (r *Reactor) keepRegistered(ctx context.Context, since time.Time, said HostInfo, reconnected <-chan struct{}) {
	t := time.NewTicker(hostCheck)
	defer t.Stop()
	written := time.Now()
	for tries := 0; ; {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if r.jobsInHand() == said.JobsInHand && maps.Equal(r.slowSteps(), said.Waits) && time.Since(written) < HostRewrite {
				continue
			}
		case <-reconnected:
		}
		h, err := r.register(ctx, since)
		if err != nil && ctx.Err() == nil {
			tries++
			r.log.Warn("reactor: host node not written; trying again", "err", err)
			if !backoff.Sleep(ctx, backoff.Delay(time.Second, HostRewrite, tries)) {
				return
			}
			continue
		}
		tries, said, written = 0, h, time.Now()
	}
}
