// Package stalled finds stalled work: a job whose state has not changed
// for longer than its state's threshold, with the reason the queue shows
// (the lock's holder, a hold, a wait for room, a retried error, a back end
// out of reach, a wait for the host that holds its files, no live consumer
// of the state: the Kinds of check.go). The daemon's metrics, the API, the
// dashboard, `ingestq ls jobs --stalled` and `ingestq show` all ask it, so
// they agree.
//
// When a job entered its state is its ref's creation under
// /jobs/states/<state> (ZooKeeper's clock, read with Queue.RefTimes): the
// status's last_modified is written by each writer's own clock, and foreign
// writers may stamp it otherwise.
package stalled

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// States are the states a job can stall in: the pipeline's, and Held. A
// job that is Completed, Failed or Deleted has stopped, not stalled.
var States = append(slices.Clone(reactor.JobStates), queue.Held)

// Thresholds says how long a job may stay in each state before it is
// flagged as stalled.
type Thresholds map[queue.State]time.Duration

// Defaults are the thresholds not set otherwise: an hour where a step
// takes seconds to minutes; two where it waits for room or moves a large
// object; a day for a job an operator held.
func Defaults() Thresholds {
	th := Thresholds{}
	for _, s := range States {
		th[s] = time.Hour
	}
	for _, s := range []queue.State{queue.Provisioning, queue.Downloading, queue.Storing} {
		th[s] = 2 * time.Hour
	}
	th[queue.Held] = 24 * time.Hour
	return th
}

// Parse reads a --stalled-after setting over the defaults: a comma-separated
// list of a duration for every state and state=duration for one state (a
// folder or state name, any case), e.g. "30m,downloading=4h,held=72h". The
// duration for every state applies first, wherever it stands. "" gives
// the defaults.
func Parse(spec string) (Thresholds, error) {
	th := Defaults()
	var every time.Duration
	each := Thresholds{}
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, value, one := strings.Cut(part, "=")
		d, err := time.ParseDuration(strings.TrimSpace(value))
		if !one {
			d, err = time.ParseDuration(part)
		}
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%q: want a positive duration like 45m or 2h", part)
		}
		if !one {
			if every != 0 {
				return nil, fmt.Errorf("%q: a duration for every state is given twice", part)
			}
			every = d
			continue
		}
		s, err := queue.ParseJobState(strings.TrimSpace(name))
		switch {
		case err != nil:
			return nil, fmt.Errorf("%q: no job state %q (states: %s)", part, strings.TrimSpace(name), stateNames())
		case !slices.Contains(States, s):
			return nil, fmt.Errorf("%q: a %s job has stopped; it never stalls (states: %s)", part, s, stateNames())
		}
		each[s] = d
	}
	for _, s := range States {
		if every != 0 {
			th[s] = every
		}
		if d, ok := each[s]; ok {
			th[s] = d
		}
	}
	return th, nil
}

// String is the thresholds as Parse reads them, in pipeline order.
func (th Thresholds) String() string {
	parts := make([]string, 0, len(States))
	for _, s := range States {
		if d, ok := th[s]; ok {
			parts = append(parts, s.Folder()+"="+Short(d))
		}
	}
	return strings.Join(parts, ",")
}

// Over tells whether a job that entered state s at since has stayed past
// its threshold at now. A state without a threshold never stalls.
func (th Thresholds) Over(s queue.State, since, now time.Time) bool {
	limit, ok := th[s]
	return ok && !since.IsZero() && now.Sub(since) > limit
}

// Short writes a duration without its zero parts: 2h, 90m, 1h30m, 45s.
func Short(d time.Duration) string {
	switch {
	case d >= time.Minute && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d >= time.Minute && d%time.Minute == 0:
		return strings.TrimSuffix(d.String(), "0s")
	}
	return d.String()
}

func stateNames() string {
	names := make([]string, len(States))
	for i, s := range States {
		names[i] = s.Folder()
	}
	return strings.Join(names, ", ")
}
