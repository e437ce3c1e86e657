package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/reactor/stalled"
)

// stalledFlags are --stalled and --stalled-after of ls jobs and show.
type stalledFlags struct {
	only  bool   // ls jobs --stalled
	spec  string // --stalled-after
	after stalled.Thresholds
}

func (a *app) stalledFlagSet(cmd *cobra.Command, f *stalledFlags, filter bool) {
	if filter {
		cmd.Flags().BoolVar(&f.only, "stalled", false, "only jobs stalled in their state (past --stalled-after, or waiting for a busy server past half its --fetch-busy-limit), with the reason the queue shows")
	}
	cmd.Flags().StringVar(&f.spec, "stalled-after", a.env(EnvStalledAfter, ""), stalledAfterUsage())
}

func (f *stalledFlags) parse() (err error) {
	f.after, err = parseStalledAfter(f.spec)
	return err
}

// list reads the jobs of state s (every job for "") through byState;
// with --stalled and no state, only those of the states a job can stall
// in, not the Completed ones a queue piles up.
func (f *stalledFlags) list(s queue.State, byState func(queue.State) ([]*queue.Job, []error, error)) (jobs []*queue.Job, problems []error, err error) {
	if !f.only || s != "" {
		return byState(s)
	}
	for _, s := range stalled.States {
		js, ps, err := byState(s)
		if err != nil {
			return nil, nil, err
		}
		jobs, problems = append(jobs, js...), append(problems, ps...)
	}
	return jobs, problems, nil
}

// stallView is a stalled job as ls and show print it.
type stallView struct {
	stalled.Stall
	For string `json:"for"` // how long it has been in its state
}

func viewOf(st stalled.Stall) stallView {
	return stallView{Stall: st, For: roughly(st.For)}
}

// String is show's text: "2h10m in Storing: no consumer of state Storing …".
func (v stallView) String() string { return fmt.Sprintf("%s in %s: %s", v.For, v.State, v.Reason) }

// roughly is a duration to the minute, to the second under a minute, to
// the millisecond under a second.
func roughly(d time.Duration) string {
	switch {
	case d >= time.Minute:
		return stalled.Short(d.Round(time.Minute))
	case d >= time.Second:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Millisecond).String()
}

// stallOf is show's "stalled" field: nil when the job is not stalled.
func stallOf(ctx context.Context, q *queue.Queue, j *queue.Job, th stalled.Thresholds) (any, error) {
	found, err := stalled.Find(ctx, q, []*queue.Job{j}, th, time.Now())
	if err != nil {
		return nil, err
	}
	if st, ok := found[j.ID]; ok {
		return viewOf(st), nil
	}
	return nil, nil
}

// lsStalled lists the stalled jobs among jobs, each with why.
func (a *app) lsStalled(ctx context.Context, q *queue.Queue, jobs []*queue.Job, th stalled.Thresholds) error {
	found, err := stalled.Find(ctx, q, jobs, th, time.Now())
	if err != nil {
		return err
	}
	type row struct {
		stallView
		BID     string `json:"bid"`
		Profile string `json:"profile"`
	}
	rows := []row{}
	var x ops.Situation
	if len(found) > 0 {
		x = a.ops(q).Situation(ctx)
	}
	for _, j := range jobs {
		if st, ok := found[j.ID]; ok {
			// A hold's reason says no door; the listing names the CLI's.
			switch {
			case st.Kind == stalled.KindHeld && j.State() == queue.Held:
				st.Reason += ": " + x.Releases("job", j.ID, j.Profile(), ops.CLI)
			case st.Kind == stalled.KindHeld:
				st.Reason += ": " + ops.ReleaseOf("queue", queue.QueueIngest, ops.CLI)
			}
			rows = append(rows, row{viewOf(st), j.BatchID, j.Profile()})
		}
	}
	if a.json() {
		return a.writeJSON(rows)
	}
	if len(rows) == 0 {
		a.println(noneOf("jobs", "stalled", false))
		return nil
	}
	t := a.newTable("JID", "BID", "STATUS", "PROFILE", "FOR", "KIND", "REASON")
	for _, r := range rows {
		t.row(r.JID, r.BID, string(r.State), r.Profile, r.For, string(r.Kind), r.Reason)
	}
	return t.flush()
}

// stalledDetector starts the API's check of one request's jobs (its
// stalled filter and a job's detail): the Facts are read once per request.
// An error reading them is taken for not stalled.
func stalledDetector(q *queue.Queue, th stalled.Thresholds) func(context.Context) func(*queue.Job) *stalled.Stall {
	return func(ctx context.Context) func(*queue.Job) *stalled.Stall {
		check := stalled.Lister(ctx, q, th, time.Now())
		return func(j *queue.Job) *stalled.Stall {
			st, err := check(j)
			if err != nil {
				return nil
			}
			return st
		}
	}
}
