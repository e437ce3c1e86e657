package queue

import (
	"fmt"
	"slices"
	"strings"
)

// State is a status value as written in a status node: capitalised ("Pending",
// "UpdateReporting"). Only the folder names under /jobs/states are lower-case.
type State string

// The states of the three machines. Batches, jobs and access requests share names.
const (
	Pending         State = "Pending"
	Held            State = "Held"
	Estimating      State = "Estimating"
	Provisioning    State = "Provisioning"
	Downloading     State = "Downloading"
	Processing      State = "Processing"
	Storing         State = "Storing"
	Recording       State = "Recording"
	Notify          State = "Notify"
	Completed       State = "Completed"
	Failed          State = "Failed"
	Deleted         State = "Deleted"
	Reporting       State = "Reporting"
	UpdateReporting State = "UpdateReporting"
)

// Folder is the state's folder name under /jobs/states.
func (s State) Folder() string { return strings.ToLower(string(s)) }

// Edge is one allowed transition. Success and Fail mark the automatic edges a
// handler takes; the others are admin actions.
type Edge struct {
	To      State
	Success bool
	Fail    bool
}

// Machine is a state machine: for each state, its allowed next states.
type Machine struct {
	Kind   string // "job", "batch", "access": used in error messages
	States []State
	edges  map[State][]Edge
}

func newMachine(kind string, table []struct {
	from  State
	edges []Edge
}) *Machine {
	m := &Machine{Kind: kind, edges: map[State][]Edge{}}
	for _, row := range table {
		m.States = append(m.States, row.from)
		m.edges[row.from] = row.edges
	}
	return m
}

// Known reports whether s is a state of the machine.
func (m *Machine) Known(s State) bool { _, ok := m.edges[s]; return ok }

// Next lists the states reachable from s in one step.
func (m *Machine) Next(s State) []State {
	var out []State
	for _, e := range m.edges[s] {
		out = append(out, e.To)
	}
	return out
}

// Edges lists the edges leaving s.
func (m *Machine) Edges(s State) []Edge { return m.edges[s] }

// Check returns nil when from → to is allowed, and a *TransitionError otherwise.
func (m *Machine) Check(id string, from, to State) error {
	for _, e := range m.edges[from] {
		if e.To == to {
			return nil
		}
	}
	return &TransitionError{Kind: m.Kind, ID: id, From: from, To: to, Allowed: m.Next(from)}
}

// Success is the state a successful step in s leads to.
func (m *Machine) Success(s State) (State, bool) {
	for _, e := range m.edges[s] {
		if e.Success {
			return e.To, true
		}
	}
	return "", false
}

// TransitionError is an edge the machine does not have.
type TransitionError struct {
	Kind    string
	ID      string
	From    State
	To      State
	Allowed []State
}

func (e *TransitionError) Error() string {
	allowed := "none: it is final"
	if len(e.Allowed) > 0 {
		names := make([]string, len(e.Allowed))
		for i, s := range e.Allowed {
			names[i] = string(s)
		}
		allowed = strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s %s: cannot go from %s to %s (allowed from %s: %s)",
		e.Kind, e.ID, e.From, e.To, e.From, allowed)
}

// Is makes errors.Is(err, ErrIllegalTransition) true.
func (e *TransitionError) Is(target error) bool { return target == ErrIllegalTransition }

var (
	succ = func(to State) Edge { return Edge{To: to, Success: true} }
	fail = func(to State) Edge { return Edge{To: to, Fail: true} }
	adm  = func(to State) Edge { return Edge{To: to} }
)

// JobMachine is the job pipeline. Storing is the deployed library's split of
// "call the storage endpoint" out of Processing.
var JobMachine = newMachine("job", []struct {
	from  State
	edges []Edge
}{
	{Pending, []Edge{adm(Held), adm(Estimating), fail(Failed)}},
	{Held, []Edge{adm(Pending), adm(Deleted)}},
	{Estimating, []Edge{succ(Provisioning), fail(Failed)}},
	{Provisioning, []Edge{succ(Downloading), fail(Failed)}},
	{Downloading, []Edge{succ(Processing), fail(Failed)}},
	{Processing, []Edge{succ(Storing), fail(Failed)}},
	{Storing, []Edge{succ(Recording), fail(Failed)}},
	{Recording, []Edge{succ(Notify), fail(Failed)}},
	{Notify, []Edge{succ(Completed), fail(Failed)}},
	{Completed, nil},
	{Deleted, nil},
	{Failed, []Edge{adm(Pending), adm(Estimating), adm(Provisioning), adm(Downloading),
		adm(Processing), adm(Storing), adm(Recording), adm(Notify), adm(Deleted)}},
})

// BatchMachine is the batch life cycle.
var BatchMachine = newMachine("batch", []struct {
	from  State
	edges []Edge
}{
	{Pending, []Edge{adm(Held), adm(Processing)}},
	{Held, []Edge{adm(Pending), adm(Deleted)}},
	{Processing, []Edge{{To: Reporting, Success: true, Fail: true}, adm(Failed)}},
	{Reporting, []Edge{succ(Completed), fail(Failed)}},
	{Completed, nil},
	{Deleted, nil},
	{Failed, []Edge{adm(UpdateReporting), adm(Deleted)}},
	{UpdateReporting, []Edge{succ(Completed), fail(Failed)}},
})

// AccessMachine is the life cycle of an access (assembly) request.
var AccessMachine = newMachine("access", []struct {
	from  State
	edges []Edge
}{
	{Pending, []Edge{adm(Processing)}},
	{Processing, []Edge{succ(Completed), fail(Failed)}},
	{Completed, nil},
	{Deleted, nil},
	{Failed, []Edge{adm(Processing), adm(Deleted)}},
})

// JobFolders are the folders under /jobs/states, one per job state.
func JobFolders() []string {
	out := make([]string, len(JobMachine.States))
	for i, s := range JobMachine.States {
		out[i] = s.Folder()
	}
	return out
}

// ParseJobState maps a folder name or any-case state name to a job state.
func ParseJobState(name string) (State, error) {
	return parseState(JobMachine, name)
}

// ParseBatchState maps an any-case state name to a batch state.
func ParseBatchState(name string) (State, error) {
	return parseState(BatchMachine, name)
}

func parseState(m *Machine, name string) (State, error) {
	i := slices.IndexFunc(m.States, func(s State) bool { return strings.EqualFold(string(s), name) })
	if i < 0 {
		return "", fmt.Errorf("unknown %s state %q (known: %s)", m.Kind, name, joinStates(m.States))
	}
	return m.States[i], nil
}

func joinStates(states []State) string {
	names := make([]string, len(states))
	for i, s := range states {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// Bucket is the batch folder a job in state s is listed in.
func Bucket(s State) string {
	switch s {
	case Completed:
		return "batch-completed"
	case Failed:
		return "batch-failed"
	case Deleted:
		return "batch-deleted"
	default:
		return "batch-processing"
	}
}

// BucketProcessing is the bucket of the jobs still in the pipeline.
const BucketProcessing = "batch-processing"

// Buckets are all batch bucket folder names.
var Buckets = []string{"batch-processing", "batch-completed", "batch-failed", "batch-deleted"}

// nextLastSuccessful applies the rule for last_successful_status on old → new:
// it records old when new is a step forward (not Failed or Deleted, not a
// repeat) from a state that was itself not Failed or Deleted; else it keeps
// the previous value. So a requeue from Failed keeps what the failure kept.
// A hold and its release (into or out of Held) are no step either: Held is
// an operator's pause, so they keep the previous value too, where mrt-zk's
// libraries record Pending, then Held (decision 250).
func nextLastSuccessful(prev *State, old, new State) *State {
	if new != old && !isStop(new) && !isStop(old) && new != Held && old != Held {
		o := old
		return &o
	}
	return prev
}

func isStop(s State) bool { return s == Failed || s == Deleted }
