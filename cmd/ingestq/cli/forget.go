package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/ingestq/ingestq/reactor/queue"
)

// forgetCommand notes a host gone for good (decision 258).
func (a *app) forgetCommand() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "forget [--force] HOST",
		Short: "Take a host out of the cluster for good: its NATS server stops counting in the event stream's cluster",
		Long: "forget notes that the daemon called HOST is gone for good (decommissioned, or replaced by a host of\n" +
			"another name). With --nats-cluster, the daemons' NATS cluster remembers every server that ever\n" +
			"joined and counts it in its quorum; the event stream keeps copies on it. Forgetting a host has the\n" +
			"daemons drop its server, and the stream's copies on it move to the hosts left. Forget each host as\n" +
			"it goes: a cluster of three that loses two hosts before either is forgotten cannot move its copies.\n" +
			"A running host is refused, and so is a name no daemon of this queue ever ran as (a typo: a forgotten\n" +
			"name stays listed, with no undo); --force forgets such a name all the same (a host that last ran\n" +
			"before ingestq recorded host names). A forgotten host that starts again drops its old NATS cluster\n" +
			"store and joins afresh.",
		Args: args("HOST"),
		RunE: a.action(func(ctx context.Context, q *queue.Queue, args []string) error {
			return a.printOutcome(a.ops(q).ForgetHost(ctx, args[0], force))
		}),
	}
	cmd.Flags().BoolVar(&force, "force", false, "forget a name no daemon of this queue is recorded to have run as")
	return cmd
}
