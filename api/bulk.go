package api

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/ingestq/ingestq/ops"
	"golang.org/x/sync/errgroup"
)

// MaxBulk is the most jobs one bulk action changes: past it, narrow the
// filter (or send several lists).
const MaxBulk = 10_000

// bulkBody is an action on many jobs: those listed, or those a filter
// selects (a filter with at least one field: an empty one would select
// every job).
type bulkBody struct {
	Action  string            `json:"action"` // hold, release, requeue, fail, delete
	JIDs    []string          `json:"jids"`
	Filter  map[string]string `json:"filter"` // the jobs list's parameters: state, batch, profile, local_id, ark, stalled
	Message string            `json:"message"`
	Force   bool              `json:"force"`
	Purge   bool              `json:"purge"`
}

// bulkResult is one job's outcome: its status as a single action would
// have answered, and the outcome or the problem.
type bulkResult struct {
	JID     string       `json:"jid"`
	Status  int          `json:"status"`
	Outcome *ops.Outcome `json:"outcome,omitempty"`
	Problem *Problem     `json:"problem,omitempty"`
}

type bulkOut struct {
	Action    string       `json:"action"`
	Succeeded int          `json:"succeeded"`
	Failed    int          `json:"failed"`
	Results   []bulkResult `json:"results"`
}

func (a *API) bulk(w http.ResponseWriter, r *http.Request, caller Caller) error {
	if _, err := readQuery(r); err != nil {
		return err
	}
	var body bulkBody
	if err := decodeBody(w, r, &body); err != nil {
		return err
	}
	act := ops.JobAction{Name: body.Action, Message: body.Message, Force: body.Force, Purge: body.Purge}
	if err := act.Check(); err != nil {
		return err
	}
	if err := Allowed(caller, act); err != nil {
		return err
	}
	jids, err := a.bulkJobs(r.Context(), caller, body)
	if err != nil {
		return err
	}
	results, err := a.doAll(r.Context(), caller, act, jids)
	if err != nil {
		return err
	}
	out := bulkOut{Action: act.Name, Results: make([]bulkResult, len(results))}
	for i, res := range results {
		out.Results[i] = bulkResult{JID: res.JID, Status: http.StatusOK}
		if res.Err != nil {
			p := problemOf(res.Err)
			out.Results[i].Status, out.Results[i].Problem = p.Status, &p
			out.Failed++
			continue
		}
		o := apiOutcome(res.Outcome)
		out.Results[i].Outcome = &o
		out.Succeeded++
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// doAll runs act on the jobs of jids the caller sees; each other one's
// result is the not found of a job that does not exist (or why it could
// not be read).
func (a *API) doAll(ctx context.Context, caller Caller, act ops.JobAction, jids []string) ([]ops.Result, error) {
	if !caller.Scoped() {
		return a.cfg.Ops.DoAll(ctx, act, jids)
	}
	hidden := make([]error, len(jids))
	var g errgroup.Group
	g.SetLimit(bulkReaders)
	for i, jid := range jids {
		g.Go(func() error {
			hidden[i] = a.seesJob(ctx, caller, jid) // unread: not acted on either
			return nil
		})
	}
	_ = g.Wait() // the errors are in hidden
	var seen []string
	for i, jid := range jids {
		if hidden[i] == nil {
			seen = append(seen, jid)
		}
	}
	done, err := a.cfg.Ops.DoAll(ctx, act, seen)
	if err != nil {
		return nil, err
	}
	out := make([]ops.Result, len(jids))
	for i, jid := range jids {
		if hidden[i] != nil {
			out[i] = ops.Result{JID: jid, Err: hidden[i]}
			continue
		}
		out[i], done = done[0], done[1:]
	}
	return out, nil
}

// bulkReaders is how many jobs a scoped bulk action reads at once, to
// find their profiles.
const bulkReaders = 32

// bulkJobs are the jobs a bulk action is for: its list, or its filter's.
func (a *API) bulkJobs(ctx context.Context, caller Caller, body bulkBody) ([]string, error) {
	switch {
	case len(body.JIDs) > 0 && body.Filter != nil:
		return nil, badRequest("give jids or filter, not both")
	case len(body.JIDs) > MaxBulk:
		return nil, badRequest("%d jids: at most %d at once", len(body.JIDs), MaxBulk)
	case len(body.JIDs) > 0:
		return body.JIDs, nil
	case len(body.Filter) == 0:
		return nil, badRequest("no jobs: give jids, or a filter of at least one of %s", strings.Join(jobFilterParams, ", "))
	}
	v := url.Values{}
	for k, val := range body.Filter {
		v.Set(k, val)
	}
	for name := range v {
		if !slices.Contains(jobFilterParams, name) {
			return nil, badRequest("filter %q: want one of %s", name, strings.Join(jobFilterParams, ", "))
		}
	}
	f, err := a.jobFilter(ctx, caller, v, nil)
	if err != nil {
		return nil, err
	}
	list, err := a.cfg.Ops.ListJobs(ctx, f, ops.Page{Limit: MaxBulk + 1})
	if err != nil {
		return nil, err
	}
	if len(list.Jobs) > MaxBulk {
		return nil, badRequest("the filter selects more than %d jobs: narrow it", MaxBulk)
	}
	jids := make([]string, len(list.Jobs))
	for i, j := range list.Jobs {
		jids[i] = j.ID
	}
	return jids, nil
}
