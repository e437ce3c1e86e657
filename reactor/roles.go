package reactor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ingestq/ingestq/reactor/queue"
)

// Role is a part of the queue's work a daemon can own (serve --states): a
// job state, by its folder name ("downloading"), or one of the two batch
// roles. A daemon works only the roles it owns; another consumer of the
// same queue (Merritt's storage and inventory services, a single reporter)
// works the others.
type Role string

// The batch roles.
const (
	RoleIntake    Role = "intake"    // Pending batches → jobs
	RoleReporting Role = "reporting" // the reports of finished batches (Reporting, UpdateReporting)
)

// JobRole is the role of working job state s.
func JobRole(s queue.State) Role { return Role(s.Folder()) }

// AllRoles is every role, the job states in pipeline order, then intake
// and reporting: what a daemon owns by default.
func AllRoles() []Role {
	out := make([]Role, 0, len(JobStates)+2)
	for _, s := range JobStates {
		out = append(out, JobRole(s))
	}
	return append(out, RoleIntake, RoleReporting)
}

// ParseRoles reads role names (any case, blanks and empty names ignored); an
// unknown one is an error naming it and the known ones. The result is in
// AllRoles' order, each role once.
func ParseRoles(names []string) ([]Role, error) {
	all := AllRoles()
	want := map[Role]bool{}
	for _, n := range names {
		r := Role(strings.ToLower(strings.TrimSpace(n)))
		if r == "" {
			continue // "storing,,recording", a trailing comma
		}
		if !slices.Contains(all, r) {
			return nil, fmt.Errorf("unknown state %q (known: %s)", n, RoleNames(all))
		}
		want[r] = true
	}
	if len(want) == 0 {
		return nil, fmt.Errorf("no state named (known: %s)", RoleNames(all))
	}
	return slices.DeleteFunc(all, func(r Role) bool { return !want[r] }), nil
}

// RoleNames lists roles as --states spells them: "storing, recording".
func RoleNames(rs []Role) string {
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = string(r)
	}
	return strings.Join(names, ", ")
}

// owns tells whether this daemon works role x.
func (r *Reactor) owns(x Role) bool { return slices.Contains(r.cfg.Roles, x) }

// wake wakes the pool of signal name, if this daemon has it (owns its role).
func (r *Reactor) wake(name string) {
	if p := r.pools[name]; p != nil {
		p.Wake()
	}
}
