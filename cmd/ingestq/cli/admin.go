package cli

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers/access"
	"github.com/ingestq/ingestq/handlers/mint"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Admin commands change the queue through its admin actions, which lock the
// item for the length of one change: an item a daemon is working on is
// refused (exit 1), and nothing is written.

// holdCommands are `hold` and `release`, each for a job, a batch, a
// collection or a queue.
func (a *app) holdCommands() []*cobra.Command {
	var out []*cobra.Command
	for _, hold := range []bool{true, false} {
		verb, short := "release", "Release a held job, batch, collection or queue"
		if hold {
			verb, short = "hold", "Hold a pending job or batch, a collection, or a queue"
		}
		cmd := &cobra.Command{
			Use:   verb + " job JID | batch BID|UUID | collection NAME | queue [NAME]",
			Short: short,
			Args:  cobra.ArbitraryArgs,
			RunE:  group,
		}
		cmd.AddCommand(a.holdJob(hold), a.holdBatch(hold), a.holdCollection(hold), a.holdQueue(hold))
		out = append(out, cmd)
	}
	return out
}

func (a *app) holdJob(hold bool) *cobra.Command {
	short := "Release a Held job: back to Pending, where a daemon takes it"
	if hold {
		short = "Hold a Pending job: no daemon takes it until it is released"
	}
	return &cobra.Command{
		Use:   "job JID",
		Short: short,
		Args:  args("JID"),
		RunE: a.action(func(ctx context.Context, q *queue.Queue, args []string) error {
			change := a.ops(q).ReleaseJob
			if hold {
				change = a.ops(q).HoldJob
			}
			return a.printHold(change(ctx, args[0]))
		}),
	}
}

func (a *app) holdBatch(hold bool) *cobra.Command {
	short := "Release a Held batch: back to Pending, where a daemon makes its jobs"
	if hold {
		short = "Hold a Pending batch: no daemon makes its jobs until it is released"
	}
	return &cobra.Command{
		Use:   "batch BID|UUID",
		Short: short,
		Args:  args("BID|UUID"),
		RunE: a.action(func(ctx context.Context, q *queue.Queue, args []string) error {
			change := a.ops(q).ReleaseBatch
			if hold {
				change = a.ops(q).HoldBatch
			}
			return a.printHold(change(ctx, args[0]))
		}),
	}
}

func (a *app) holdCollection(hold bool) *cobra.Command {
	short := "Lift a collection hold (what is already Held stays Held)"
	if hold {
		short = "Hold a collection (by profile name)"
	}
	var force bool
	cmd := &cobra.Command{
		Use:   "collection NAME",
		Short: short,
		Args:  args("NAME"),
		RunE: a.action(func(ctx context.Context, q *queue.Queue, args []string) error {
			if hold {
				return a.printHold(a.ops(q).HoldCollection(ctx, args[0], force))
			}
			return a.printHold(a.ops(q).ReleaseCollection(ctx, args[0]))
		}),
	}
	if hold {
		cmd.Flags().BoolVar(&force, "force", false, "hold it even though no daemon has published a profile of that name")
	}
	return cmd
}

func (a *app) holdQueue(hold bool) *cobra.Command {
	return &cobra.Command{
		Use:   "queue [NAME]",
		Short: "Stop or restart acquisitions on a queue: " + strings.Join(ops.QueueNames, ", ") + " (default ingest; access-small and access-large name the access queues too)",
		Args:  args("[NAME]"),
		PreRunE: func(_ *cobra.Command, args []string) error {
			if len(args) == 1 && ops.QueueName(args[0]) == "" {
				return usagef("queue %q: want one of %s (or access-small, access-large)", args[0], strings.Join(ops.QueueNames, ", "))
			}
			return nil
		},
		RunE: a.action(func(ctx context.Context, q *queue.Queue, args []string) error {
			name := queue.QueueIngest
			if len(args) == 1 {
				name = args[0]
			}
			change := a.ops(q).ReleaseQueue
			if hold {
				change = a.ops(q).HoldQueue
			}
			return a.printHold(change(ctx, name))
		}),
	}
}

func (a *app) requeueCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "requeue JID",
		Short: "Send a Failed job back to the step after its last successful one",
		Args:  args("JID"),
		RunE: a.action(func(ctx context.Context, q *queue.Queue, args []string) error {
			return a.printOutcome(a.ops(q).RequeueJob(ctx, args[0]))
		}),
	}
}

func (a *app) failCommand() *cobra.Command {
	var message string
	var force bool
	cmd := &cobra.Command{
		Use:   "fail JID",
		Short: "Move a job to Failed",
		Long: "fail moves a job to Failed. A job a daemon is working on is refused, unless --force:\n" +
			"then the daemon's view goes stale and it abandons its step.",
		Args: args("JID"),
		RunE: a.action(func(ctx context.Context, q *queue.Queue, args []string) error {
			return a.printOutcome(a.ops(q).FailJob(ctx, args[0], message, force))
		}),
	}
	cmd.Flags().StringVarP(&message, "message", "m", "", "why (default \"failed by $USER\")")
	cmd.Flags().BoolVar(&force, "force", false, "fail it even while a daemon holds its lock")
	return cmd
}

func (a *app) deleteCommand() *cobra.Command {
	var purge bool
	cmd := &cobra.Command{
		Use:   "delete [--purge] JID|BID|UUID",
		Short: "Retire a job (Deleted), remove it (--purge), or remove a batch with all its jobs",
		Long: "delete JID: a Held or Failed job moves to Deleted (it stays in its batch's report).\n" +
			"delete --purge JID: a Held, Failed, Completed or Deleted job is removed from ZooKeeper for good.\n" +
			"A job still in the pipeline is refused.\n" +
			"delete BID|UUID: a Completed, Failed, Deleted or Held batch is removed with its jobs.",
		Example: "  ingestq fail --force jid0000000042 && ingestq delete jid0000000042\n" +
			"  ingestq delete --purge jid0000000042",
		Args: args("JID|BID|UUID"),
		RunE: a.action(func(ctx context.Context, q *queue.Queue, args []string) error {
			id := args[0]
			if strings.HasPrefix(id, "jid") {
				return a.printOutcome(a.ops(q).DeleteJob(ctx, id, purge))
			}
			if purge {
				return usagef("--purge is for a job; a batch is always removed with its jobs")
			}
			return a.printOutcome(a.ops(q).DeleteBatch(ctx, id))
		}),
	}
	cmd.Flags().BoolVar(&purge, "purge", false, "remove the job from ZooKeeper for good (it leaves its batch's report)")
	return cmd
}

func (a *app) reportCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "report BID|UUID",
		Short: "Have a Failed batch reported again (Failed → UpdateReporting)",
		Args:  args("BID|UUID"),
		RunE: a.action(func(ctx context.Context, q *queue.Queue, args []string) error {
			return a.printOutcome(a.ops(q).ReportBatch(ctx, args[0]))
		}),
	}
}

func (a *app) cancelCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel BID|UUID",
		Short: "Stop a batch: its jobs not yet Storing end Failed, the others finish, then it reports",
		Long: "cancel stops a batch for you ($USER): each of its jobs that has not reached Storing ends Failed\n" +
			"with \"cancelled by $USER\" (a daemon working on one abandons its step), the jobs past that\n" +
			"finish, and the batch then reports as usual. A batch whose jobs are not made yet (Pending,\n" +
			"Held) ends Deleted. -o json lists the jobs cancelled and those left to finish.",
		Args: args("BID|UUID"),
		RunE: a.action(func(ctx context.Context, q *queue.Queue, args []string) error {
			out, err := a.ops(q).CancelBatch(ctx, args[0], a.user())
			if err != nil {
				return err
			}
			if a.json() {
				return a.writeJSON(out)
			}
			a.println("%s", out.Message)
			return nil
		}),
	}
}

// defaultCleanupAge is how long a Completed batch stays before cleanup
// removes it, unless --older-than says otherwise (decision 244).
const defaultCleanupAge = time.Hour

func (a *app) cleanupCommand() *cobra.Command {
	var dryRun bool
	var olderThan time.Duration
	cmd := &cobra.Command{
		Use:   "cleanup [--older-than 1h] [--dry-run]",
		Short: "Remove Completed batches with their jobs, and leftovers of cut-short creations",
		Long: "cleanup removes the batches that completed more than --older-than ago (default 1h; 0 for\n" +
			"every Completed batch), with their jobs; a batch that completed since, or whose time it\n" +
			"cannot read, is kept and counted. It also removes the empty batch and job nodes that\n" +
			"creations cut short by a crash left (older than 10 minutes), the batch uuids that name\n" +
			"a batch that is gone (10 minutes old: the batchID can be used again), the minting records of\n" +
			"deleted jobs, and the refs Merritt's tools left of a job beside the one its status names,\n" +
			"or of a job that is gone (unchanged for 10 minutes; each removal is fenced on the job's\n" +
			"status, so a job that moves meanwhile keeps its ref until the next cleanup). --dry-run\n" +
			"lists what it would remove, and removes nothing.",
		Args: args(),
		PreRunE: func(*cobra.Command, []string) error {
			if olderThan < 0 {
				return usagef("cleanup: --older-than %s: want a duration of 0 or more, like 1h or 7d", shortDuration(olderThan))
			}
			return nil
		},
		RunE: a.action(func(ctx context.Context, q *queue.Queue, _ []string) error {
			opts := queue.CleanupOptions{DryRun: dryRun}
			if olderThan > 0 {
				opts.CompletedBefore = time.Now().Add(-olderThan)
			}
			r, err := q.CleanupWith(ctx, opts)
			if err != nil {
				return err
			}
			a.warnAll("not cleaned up", r.Problems)
			// The minter's records of jobs deleted before they completed.
			gone := func(jid string) (bool, error) {
				_, err := q.LoadJob(ctx, jid)
				if errors.Is(err, queue.ErrNotFound) {
					return true, nil
				}
				return false, err
			}
			var forgot []string
			if dryRun {
				forgot, err = sweepable(ctx, q, gone)
			} else {
				forgot, err = mint.New(q).Sweep(ctx, gone)
			}
			if err != nil {
				a.warn("minting records not swept", err)
			}
			if !dryRun {
				a.ops(q).Announce(ctx, "cleanup", events.Event{Message: plural(len(r.Removed), "batch") + " removed", Attrs: map[string]any{"removed": r.Removed, "left_refs_removed": len(r.LeftRefs)}})
			}
			if a.json() {
				notCleaned := make([]string, len(r.Problems))
				for i, p := range r.Problems {
					notCleaned[i] = p.Error()
				}
				return a.writeJSON(struct {
					DryRun         bool             `json:"dry_run"`
					Removed        []string         `json:"removed_batches"`
					Kept           []string         `json:"kept_batches"`
					OlderThan      string           `json:"older_than"`
					Leftovers      []string         `json:"leftover_nodes_removed"`
					MintingRecords int              `json:"minting_records_removed"`
					UUIDs          []queue.GoneUUID `json:"batch_uuids_removed"`
					LeftRefs       []queue.LeftRef  `json:"left_refs_removed"`
					LeftKept       int              `json:"left_refs_kept"`
					NotCleaned     []string         `json:"not_cleaned_up"`
				}{dryRun, append([]string{}, r.Removed...), append([]string{}, r.Kept...), shortDuration(olderThan),
					append([]string{}, r.Husks...), len(forgot), append([]queue.GoneUUID{}, r.UUIDs...), append([]queue.LeftRef{}, r.LeftRefs...), r.LeftYoung, notCleaned})
			}
			remove, removed := "removed", "removed"
			if dryRun {
				remove, removed = "would remove", "would be removed (dry run: nothing was removed)"
			}
			if len(forgot) > 0 {
				a.println("%s of deleted jobs %s", plural(len(forgot), "minting record"), removed)
			}
			for _, n := range r.Husks {
				a.println("%s empty node %s (a creation cut short)", remove, n)
			}
			for _, u := range r.UUIDs {
				a.println("%s batch uuid %s: it names %s, which is gone (batchID %s can be used again)", remove, u.Path, u.BID, u.UUID)
			}
			for _, l := range r.LeftRefs {
				a.println("%s left ref %s (%s)", remove, l.Path, l.Why)
			}
			if r.LeftYoung > 0 {
				a.println("%s kept: changed less than 10m ago, or its job is locked (a move may be under way)", plural(r.LeftYoung, "left ref"))
			}
			for _, bid := range r.Removed {
				a.println("%s %s", remove, bid)
			}
			if len(r.Kept) > 0 {
				a.println("%s kept: completed less than %s ago (--older-than 0 removes them too)", plural(len(r.Kept), "Completed batch"), shortDuration(olderThan))
			}
			a.println("%s %s", plural(len(r.Removed), "batch"), removed)
			return nil
		}),
	}
	fl := cmd.Flags()
	fl.BoolVar(&dryRun, "dry-run", false, "list what would be removed, and remove nothing")
	durationVar(fl, &olderThan, "older-than", defaultCleanupAge, "remove only the batches that completed longer ago than this (1h, 7d, 2w); 0 for every Completed batch")
	return cmd
}

// durationVar defines every duration flag: it takes days and weeks too
// (7d, 2w), as events' --since does, and its default reads as the README
// writes it (1h, not pflag's 1h0m0s).
func durationVar(fl *pflag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fl.Var((*longDuration)(p), name, usage)
}

type longDuration time.Duration

func (d longDuration) String() string {
	if d == 0 {
		return "0" // which pflag takes for no default, as it does 0s of its own
	}
	return shortDuration(time.Duration(d))
}

func (d *longDuration) Type() string { return "duration" }
func (d *longDuration) Set(s string) error {
	v, err := events.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = longDuration(v)
	return nil
}

// shortDuration is d without its zero minutes and seconds: 1h, not 1h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// sweepable lists the minting records a sweep would remove (those of
// jobs gone), removing nothing: Sweep's dry run.
func sweepable(ctx context.Context, q *queue.Queue, gone func(jid string) (bool, error)) ([]string, error) {
	jids, err := q.MintedJobs(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	var errs []error
	for _, jid := range jids {
		g, err := gone(jid)
		if err != nil {
			errs = append(errs, err)
		}
		if g {
			out = append(out, jid)
		}
	}
	return out, errors.Join(errs...)
}

// ops is the service layer on q, announcing actions on the daemon's NATS,
// the user running the command as their actor.
func (a *app) ops(q *queue.Queue) *ops.Service {
	publish := func(ev events.Event) { a.publishBestEffort(q, ev) }
	return &ops.Service{Q: q, Publish: publish, Recorded: a.recorded, Actor: a.user(), RemovePackage: access.RemovePackage}
}

// quietOps is a.ops(q) saying nothing when the recorded events cannot be
// read: for words that stand without them.
func (a *app) quietOps(q *queue.Queue) *ops.Service {
	s := a.ops(q)
	s.Recorded = a.replayAdmin
	return s
}

// printOutcome prints what a change did, or returns its error.
func (a *app) printOutcome(o ops.Outcome, err error) error {
	if err != nil {
		return err
	}
	a.println("%s", o.Message)
	return nil
}
