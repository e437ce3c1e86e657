package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
)

// printHold prints what a hold or release did (its outcome, which says
// what the hold stops and how to undo it), or returns its error.
func (a *app) printHold(o ops.Outcome, err error) error {
	if err != nil {
		return err
	}
	a.println("%s", o.Message)
	return nil
}

func (a *app) holdsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "holds",
		Short: "List everything held: queues, collections, batches and jobs, each with how to release it",
		Long: "holds lists what is held: the queues (ingest, and the access queues) and the collections held, then\n" +
			"the Held batches and jobs, each with since when, what its hold stops, and the command that\n" +
			"releases it. A job or batch whose collection is held is released after its collection.",
		Args: args(),
		RunE: a.action(func(ctx context.Context, q *queue.Queue, _ []string) error {
			items, _, problems, err := a.ops(q).HeldItems(ctx, ops.CLI, ops.Page{})
			if err != nil {
				return err
			}
			a.warnAll("skipped unreadable batch or job", problems)
			if a.json() {
				return a.writeJSON(items)
			}
			if len(items) == 0 {
				a.println("nothing is held")
				return nil
			}
			t := a.newTable("KIND", "NAME", "SINCE", "EFFECT", "RELEASE WITH")
			for _, h := range items {
				var since time.Time
				if h.Since != nil {
					since = *h.Since
				}
				t.row(h.Kind, h.Name, when(since), h.Effect, h.Release)
			}
			return t.flush()
		}),
	}
}
