package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ingestq/ingestq/internal/visible"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/reactor/stalled"
)

func (a *app) treeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "tree [PATH]",
		Short: "List the queue's nodes with their values (all, or those under PATH)",
		Long: "tree lists the queue's nodes as `path: value` lines, each path under --zk-root (the README's paths\n" +
			"are too): with --zk-root /ingestq, /batches is the node /ingestq/batches, and ingestq's own\n" +
			"/ingestq/hosts is /ingestq/ingestq/hosts.",
		Args: args("[PATH]"),
		RunE: a.action(func(ctx context.Context, q *queue.Queue, args []string) error {
			rel := ""
			if len(args) == 1 && args[0] != "/" {
				rel = "/" + strings.Trim(args[0], "/")
			}
			entries, err := q.Tree(ctx, rel)
			if err != nil {
				return fmt.Errorf("tree %s: %w", q.Path(rel), err)
			}
			if a.json() {
				m := make(map[string]any, len(entries))
				for _, e := range entries {
					m[e.Path] = e.Value
				}
				return a.writeJSON(m)
			}
			for _, e := range entries {
				a.println("%s: %s", e.Path, textValue(e.Value, "null"))
			}
			return nil
		}),
	}
}

func (a *app) lsCommand() *cobra.Command {
	ls := &cobra.Command{
		Use:   "ls batches|jobs",
		Short: "List batches or jobs",
		Args:  cobra.ArbitraryArgs,
		RunE:  group,
	}
	ls.AddCommand(a.lsBatchesCommand(), a.lsJobsCommand())
	return ls
}

func (a *app) lsBatchesCommand() *cobra.Command {
	var stateFlag string
	var state queue.State
	cmd := &cobra.Command{
		Use:   "batches",
		Short: "List batches: status, uuid, profile, and their jobs: unfinished, completed, failed, deleted",
		Args:  args(),
		PreRunE: func(*cobra.Command, []string) (err error) {
			state, err = parseState(stateFlag, queue.ParseBatchState)
			return err
		},
		RunE: a.action(func(ctx context.Context, q *queue.Queue, _ []string) error {
			list, err := a.ops(q).ListBatches(ctx, ops.BatchFilter{State: state}, ops.Page{})
			if err != nil {
				return err
			}
			a.warnAll("skipped unreadable batch", list.Problems)
			batches := list.Batches
			rows, errs := a.ops(q).BatchRows(ctx, batches)
			for i, err := range errs {
				if err != nil {
					a.warn("cannot list the jobs of batch "+batches[i].ID, err)
				}
			}
			if a.json() {
				for i := range rows {
					rows[i].LastModified = queue.JSONTime(rows[i].LastModified)
				}
				return a.writeJSON(rows)
			}
			defer a.noteHolds(ctx, q, batches)
			if len(rows) == 0 {
				a.println(noneOf("batches", string(state), false))
				return nil
			}
			t := a.newTable("BID", "STATUS", "UUID", "PROFILE", "JOBS", "LAST MODIFIED")
			for _, r := range rows {
				t.row(r.BID, string(r.Status), r.UUID, r.Profile, jobCounts(r.Jobs, r.Archived, r.Unmade), nodeTime(r.LastModified).String())
			}
			return t.flush()
		}),
	}
	cmd.Flags().Var(once(&stateFlag), "state", "only batches in this state (any case)")
	return cmd
}

// noneOf is what an ls prints instead of an empty table: "no jobs", "no
// Failed jobs", "no jobs match" (filtered). -o json prints [].
func noneOf(what, state string, filtered bool) string {
	s := "no " + strings.TrimPrefix(state+" "+what, " ")
	if filtered {
		s += " match"
	}
	return s
}

// jobCounts renders a batch's buckets as "3 unfinished, 1 failed", its
// archived jobs and its objects with no job yet. batch-processing holds
// the jobs in any state short of an end, not only Processing ones: it is
// said "unfinished", as the dashboard's bar counts the finished ones.
func jobCounts(buckets map[string][]string, archived, unmade int) string {
	if buckets == nil {
		return "?"
	}
	var parts []string
	for _, b := range queue.Buckets {
		if n := len(buckets[b]); n > 0 {
			word := strings.TrimPrefix(b, "batch-")
			if b == queue.BucketProcessing {
				word = "unfinished"
			}
			parts = append(parts, fmt.Sprintf("%d %s", n, word))
		}
	}
	if archived > 0 {
		parts = append(parts, fmt.Sprintf("%d archived", archived))
	}
	if unmade > 0 {
		parts = append(parts, fmt.Sprintf("%d not made yet", unmade))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// note writes a line of news on stderr. It may name what the queue holds
// (a collection, a jid): shown as stdout shows it. It goes the log's way,
// so that under submit --wait's progress line it goes above it.
func (a *app) note(format string, args ...any) {
	fmt.Fprintln(a.logs, "note: "+visible.Text(fmt.Sprintf(format, args...)))
}

// waitsForBusyServer tells whether b is Pending while its payload server
// answers busy: its message says so.
func waitsForBusyServer(b *queue.Batch) bool {
	return b.State() == queue.Pending && strings.HasPrefix(b.Status.Message, stalled.BusyServerPrefix)
}

// noteHolds says on stderr why Pending batches are not taken: their
// payload server is busy (a Pending batch with no job, its submission's
// time, read as stuck), the ingest queue, or their collection, is held.
func (a *app) noteHolds(ctx context.Context, q *queue.Queue, batches []*queue.Batch) {
	for _, b := range batches {
		if waitsForBusyServer(b) {
			a.note("batch %s is %s", b.ID, b.Status.Message)
		}
	}
	holds, err := q.Holds(ctx)
	if err != nil {
		return
	}
	waiting := map[string]int{} // by profile
	for _, b := range batches {
		if b.State() == queue.Pending {
			waiting[b.Profile()]++
		}
	}
	for _, h := range holds {
		switch {
		case h.Kind == "queue" && h.Name == queue.QueueIngest:
			a.note("the ingest queue is held since %s: Pending batches and jobs wait (ingestq release queue)", when(h.Since))
		case h.Kind == "collection" && waiting[h.Name] > 0:
			goes := map[bool]string{true: "goes", false: "go"}[waiting[h.Name] == 1]
			a.note("collection %s is held since %s: its %s %s to Held when a daemon takes them (ingestq release collection %s)",
				h.Name, when(h.Since), plural(waiting[h.Name], "Pending batch"), goes, h.Name)
		}
	}
}

func (a *app) lsJobsCommand() *cobra.Command {
	var stateFlag, batchFlag, localID, ark string
	var state queue.State
	var st stalledFlags
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "List jobs (all, or by state, batch, local id, ARK, or the stalled ones with why)",
		Args:  args(),
		PreRunE: func(*cobra.Command, []string) (err error) {
			if state, err = parseState(stateFlag, queue.ParseJobState); err != nil {
				return err
			}
			return st.parse()
		},
		RunE: a.action(func(ctx context.Context, q *queue.Queue, _ []string) error {
			bid, err := a.lsBatchID(ctx, q, batchFlag)
			if err != nil {
				return err
			}
			byState := func(s queue.State) ([]*queue.Job, []error, error) {
				l, err := a.ops(q).ListJobs(ctx, ops.JobFilter{State: s, Batch: bid, LocalID: localID, ARK: ark}, ops.Page{})
				if err != nil {
					return nil, nil, err
				}
				return l.Jobs, l.Problems, nil
			}
			jobs, problems, err := st.list(state, byState)
			if err != nil {
				return err
			}
			a.warnAll("skipped unreadable job", problems)
			if st.only {
				return a.lsStalled(ctx, q, jobs, st.after)
			}
			rows := a.jobRows(ctx, q, jobs)
			if a.json() {
				return a.writeJSON(rows)
			}
			defer a.noteHolds(ctx, q, nil)
			if len(rows) == 0 {
				a.println(noneOf("jobs", string(state), bid+localID+ark != ""))
				return nil
			}
			// REQUEUES is retry_count (an operator's requeues, mrt-zk's
			// meaning); ATTEMPTS the reactor's retries of the current step.
			t := a.newTable("JID", "BID", "STATUS", "PRIORITY", "PROFILE", "REQUEUES", "ATTEMPTS", "MESSAGE", "LOCKED", "ARK", "LOCAL ID", "TITLE")
			for _, r := range rows {
				t.row(r.JID, r.BID, string(r.Status), strconv.Itoa(r.Priority), r.Profile,
					strconv.Itoa(r.RetryCount), attemptsCell(r.StepAttempts), messageCell(r, 48), lockedCell(r),
					r.ARK, strings.Join(r.LocalIDs, ";"), truncate(r.Title, 32))
			}
			return t.flush()
		}),
	}
	cmd.Flags().Var(once(&stateFlag), "state", "only jobs in this state (any case, or its folder name)")
	cmd.Flags().StringVar(&batchFlag, "batch", "", "only jobs of this batch (bid… or batch uuid)")
	cmd.Flags().StringVar(&localID, "local-id", "", "only jobs for the object with this local id")
	cmd.Flags().StringVar(&ark, "ark", "", "only jobs for the object with this ARK")
	a.stalledFlagSet(cmd, &st, true)
	return cmd
}

// lsBatchID resolves --batch to a bid ("" for none). A batch whose nodes
// cannot be read still has jobs to list: that is only a warning.
func (a *app) lsBatchID(ctx context.Context, q *queue.Queue, id string) (string, error) {
	if id == "" {
		return "", nil
	}
	b, err := a.ops(q).FindBatch(ctx, id)
	switch {
	case err == nil:
		return b.ID, nil
	case errors.Is(err, queue.ErrCorrupt) && ops.IsBatchID(id):
		a.warn("batch "+id+" is unreadable; listing its jobs anyway", err)
		return id, nil
	}
	return "", err
}

// parseState parses an optional --state value; a bad one is a usage error.
func parseState(s string, parse func(string) (queue.State, error)) (queue.State, error) {
	if s == "" {
		return "", nil
	}
	st, err := parse(s)
	if err != nil {
		return "", usagef("--state: %v", err)
	}
	return st, nil
}

func (a *app) warnAll(msg string, problems []error) {
	for _, p := range problems {
		a.warn(msg, p)
	}
}

// findJob reads a job by its jid or by its object's ARK: the newest job of
// that object (a deposit again makes another), with a note naming all.
func (a *app) findJob(ctx context.Context, q *queue.Queue, id string) (*queue.Job, error) {
	j, others, problems, err := a.ops(q).FindJob(ctx, id)
	a.warnAll("skipped unreadable job", problems)
	if len(others) > 0 {
		a.note("%d jobs have ARK %s (%s); showing the newest", len(others), id, strings.Join(others, " "))
	}
	return j, err
}

// removedOrNever says of a jid or bid show did not find (err) whether
// it was removed (by ingestq's delete or cleanup, or by another writer of
// the queue: Merritt's sweep removes Completed batches and their jobs),
// by whom and when if the recorded events tell, naming where its history
// still is, or never made. Any other error is err.
func (a *app) removedOrNever(ctx context.Context, q *queue.Queue, id string, err error) error {
	what := map[string]string{"jid": "job", "bid": "batch"}[id[:min(3, len(id))]]
	if what == "" || !errors.Is(err, queue.ErrNotFound) {
		return err
	}
	if never := a.ops(q).CheckEverMade(ctx, id, what); never != nil {
		return never
	}
	if by := a.quietOps(q).RemovedBy(ctx, id); by != "" { // else the words below name who may have removed it
		return queue.Missing("%s %s was removed from the queue%s; its history: ingestq events replay --%s %s", what, id, by, what, id)
	}
	return fmt.Errorf("%s %s was removed from the queue (by ingestq delete or cleanup, or by another program such as Merritt's "+
		"delete_completed_batches); its history: ingestq events replay --%s %s",
		what, id, what, id)
}

// defaultShowJobs is how many of a batch's jobs show lists unless told (as
// many as submit --wait's report names): a batch may have 100,000, and
// each one listed is a read.
const defaultShowJobs = 50

func (a *app) showCommand() *cobra.Command {
	var st stalledFlags
	var page ops.Page
	cmd := &cobra.Command{
		Use:   "show JID|BID|UUID|ARK",
		Short: "Show every field of a job (by jid or its object's ARK), or of a batch (by bid or uuid) with its jobs",
		Long: "show prints every field of a job, or of a batch. A batch's jobs follow, each with its state\n" +
			"and message, in creation order: the first --limit (" + strconv.Itoa(defaultShowJobs) + "; 0 for all), then the next\n" +
			"ones with --after, the last jid shown. A big batch's Completed jobs archived into it are counted,\n" +
			"not listed (archived_jobs).",
		Args: args("JID|BID|UUID|ARK"),
		PreRunE: func(cmd *cobra.Command, args []string) error {
			paged := cmd.Flags().Changed("limit") || cmd.Flags().Changed("after")
			switch {
			case paged && (strings.HasPrefix(args[0], "jid") || strings.HasPrefix(args[0], "ark:")):
				return usagef("show: --limit and --after page a batch's jobs; %s is a job", args[0])
			case page.Limit < 0:
				return usagef("show: --limit %d: want 0 (all) or more", page.Limit)
			case page.After != "" && ops.CheckJobID(page.After) != nil:
				return usagef("show: --after %q: want the jid a page ended with", page.After)
			}
			return st.parse()
		},
		RunE: a.action(func(ctx context.Context, q *queue.Queue, args []string) error {
			if strings.HasPrefix(args[0], "jid") || strings.HasPrefix(args[0], "ark:") {
				j, err := a.findJob(ctx, q, args[0])
				if err != nil {
					return a.removedOrNever(ctx, q, args[0], err)
				}
				stall, err := stallOf(ctx, q, j, st.after)
				if err != nil {
					return err
				}
				return a.writeFields(append(jobFields(j, a.ops(q).Situation(ctx)), field{"stalled", stall}))
			}
			b, err := a.ops(q).FindBatch(ctx, args[0])
			if errors.Is(err, queue.ErrBatchGone) {
				return err // it names the uuid and its bid; removedOrNever takes Merritt's uuids (bid-…) for bids
			}
			if errors.Is(err, queue.ErrNotFound) && !ops.IsBatchID(args[0]) {
				return fmt.Errorf("batch uuid %q: not found (show takes a JID, a BID, a batch UUID or an ARK; for an object's local id: ingestq ls jobs --local-id %s)",
					args[0], args[0])
			}
			if err != nil {
				return a.removedOrNever(ctx, q, args[0], err)
			}
			buckets, err := q.BatchJobs(ctx, b.ID)
			if err != nil {
				return err
			}
			var objects map[string]*queue.Identifiers
			if a.json() {
				if objects, err = q.Identifiers(ctx, buckets["batch-completed"]); err != nil {
					return err
				}
			}
			fields := batchFields(b, buckets, a.ops(q).Situation(ctx))
			if a.json() { // in text, the jobs' table names their objects
				fields = append(fields, field{"objects", objectsOf(objects)})
			}
			// A windowed batch (decision 174): how far its job making has
			// come, and how many of its Completed jobs are archived.
			feed, err := q.LoadFeed(ctx, b.ID)
			if err != nil {
				return err
			}
			if feed != nil {
				archived, err := q.Archived(ctx, b.ID)
				if err != nil {
					return err
				}
				fields = append(fields, field{"objects_with_jobs", fmt.Sprintf("%d of %d", feed.MadeObjects(), feed.Objects)},
					field{"archived_jobs", archived})
				if feed.Stopped != "" {
					fields = append(fields, field{"stopped_making_jobs", feed.Stopped})
				}
			}
			return a.showBatchJobs(ctx, q, b, buckets, page, fields)
		}),
	}
	a.stalledFlagSet(cmd, &st, false)
	cmd.Flags().IntVar(&page.Limit, "limit", defaultShowJobs, "a batch: how many of its jobs to list (0: all)")
	cmd.Flags().StringVar(&page.After, "after", "", "a batch: list its jobs after this jid (where the last page ended)")
	return cmd
}

// showBatchJobs prints a batch's fields and a page of its jobs, each read
// from its node (only the page's are read): in JSON as ls jobs' rows, with
// jobs_next the cursor of the next page (null on the last); in text a
// table, and how to see the rest.
func (a *app) showBatchJobs(ctx context.Context, q *queue.Queue, b *queue.Batch, buckets map[string][]string, page ops.Page, fields []field) error {
	list, err := a.ops(q).ListJobs(ctx, ops.JobFilter{Batch: b.ID}, page)
	if err != nil {
		return err
	}
	a.warnAll("skipped unreadable job", list.Problems)
	rows := a.jobRows(ctx, q, list.Jobs)
	if a.json() {
		var next any // null on the last page
		if list.Next != "" {
			next = list.Next
		}
		return a.writeFields(append(fields, field{"jobs", rows}, field{"jobs_next", next}))
	}
	if err := a.writeFields(fields); err != nil {
		return err
	}
	defer a.noteHolds(ctx, q, []*queue.Batch{b})
	if len(rows) == 0 {
		a.println("jobs: none")
		return nil
	}
	a.println("jobs:")
	// The message last and whole: a failed job's is the reason it failed.
	t := a.newTable("JID", "STATUS", "REQUEUES", "ATTEMPTS", "LOCKED", "ARK", "LOCAL ID", "MESSAGE")
	for _, r := range rows {
		t.row(r.JID, string(r.Status), strconv.Itoa(r.RetryCount), attemptsCell(r.StepAttempts), lockedCell(r), r.ARK,
			strings.Join(r.LocalIDs, ";"), oneLine(messageCell(r, 0)))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if list.Next != "" {
		more := 0
		for _, jids := range buckets {
			for _, jid := range jids {
				if jid > list.Next {
					more++
				}
			}
		}
		limit := ""
		if page.Limit != defaultShowJobs {
			limit = " --limit " + strconv.Itoa(page.Limit)
		}
		a.println("… %d more: ingestq show %s%s --after %s (or ingestq ls jobs --batch %s --state S)", more, b.ID, limit, list.Next, b.ID)
	}
	return nil
}

// jobRows are the listing rows of jobs as the CLI gives them: a Held one's
// hold in the CLI's words (in a table the release alone, in JSON the
// whole sentence), and in JSON each time in RFC 3339.
func (a *app) jobRows(ctx context.Context, q *queue.Queue, jobs []*queue.Job) []ops.JobRow {
	x := a.ops(q).Situation(ctx) // read once: Rows would read it again
	rows := make([]ops.JobRow, len(jobs))
	for i, j := range jobs {
		rows[i] = x.Row(j, ops.CLI)
		if !a.json() && j.State() == queue.Held {
			rows[i].Hold = "held: " + x.Releases("job", j.ID, j.Profile(), ops.CLI)
		}
		if a.json() {
			rows[i].LastModified = queue.JSONTime(rows[i].LastModified)
		}
	}
	return rows
}

// messageCell is a listing's MESSAGE: a Held job's hold (whole: it is the
// command that releases it), then its message, cut to n runes (0: whole).
func messageCell(r ops.JobRow, n int) string {
	msg := r.Message
	if n > 0 {
		msg = truncate(msg, n)
	}
	return strings.TrimSuffix(strings.TrimPrefix(r.Hold+"; "+msg, "; "), "; ")
}

// attemptsCell is a listing's ATTEMPTS: "2/3" while a step is retried.
func attemptsCell(a *ops.StepAttempts) string {
	if a == nil {
		return ""
	}
	return fmt.Sprintf("%d/%d", a.Failed, a.Limit)
}

// lockedCell is a listing's LOCKED: the host holding the lock, if any.
func lockedCell(r ops.JobRow) string {
	if !r.Locked {
		return "no"
	}
	if r.LockedBy != "" {
		return "yes (" + r.LockedBy + ")"
	}
	return "yes"
}

// nullable is s, or null when empty.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func jobFields(j *queue.Job, x ops.Situation) []field {
	var lss any // null when the job never completed a step
	if p := j.Status.LastSuccessfulStatus; p != nil {
		lss = string(*p)
	}
	var attempts any // null unless its step is being retried
	if a := ops.AttemptsOf(j); a != nil {
		attempts = a
	}
	return []field{
		{"jid", j.ID},
		{"batch", j.BatchID},
		{"status", string(j.State())},
		{"last_modified", nodeTime(j.Status.LastModified)},
		{"last_successful_status", lss},
		{"retry_count", j.Status.RetryCount}, // requeues by an operator (mrt-zk's meaning)
		{"step_attempts", attempts},          // the reactor's retries of the current step
		{"message", j.Status.Message},
		{"hold", nullable(x.HoldOf("job", j.ID, j.State(), j.Profile(), j.Status.LastModified, ops.CLI))},
		{"priority", j.Priority},
		{"space_needed", j.SpaceNeeded},
		{"configuration", workArea(j, j.Config.Map(), "working_dir")},
		{"identifiers", j.Identifiers},
		{"metadata", j.Metadata},
		{"store", workArea(j, j.Store, "manifest_url")},
		{"inventory", workArea(j, j.Inventory, "manifest_url")},
		{"locked", j.Locked},
		{"locked_by", nullable(x.LockedBy(j))},
	}
}

func batchFields(b *queue.Batch, buckets map[string][]string, x ops.Situation) []field {
	var report any // null until it has reported
	if r := b.Report; r != nil {
		report = map[string]any{"last_modified": nodeTime(r.LastModified), "successful_jobs": r.SuccessfulJobs, "failed_jobs": r.FailedJobs}
	}
	fields := []field{
		{"bid", b.ID},
		{"uuid", b.UUID()},
		{"status", string(b.State())},
		{"last_modified", nodeTime(b.Status.LastModified)},
		{"message", b.Status.Message},
		{"hold", nullable(x.HoldOf("batch", b.ID, b.State(), b.Profile(), b.Status.LastModified, ops.CLI))},
		{"profile", b.Profile()},
		{"acquired", b.Acquired},
		{"locked", b.Locked},
		{"submission", b.Submission.Map()},
		{"report", report},
	}
	for _, bucket := range queue.Buckets {
		jids := buckets[bucket]
		if jids == nil {
			jids = []string{}
		}
		fields = append(fields, field{bucket, jidList(jids)})
	}
	return fields
}

// objectsOf names each completed job's object: its ARK and local ids.
func objectsOf(ids map[string]*queue.Identifiers) map[string]string {
	out := make(map[string]string, len(ids))
	for jid, id := range ids {
		out[jid] = describeObject(id)
	}
	return out
}

func describeObject(id *queue.Identifiers) string {
	if id == nil {
		return "(no identifier)"
	}
	s := cmp.Or(id.PrimaryID, "(no ARK)")
	if len(id.LocalIDs) > 0 {
		s += "  local id " + strings.Join(id.LocalIDs, ";")
	}
	return s
}

// jidList is a list of job ids: a JSON array, or space-separated in text.
type jidList []string

func (l jidList) String() string { return strings.Join(l, " ") }

func (a *app) checkCommand() *cobra.Command {
	var opts queue.CheckOptions
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Verify the queue's invariant; exit 1 when it is broken",
		Long: "check verifies that every job is listed in exactly one /jobs/states folder and one bucket\n" +
			"of its batch, both matching its status, that every ref names a job, that every node can be\n" +
			"read, and that each batch agrees with its jobs: one job per object, no unfinished job in a\n" +
			"Completed batch, a status-report that matches the buckets, as many jobs as its job-count.\n" +
			"It prints each violation and exits 1 if there is any. Warnings (a finished batch nobody\n" +
			"reports, requeued jobs of a Failed batch, a lock older than --lock-age) are printed too,\n" +
			"and leave the exit status 0.",
		Args: args(),
		RunE: a.action(func(ctx context.Context, q *queue.Queue, _ []string) error {
			violations, warnings, err := q.CheckAll(ctx, opts)
			if err != nil {
				return err
			}
			if a.json() {
				type finding struct {
					Path    string `json:"path"`
					Problem string `json:"problem"`
					Since   string `json:"since,omitempty"` // an old lock's, RFC 3339 in UTC
				}
				list := func(vs []queue.Violation) []finding {
					out := make([]finding, len(vs))
					for i, v := range vs {
						out[i] = finding{Path: v.Path, Problem: v.Problem}
						if !v.Since.IsZero() {
							out[i].Since = v.Since.UTC().Format(time.RFC3339)
						}
					}
					return out
				}
				if err := a.writeJSON(map[string]any{"violations": list(violations), "warnings": list(warnings)}); err != nil {
					return err
				}
			} else {
				for _, v := range violations {
					a.println("%s", findingText(v))
				}
				for _, w := range warnings {
					a.println("warning: %s", findingText(w))
				}
			}
			if len(violations) > 0 {
				if !a.json() {
					a.println("%s", plural(len(violations), "violation"))
				}
				return &exitError{code: 1, silent: true, err: errors.New(plural(len(violations), "violation"))}
			}
			if !a.json() {
				jids, err := q.JobIDs(ctx)
				if err != nil {
					return err
				}
				bids, err := q.BatchIDs(ctx)
				if err != nil {
					return err
				}
				a.println("ok: %s, %s checked%s", plural(len(jids), "job"), plural(len(bids), "batch"),
					map[bool]string{true: ", " + plural(len(warnings), "warning"), false: ""}[len(warnings) > 0])
			}
			return nil
		}),
	}
	durationVar(cmd.Flags(), &opts.LockAge, "lock-age", time.Hour, "warn about job, batch, object (storage, inventory, local id) and access request locks older than this")
	return cmd
}

// findingText is a check's finding in text, an old lock's time as text
// output shows times.
func findingText(v queue.Violation) string {
	if v.Since.IsZero() {
		return v.String()
	}
	return v.String() + ", since " + when(v.Since)
}

// plural is "1 job", "2 jobs", "3 batches".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "ch") {
		return fmt.Sprintf("%d %ses", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
