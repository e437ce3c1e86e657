package ops

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"
)

// JobActions are the actions on one job, by name.
var JobActions = []string{"hold", "release", "requeue", "fail", "delete"}

// JobAction is one action on a job.
type JobAction struct {
	Name    string // one of JobActions
	Message string // fail: why ("" for the default)
	Force   bool   // fail: even while a daemon works on it
	Purge   bool   // delete: remove it from ZooKeeper
}

// Check refuses an unknown action, or an option the action does not take.
func (a JobAction) Check() error {
	switch {
	case !slices.Contains(JobActions, a.Name):
		return invalid(fmt.Sprintf("action %q: want one of %s", a.Name, strings.Join(JobActions, ", ")))
	case a.Name != "fail" && (a.Force || a.Message != ""):
		return invalid(fmt.Sprintf("action %s: force and message are for fail", a.Name))
	case a.Name != "delete" && a.Purge:
		return invalid(fmt.Sprintf("action %s: purge is for delete", a.Name))
	}
	return nil
}

// Do runs the action on one job.
func (s *Service) Do(ctx context.Context, a JobAction, jid string) (Outcome, error) {
	switch a.Name {
	case "hold":
		return s.HoldJob(ctx, jid)
	case "release":
		return s.ReleaseJob(ctx, jid)
	case "requeue":
		return s.RequeueJob(ctx, jid)
	case "fail":
		return s.FailJob(ctx, jid, a.Message, a.Force)
	case "delete":
		return s.DeleteJob(ctx, jid, a.Purge)
	}
	return Outcome{}, a.Check()
}

// Result is one job's outcome of an action on many.
type Result struct {
	JID     string
	Outcome Outcome
	Err     error
}

// bulkWorkers is how many jobs an action on many changes at once.
const bulkWorkers = 8

// DoAll runs the action on each job, a few at a time: one job's refusal
// does not stop the others. The results are in the order of jids.
func (s *Service) DoAll(ctx context.Context, a JobAction, jids []string) ([]Result, error) {
	if err := a.Check(); err != nil {
		return nil, err
	}
	out := make([]Result, len(jids))
	var g errgroup.Group
	g.SetLimit(bulkWorkers)
	for i, jid := range jids {
		g.Go(func() error {
			o, err := s.Do(ctx, a, jid)
			out[i] = Result{JID: jid, Outcome: o, Err: err}
			return nil
		})
	}
	_ = g.Wait() // the errors are in the results
	return out, nil
}
