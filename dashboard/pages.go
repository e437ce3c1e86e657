package dashboard

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"time"

	"github.com/ingestq/ingestq/api"
	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/reactor/stalled"
)

// Page sizes of the listings.
const (
	batchesPerPage = 50
	jobsPerPage    = 100
	accessPerPage  = 50
)

// pager is a listing's links: to its first page, when this is not it, and
// to its next page, when there is one.
type pager struct{ First, Next string }

// pagesOf makes the links of the listing at path, keeping its query v (the
// filters) but for where the page starts (after); next is where the next
// page starts ("" on the last page).
func pagesOf(path string, v url.Values, next string) pager {
	link := func(after string) string {
		q := maps.Clone(v)
		q.Del("after")
		if after != "" {
			q.Set("after", after)
		}
		if len(q) == 0 {
			return path
		}
		return path + "?" + q.Encode()
	}
	var p pager
	if v.Get("after") != "" {
		p.First = link("")
	}
	if next != "" {
		p.Next = link(next)
	}
	return p
}

// overviewPage is the queue at a glance.
type overviewPage struct {
	States     []StateCount
	Total      int
	Throughput Throughput
	Chart      chart
	Holds      []ops.HeldItem // the queue and collection holds (Held jobs and batches: their pages)
	Hosts      []reactor.HostInfo
	Access     []accessCount // per state, the states with requests only
	Problems   []string      // what could not be read
}

// accessCount is how many access requests are in a state, per queue.
type accessCount struct {
	State        queue.State
	Small, Large int
}

func (d *Dashboard) overview(w http.ResponseWriter, r *http.Request, caller api.Caller) {
	now := time.Now()
	o := overviewPage{States: d.hub.counts(now), Throughput: d.hub.throughput(now), Access: d.hub.accessCounts()}
	for _, s := range o.States {
		o.Total += s.Jobs
	}
	o.Chart = throughputChart(o.Throughput)
	holds, err := d.cfg.Ops.Holds(r.Context())
	if err != nil {
		o.Problems = append(o.Problems, "holds: "+err.Error())
	}
	o.Holds = ops.HoldItems(holds, ops.Dashboard)
	hosts, problems, err := d.cfg.Ops.Hosts(r.Context())
	if err != nil {
		o.Problems = append(o.Problems, "hosts: "+err.Error())
	}
	o.Hosts = hosts
	for _, p := range problems {
		o.Problems = append(o.Problems, "host "+p.Name+": not an ingestq daemon's node: "+p.Err.Error())
	}
	d.render(w, r, http.StatusOK, "overview", page{Title: "Overview", Caller: caller, Data: o})
}

// batchesPage is a page of batches with their progress.
type batchesPage struct {
	State    string
	Rows     []batchLine
	Pages    pager
	Problems []string
}

// batchLine is a batch in the listing.
type batchLine struct {
	ops.BatchRow
	Total, Completed, Failed, Deleted int
	Bar                               bar
}

func (d *Dashboard) batches(w http.ResponseWriter, r *http.Request, caller api.Caller) {
	v := r.URL.Query()
	p := batchesPage{State: v.Get("state")}
	f := ops.BatchFilter{}
	if p.State != "" {
		s, err := queue.ParseBatchState(p.State)
		if err != nil {
			d.problem(w, r, caller, errBadInput("state: "+err.Error()))
			return
		}
		f.State = s
	}
	list, err := d.cfg.Ops.ListBatches(r.Context(), f, ops.Page{Limit: batchesPerPage, After: v.Get("after"), Reverse: true})
	if err != nil {
		d.problem(w, r, caller, err)
		return
	}
	rows, errs := d.cfg.Ops.BatchRows(r.Context(), list.Batches)
	for i, row := range rows {
		if errs[i] != nil {
			list.Problems = append(list.Problems, errs[i])
		}
		l := batchLine{BatchRow: row, Completed: len(row.Jobs["batch-completed"]) + row.Archived, Failed: len(row.Jobs["batch-failed"]),
			Deleted: len(row.Jobs["batch-deleted"]), Total: row.Archived + row.Unmade}
		for _, jids := range row.Jobs {
			l.Total += len(jids)
		}
		l.Bar = progress(l.Total, l.Completed, l.Failed, l.Deleted)
		p.Rows = append(p.Rows, l)
	}
	p.Pages, p.Problems = pagesOf(r.URL.Path, v, list.Next), texts(list.Problems)
	d.render(w, r, http.StatusOK, "batches", page{Title: "Batches", Caller: caller, Data: p})
}

// batchPage is one batch and a page of its jobs.
type batchPage struct {
	Status    *ops.BatchStatus
	Submitter string
	Hold      string // a Held batch's: what it stops, how it is released
	Bar       bar
	States    []stateN
	Table     jobTable
	Pages     pager
	Problems  []string
}

// jobTable is a listing of jobs, with why each is stalled when asked.
type jobTable struct {
	Rows    []ops.JobRow
	Reasons map[string]string // jid → why it is stalled; nil: no column
}

// stateN is a count of jobs in a state.
type stateN struct {
	State queue.State
	N     int
}

func (d *Dashboard) batch(w http.ResponseWriter, r *http.Request, caller api.Caller) {
	st, err := d.cfg.Ops.BatchStatus(r.Context(), r.PathValue("id"))
	if err != nil {
		d.problem(w, r, caller, api.RemovedTo(r.Context(), d.cfg.Ops, caller, r.PathValue("id"), err))
		return
	}
	list, err := d.cfg.Ops.ListJobs(r.Context(), ops.JobFilter{Batch: st.BID}, ops.Page{Limit: jobsPerPage, After: r.URL.Query().Get("after")})
	if err != nil {
		d.problem(w, r, caller, err)
		return
	}
	submitter, _ := st.Submission["submitter"].(string)
	p := batchPage{Status: st, Submitter: submitter,
		Hold:  d.cfg.Ops.Situation(r.Context()).HoldOf("batch", st.BID, st.State, st.Profile, st.LastModified, ops.Dashboard),
		Table: jobTable{Rows: d.cfg.Ops.Rows(r.Context(), list.Jobs, ops.Dashboard)}, Pages: pagesOf(r.URL.Path, r.URL.Query(), list.Next), Problems: texts(list.Problems),
		Bar: progress(st.Jobs.Total, st.Jobs.ByState[queue.Completed], st.Jobs.ByState[queue.Failed], st.Jobs.ByState[queue.Deleted])}
	for _, s := range stateOrder {
		if n := st.Jobs.ByState[s]; n > 0 {
			p.States = append(p.States, stateN{s, n})
		}
	}
	d.render(w, r, http.StatusOK, "batch", page{Title: "Batch " + st.BID, Caller: caller, Data: p})
}

// jobsPage is a page of the jobs in a state (or all), or the stalled ones.
type jobsPage struct {
	State    string
	Stalled  bool
	Table    jobTable
	Pages    pager
	Problems []string
}

func (d *Dashboard) jobs(w http.ResponseWriter, r *http.Request, caller api.Caller) {
	v := r.URL.Query()
	p := jobsPage{State: v.Get("state"), Stalled: v.Get("stalled") != ""}
	var f ops.JobFilter
	if p.State != "" {
		s, err := queue.ParseJobState(p.State)
		if err != nil {
			d.problem(w, r, caller, errBadInput("state: "+err.Error()))
			return
		}
		f.State = s
	}
	if p.Stalled {
		if d.cfg.Stalled == nil {
			d.problem(w, r, caller, &pageError{http.StatusNotImplemented, "this daemon does not detect stalled work"})
			return
		}
		reasons := map[string]string{}
		check := d.cfg.Stalled(r.Context())
		f.Keep = func(j *queue.Job) bool {
			st := check(j)
			if st != nil {
				reasons[j.ID] = st.Reason
			}
			return st != nil
		}
		p.Table.Reasons = reasons
	}
	list, err := d.cfg.Ops.ListJobs(r.Context(), f, ops.Page{Limit: jobsPerPage, After: v.Get("after")})
	if err != nil {
		d.problem(w, r, caller, err)
		return
	}
	p.Table.Rows, p.Pages, p.Problems = d.cfg.Ops.Rows(r.Context(), list.Jobs, ops.Dashboard), pagesOf(r.URL.Path, v, list.Next), texts(list.Problems)
	d.render(w, r, http.StatusOK, "jobs", page{Title: "Jobs", Caller: caller, Data: p})
}

// jobPage is one job: its nodes, where it waits, what happened to it and
// what may be done to it.
type jobPage struct {
	Job             *queue.Job
	Payload         string // its payload_url as the caller is shown it (api.Caller.Shown)
	Row             ops.JobRow
	Place           *ops.Place
	ETA             *ops.ETA
	Stalled         *stalled.Stall
	Timeline        []events.Event
	TimelineProblem string
	ProgressLeft    int // progress events not shown: each run of them is shown as its last (events.LastOfProgressRuns)
	Actions         []Action
	Others          []string // other jobs of the same ARK
}

// Finished tells whether the job has ended (Completed, Failed, Deleted):
// it has no place in a queue and no ETA, where the page said of a
// Completed job that it "waits in no queue", its ETA "unknown".
func (p jobPage) Finished() bool {
	s := p.Job.State()
	return s == queue.Completed || s == queue.Failed || s == queue.Deleted
}

// NoPlace says why the job has no place in its state's queue.
func (p jobPage) NoPlace() string {
	switch {
	case p.Job.State() == queue.Failed:
		return "none: it is Failed, no step is to come unless it is requeued"
	case p.Finished():
		return "none: it is " + string(p.Job.State()) + ", no step is to come"
	case p.Job.State() == queue.Held:
		return "none: it is Held, no daemon takes it until it is released"
	}
	return "not listed in its state's folder (a move under way)"
}

func (d *Dashboard) job(w http.ResponseWriter, r *http.Request, caller api.Caller) {
	d.showJob(w, r, caller, r.PathValue("id"), http.StatusOK, nil)
}

// showJob renders a job's page (by jid or ARK) with status and an
// action's outcome.
func (d *Dashboard) showJob(w http.ResponseWriter, r *http.Request, caller api.Caller, id string, status int, f *flash) {
	j, others, _, err := d.cfg.Ops.FindJob(r.Context(), id)
	if err == nil && j.ID != id && r.Method == http.MethodGet && len(others) == 0 {
		http.Redirect(w, r, Prefix+"jobs/"+j.ID, http.StatusFound) // an ARK: the job's own address, for live updates
		return
	}
	var place *ops.Place
	if err == nil {
		place, err = d.cfg.Ops.PlaceOf(r.Context(), j)
	} else {
		err = api.RemovedTo(r.Context(), d.cfg.Ops, caller, id, err)
	}
	if err != nil {
		status, msg := statusOf(d.toldTo(caller, err, "path", r.URL.Path))
		d.render(w, r, status, "error", page{Title: "Job", Caller: caller, Flash: f, Data: errorPage{Status: status, Message: msg}})
		return
	}
	p := jobPage{Job: j, Payload: caller.Shown(j.Config.PayloadURL), Row: d.cfg.Ops.Situation(r.Context()).Row(j, ops.Dashboard), Place: place, ETA: d.cfg.Ops.JobETA(j, place), Actions: actionsFor(j.ID, j.State()), Others: others}
	if d.cfg.Stalled != nil {
		p.Stalled = d.cfg.Stalled(r.Context())(j)
	}
	p.Timeline, p.TimelineProblem = api.Timeline(r.Context(), d.cfg.Bus, j)
	// A download's progress, two events a second, as events replay shows it.
	p.Timeline, p.ProgressLeft = events.LastOfProgressRuns(p.Timeline)
	d.render(w, r, status, "job", page{Title: "Job " + j.ID, Caller: caller, Flash: f, Data: p})
}

func texts(errs []error) []string {
	var out []string
	for _, err := range errs {
		out = append(out, err.Error())
	}
	return out
}

// withTimeout bounds a read a page makes beyond its own request's life.
func withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 20*time.Second)
}

// ago says how long ago t was, shortly.
func ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
