package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers/mint"
	"github.com/ingestq/ingestq/handlers/profile"
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
			Use:   verb + " job JID | batch BID | collection NAME | queue [NAME]",
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
			change, to := q.ReleaseJob, queue.Pending
			if hold {
				change, to = q.HoldJob, queue.Held
			}
			changed, err := change(ctx, args[0])
			if err != nil {
				return err
			}
			if !changed {
				a.println("job %s was already %s", args[0], to)
				return nil
			}
			a.announce(ctx, q, holdAction(hold), events.Event{JobID: args[0]})
			a.println("job %s is %s", args[0], to)
			return nil
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
			bid, err := batchID(ctx, q, args[0])
			if err != nil {
				return err
			}
			change, to := q.ReleaseBatch, queue.Pending
			if hold {
				change, to = q.HoldBatch, queue.Held
			}
			changed, err := change(ctx, bid)
			if err != nil {
				return err
			}
			if !changed {
				a.println("batch %s was already %s", bid, to)
				return nil
			}
			a.announce(ctx, q, holdAction(hold), events.Event{BatchID: bid})
			a.println("batch %s is %s", bid, to)
			return nil
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
			change := q.ReleaseCollection
			if hold {
				change = q.HoldCollection
				if err := checkCollection(ctx, q, args[0], force); err != nil {
					return err
				}
			}
			changed, err := change(ctx, args[0])
			if err != nil {
				return err
			}
			msg := holdResult("collection "+args[0], hold, changed)
			if !hold && changed {
				msg += " (batches and jobs already Held stay Held: release them one by one)"
			}
			a.announce(ctx, q, holdAction(hold), events.Event{Message: msg, Attrs: map[string]any{"collection": args[0]}})
			a.println("%s", msg)
			return nil
		}),
	}
	if hold {
		cmd.Flags().BoolVar(&force, "force", false, "hold it even though no daemon has published a profile of that name")
	}
	return cmd
}

// checkCollection refuses to hold a collection no daemon has published a
// profile for (a typo would hold nothing, silently), unless force.
func checkCollection(ctx context.Context, q *queue.Queue, name string, force bool) error {
	known, err := profile.Published(ctx, q)
	if err != nil || force || slices.Contains(known, name) {
		return err
	}
	have := "none is published yet"
	if len(known) > 0 {
		have = "published: " + strings.Join(known, ", ")
	}
	return &exitError{code: 1, err: fmt.Errorf("%w: no profile %q is published on this queue (%s); "+
		"--force holds it anyway (for a profile not published yet)", queue.ErrRefused, name, have)}
}

func (a *app) holdsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "holds",
		Short: "List the queue and collection holds in force",
		Args:  args(),
		RunE: a.action(func(ctx context.Context, q *queue.Queue, _ []string) error {
			holds, err := q.Holds(ctx)
			if err != nil {
				return err
			}
			if a.json() {
				return a.writeJSON(append([]queue.Hold{}, holds...))
			}
			if len(holds) == 0 {
				a.println("no holds")
				return nil
			}
			t := a.newTable("KIND", "NAME", "SINCE")
			for _, h := range holds {
				t.row(h.Kind, h.Name, h.Since.Local().Format(time.DateTime))
			}
			return t.flush()
		}),
	}
}

var queueNames = []string{queue.QueueIngest, queue.QueueAccessSmall, queue.QueueAccessLarge}

func (a *app) holdQueue(hold bool) *cobra.Command {
	return &cobra.Command{
		Use:   "queue [NAME]",
		Short: "Stop or restart acquisitions on a queue: " + strings.Join(queueNames, ", ") + " (default ingest)",
		Args:  args("[NAME]"),
		PreRunE: func(_ *cobra.Command, args []string) error {
			if len(args) == 1 && !slices.Contains(queueNames, args[0]) {
				return usagef("queue %q: want one of %s", args[0], strings.Join(queueNames, ", "))
			}
			return nil
		},
		RunE: a.action(func(ctx context.Context, q *queue.Queue, args []string) error {
			name := queue.QueueIngest
			if len(args) == 1 {
				name = args[0]
			}
			change := q.ReleaseQueue
			if hold {
				change = q.HoldQueue
			}
			changed, err := change(ctx, name)
			if err != nil {
				return err
			}
			a.announce(ctx, q, holdAction(hold), events.Event{Message: holdResult("queue "+name, hold, changed), Attrs: map[string]any{"queue": name}})
			a.println("%s", holdResult("queue "+name, hold, changed))
			return nil
		}),
	}
}

// holdResult says what a hold or release of a flag did; doing it twice is
// not an error.
func holdResult(what string, hold, changed bool) string {
	switch {
	case hold && changed:
		return what + " held"
	case hold:
		return what + " was already held"
	case changed:
		return what + " released"
	}
	return what + " was not held"
}

func (a *app) requeueCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "requeue JID",
		Short: "Send a Failed job back to the step after its last successful one",
		Args:  args("JID"),
		RunE: a.action(func(ctx context.Context, q *queue.Queue, args []string) error {
			to, err := q.RequeueJob(ctx, args[0])
			if err != nil {
				return err
			}
			msg := fmt.Sprintf("job %s requeued: it resumes at %s", args[0], to)
			if j, err := q.LoadJob(ctx, args[0]); err == nil && j.State() == to {
				msg += fmt.Sprintf(" (retry %d)", j.Status.RetryCount)
				if refetches(j) {
					msg += "; its object manifest is fetched again, so a fixed manifest is read " +
						"(files already verified are kept)"
				}
			}
			a.announce(ctx, q, "requeue", events.Event{JobID: args[0], Message: msg})
			a.println("%s", msg)
			return nil
		}),
	}
}

// refetches tells whether a requeued job fetches its object manifest
// again: it resumes at a step up to Downloading (the handlers' rule).
func refetches(j *queue.Job) bool {
	typ := j.Config.PayloadType
	switch j.State() {
	case queue.Pending, queue.Estimating, queue.Provisioning, queue.Downloading:
		return typ == "object_manifest"
	}
	return false
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
			if err := q.FailJob(ctx, args[0], message, force); err != nil {
				return err
			}
			if j, err := q.LoadJob(ctx, args[0]); err == nil && j.State() == queue.Failed {
				message = j.Status.Message
			}
			a.announce(ctx, q, "fail", events.Event{JobID: args[0], Message: message})
			a.println("job %s is Failed: %s", args[0], message)
			return nil
		}),
	}
	cmd.Flags().StringVarP(&message, "message", "m", "", "why (default \"failed by an operator\")")
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
			"delete BID: a Completed, Failed, Deleted or Held batch is removed with its jobs.",
		Example: "  ingestq fail --force jid0000000042 && ingestq delete jid0000000042\n" +
			"  ingestq delete --purge jid0000000042",
		Args: args("JID|BID|UUID"),
		RunE: a.action(func(ctx context.Context, q *queue.Queue, args []string) error {
			id := args[0]
			if strings.HasPrefix(id, "jid") {
				removed, changed, err := q.DeleteJob(ctx, id, purge)
				switch {
				case err != nil:
					return err
				case !changed:
					a.println("job %s was already Deleted (`ingestq delete --purge %s` removes it from ZooKeeper)", id, id)
					return nil
				}
				a.announce(ctx, q, "delete", events.Event{JobID: id, Attrs: map[string]any{"removed": removed}})
				if removed {
					a.println("job %s removed", id)
				} else {
					a.println("job %s moved to Deleted", id)
				}
				return nil
			}
			if purge {
				return usagef("--purge is for a job; a batch is always removed with its jobs")
			}
			bid, err := batchID(ctx, q, id)
			if err != nil {
				return err
			}
			if err := q.DeleteBatch(ctx, bid); err != nil {
				return err
			}
			a.announce(ctx, q, "delete", events.Event{BatchID: bid})
			a.println("batch %s removed with its jobs", bid)
			return nil
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
			bid, err := batchID(ctx, q, args[0])
			if err != nil {
				return err
			}
			changed, err := q.ReportBatch(ctx, bid)
			if err != nil {
				return err
			}
			if !changed {
				a.println("batch %s was already asked to report again (%s)", bid, queue.UpdateReporting)
				return nil
			}
			a.announce(ctx, q, "report", events.Event{BatchID: bid})
			a.println("batch %s is %s: a daemon will report it again", bid, queue.UpdateReporting)
			return nil
		}),
	}
}

func (a *app) cleanupCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "cleanup",
		Short: "Remove Completed batches with their jobs, and leftovers of cut-short creations",
		Args:  args(),
		RunE: a.action(func(ctx context.Context, q *queue.Queue, _ []string) error {
			removed, problems, err := q.Cleanup(ctx)
			if err != nil {
				return err
			}
			a.warnAll("not cleaned up", problems)
			// The minter's records of jobs deleted before they completed.
			forgot, err := mint.New(q).Sweep(ctx, func(jid string) (bool, error) {
				_, err := q.LoadJob(ctx, jid)
				if errors.Is(err, queue.ErrNotFound) {
					return true, nil
				}
				return false, err
			})
			if err != nil {
				a.warn("minting records not swept", err)
			}
			a.announce(ctx, q, "cleanup", events.Event{Message: plural(len(removed), "batch") + " removed", Attrs: map[string]any{"removed": removed}})
			if a.json() {
				notCleaned := make([]string, len(problems))
				for i, p := range problems {
					notCleaned[i] = p.Error()
				}
				return a.writeJSON(struct {
					Removed        []string `json:"removed_batches"`
					MintingRecords int      `json:"minting_records_removed"`
					NotCleaned     []string `json:"not_cleaned_up"`
				}{append([]string{}, removed...), len(forgot), notCleaned})
			}
			if len(forgot) > 0 {
				a.println("%s of deleted jobs removed", plural(len(forgot), "minting record"))
			}
			for _, bid := range removed {
				a.println("removed %s", bid)
			}
			a.println("%s removed", plural(len(removed), "batch"))
			return nil
		}),
	}
}

// batchID resolves a bid, or a batch uuid, to a bid.
func batchID(ctx context.Context, q *queue.Queue, id string) (string, error) {
	if strings.HasPrefix(id, "bid") {
		return id, nil
	}
	b, err := q.FindBatch(ctx, id)
	if err != nil {
		return "", err
	}
	return b.ID, nil
}
