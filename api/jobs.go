package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/reactor/stalled"
)

func (a *API) jobRoutes() {
	a.handle("GET", "/jobs", RoleRead, a.listJobs)
	a.handle("GET", "/jobs/{jid}", RoleRead, a.getJob)
	a.handle("DELETE", "/jobs/{jid}", RoleAdmin, a.jobAction("delete"))
	for _, name := range []string{"hold", "release", "requeue", "fail"} {
		a.handle("POST", "/jobs/{jid}/"+name, RoleOperate, a.jobAction(name))
	}
	a.handle("POST", "/jobs/actions", RoleOperate, a.bulk)
}

// jobFilterParams are the query parameters that select jobs.
var jobFilterParams = []string{"state", "batch", "profile", "local_id", "ark", "stalled"}

func (a *API) listJobs(w http.ResponseWriter, r *http.Request, caller Caller) error {
	v, err := readQuery(r, append(jobFilterParams, "limit", "after")...)
	if err != nil {
		return err
	}
	p, err := pageOf(v)
	if err != nil {
		return err
	}
	if v.Get("state") != "" {
		err = checkCursor(p.After, refCursor, "a job ref, PP-jid…, with state")
	} else {
		err = checkCursor(p.After, jidCursor, "a jid")
	}
	if err != nil {
		return err
	}
	stalls := map[string]*stalled.Stall{} // with ?stalled=true: why each is
	var mu sync.Mutex
	f, err := a.jobFilter(r.Context(), caller, v, func(j *queue.Job, st *stalled.Stall) {
		mu.Lock()
		stalls[j.ID] = st
		mu.Unlock()
	})
	if err != nil {
		return err
	}
	list, err := a.cfg.Ops.ListJobs(r.Context(), f, p)
	if err != nil {
		return err
	}
	rows := make([]jobRow, len(list.Jobs))
	for i, row := range a.cfg.Ops.Rows(r.Context(), list.Jobs, ops.HTTP) {
		rows[i] = newJobRow(row)
		rows[i].Stalled = stalls[row.JID]
	}
	writeJSON(w, http.StatusOK, newPage(rows, list.Next, list.Problems))
	return nil
}

// jobFilter reads the parameters that select jobs: state (any case, or its
// folder's name), batch (bid or uuid), profile, local_id, ark, stalled;
// of a scoped caller, only its profiles' jobs (another's batch is missing).
// With stalled, onStalled (when not nil) is told of each stalled job kept.
func (a *API) jobFilter(ctx context.Context, caller Caller, v url.Values, onStalled func(*queue.Job, *stalled.Stall)) (ops.JobFilter, error) {
	f := ops.JobFilter{Profile: v.Get("profile"), LocalID: v.Get("local_id"), ARK: v.Get("ark")}
	var err error
	if s := v.Get("state"); s != "" {
		if f.State, err = queue.ParseJobState(s); err != nil {
			return f, badRequest("state: %v", err)
		}
	}
	if id := v.Get("batch"); id != "" {
		if f.Batch, err = a.cfg.Ops.BatchID(ctx, id); err != nil {
			return f, err
		}
		if err := a.seesBatch(ctx, caller, id); err != nil {
			return f, err
		}
	}
	if caller.Scoped() {
		f.Keep = func(j *queue.Job) bool { return caller.Sees(j.Profile()) }
	}
	onlyStalled, err := boolParam(v, "stalled")
	switch {
	case err != nil:
		return f, err
	case onlyStalled && a.cfg.Stalled == nil:
		return f, &apiError{status: http.StatusNotImplemented, kind: "not-implemented",
			msg: "stalled: this daemon does not detect stalled work yet"}
	case onlyStalled:
		check := a.cfg.Stalled(ctx)
		f.Keep = func(j *queue.Job) bool {
			if !caller.Sees(j.Profile()) {
				return false // not asked of the detector
			}
			st := check(j)
			if st != nil && onStalled != nil {
				onStalled(j, st)
			}
			return st != nil
		}
	}
	return f, nil
}

// jobDetail is a job with every node, where it waits, when it may be done
// and what happened to it.
type jobDetail struct {
	JID                  string              `json:"jid"`
	Batch                string              `json:"batch"`
	Status               queue.State         `json:"status"`
	LastModified         string              `json:"last_modified"` // RFC 3339
	LastSuccessfulStatus *queue.State        `json:"last_successful_status"`
	RetryCount           int                 `json:"retry_count"`   // requeues by an operator (mrt-zk's meaning)
	StepAttempts         *ops.StepAttempts   `json:"step_attempts"` // the reactor's retries of the current step; null unless retried
	Hold                 string              `json:"hold,omitempty"`
	LockedBy             string              `json:"locked_by,omitempty"`
	Message              string              `json:"message"`
	Priority             int                 `json:"priority"`
	SpaceNeeded          int64               `json:"space_needed"`
	Configuration        map[string]any      `json:"configuration"`
	Identifiers          *queue.Identifiers  `json:"identifiers"`
	Metadata             *queue.Metadata     `json:"metadata"`
	Store                *queue.StepManifest `json:"store"`
	Inventory            *queue.StepManifest `json:"inventory"`
	Removed              []string            `json:"removed"` // the keys above (configuration.working_dir, …) that name what an ended job's end removed (ops.Removed)
	Locked               bool                `json:"locked"`
	Created              time.Time           `json:"created"`
	Place                *ops.Place          `json:"place"`   // null when it waits in no queue
	Stalled              *stalled.Stall      `json:"stalled"` // null when not stalled (or not detected)
	ETA                  *ops.ETA            `json:"eta"`     // null when unknown
	Timeline             []events.Event      `json:"timeline"`
	TimelineProblem      string              `json:"timeline_problem,omitempty"` // why the timeline is missing or short
}

// timelineWait bounds the replay of a job's timeline.
const timelineWait = 10 * time.Second

func (a *API) getJob(w http.ResponseWriter, r *http.Request, caller Caller) error {
	if _, err := readQuery(r); err != nil {
		return err
	}
	j, _, _, err := a.cfg.Ops.FindJob(r.Context(), r.PathValue("jid"))
	if err != nil {
		return RemovedTo(r.Context(), a.cfg.Ops, caller, r.PathValue("jid"), err)
	}
	if !caller.Sees(j.Profile()) {
		return missingJob(r.PathValue("jid"))
	}
	place, err := a.cfg.Ops.PlaceOf(r.Context(), j)
	if err != nil {
		return err
	}
	x := a.cfg.Ops.Situation(r.Context())
	d := jobDetail{JID: j.ID, Batch: j.BatchID, Status: j.State(), LastModified: queue.JSONTime(j.Status.LastModified),
		StepAttempts: ops.AttemptsOf(j), Hold: x.HoldOf("job", j.ID, j.State(), j.Profile(), j.Status.LastModified, ops.HTTP), LockedBy: x.LockedBy(j),
		LastSuccessfulStatus: j.Status.LastSuccessfulStatus, RetryCount: j.Status.RetryCount, Message: j.Status.Message,
		Priority: j.Priority, SpaceNeeded: j.SpaceNeeded, Configuration: shownRecord(j.Config.Map(), caller), Identifiers: j.Identifiers,
		Metadata: j.Metadata, Store: shownManifest(j.Store, caller), Inventory: shownManifest(j.Inventory, caller), Removed: ops.Removed(j), Locked: j.Locked, Created: j.Created.UTC(),
		Place: place, ETA: a.cfg.Ops.JobETA(j, place), Timeline: []events.Event{}}
	if a.cfg.Stalled != nil {
		d.Stalled = a.cfg.Stalled(r.Context())(j)
	}
	d.Timeline, d.TimelineProblem = Timeline(r.Context(), a.cfg.Bus, j)
	writeJSON(w, http.StatusOK, d)
	return nil
}

// Timeline replays a job's recorded events, from its creation on (within
// 10 s); the string says why it is missing or short ("" when whole).
func Timeline(ctx context.Context, bus *events.Bus, j *queue.Job) ([]events.Event, string) {
	evs := []events.Event{}
	if bus == nil {
		return evs, "this daemon has no event stream"
	}
	ctx, cancel := context.WithTimeout(ctx, timelineWait)
	defer cancel()
	err := events.Replay(ctx, bus.Conn(), "", events.Filter{JobID: j.ID, Since: j.Created}, func(ev events.Event) error {
		evs = append(evs, ev)
		return nil
	})
	if err != nil {
		return evs, err.Error()
	}
	return events.PlaceRecovered(evs), ""
}

// actionBody is the body of an action on a job: all optional.
type actionBody struct {
	Message string `json:"message"` // fail: why
	Force   bool   `json:"force"`   // fail: even while a daemon works on it (admin)
}

// jobAction answers an action on one job with its outcome. delete takes
// ?purge=true; fail takes a body {message, force}.
func (a *API) jobAction(name string) handler {
	return func(w http.ResponseWriter, r *http.Request, caller Caller) error {
		act := ops.JobAction{Name: name}
		var known []string
		if name == "delete" {
			known = append(known, "purge")
		}
		v, err := readQuery(r, known...)
		if err != nil {
			return err
		}
		if act.Purge, err = boolParam(v, "purge"); err != nil {
			return err
		}
		if name == "fail" && r.ContentLength != 0 {
			var body actionBody
			if err := decodeBody(w, r, &body); err != nil {
				return err
			}
			act.Message, act.Force = body.Message, body.Force
		}
		if err := Allowed(caller, act); err != nil {
			return err
		}
		if err := a.seesJob(r.Context(), caller, r.PathValue("jid")); err != nil {
			return err
		}
		o, err := a.cfg.Ops.Do(r.Context(), act, r.PathValue("jid"))
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, apiOutcome(o))
		return nil
	}
}

// Allowed refuses an action the caller's role does not cover: delete,
// purge and fail with force need admin, the others operate.
func Allowed(c Caller, act ops.JobAction) error {
	need := RoleOperate
	if act.Name == "delete" || act.Force || act.Purge {
		need = RoleAdmin
	}
	if c.Role < need {
		return &apiError{status: http.StatusForbidden, kind: "forbidden",
			msg: fmt.Sprintf("the token of %s has the %s role; %s needs %s", c.Name, c.Role, describe(act), need)}
	}
	return nil
}

func describe(act ops.JobAction) string {
	switch {
	case act.Force:
		return act.Name + " with force"
	case act.Purge:
		return act.Name + " with purge"
	}
	return act.Name
}
