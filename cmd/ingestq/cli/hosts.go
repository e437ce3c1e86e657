package cli

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// hostsCommand lists the daemons working the queue, from their ephemeral
// host nodes: a daemon that died is gone once its session has.
func (a *app) hostsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "hosts",
		Short: "List the daemons working this queue: version, jobs in hand, workers, since when, addresses",
		Long: "hosts lists the live daemons from their host nodes: version, the states each works, the jobs its\n" +
			"workers hold (JOBS), its workers and since when. A daemon rewrites its node within a second of a\n" +
			"change of its JOBS (and every 15 s anyway): SEEN says when it last did, so a daemon killed or cut off\n" +
			"shows late until its ZooKeeper session ends and it leaves the list. HTTP is where other hosts reach its\n" +
			"HTTP server (serve --advertise; the API is under /api/v1, the dashboard under /ui/), NATS ROUTE where\n" +
			"the other daemons' NATS servers route to its own (serve --nats-cluster). Below the table, each step\n" +
			"running longer than 10 s: its job, what it waits on (a back end, a depositor's server) and since when, or that its bytes move. Hosts taken out for\n" +
			"good (hosts forget) are listed after.",
		Args: args(),
		RunE: a.action(func(ctx context.Context, q *queue.Queue, _ []string) error {
			infos, problems, err := a.ops(q).Hosts(ctx)
			if err != nil {
				return err
			}
			for _, p := range problems {
				a.log.Warn("a host node is not ingestq's; shown by name", "host", p.Name, "err", p.Err)
			}
			if a.json() {
				return a.writeJSON(infos)
			}
			forgotten, err := a.ops(q).ForgottenHosts(ctx)
			if err != nil {
				return err
			}
			if len(infos) == 0 {
				a.println("no daemon works this queue")
				a.printForgotten(forgotten)
				return nil
			}
			t := a.newTable("HOST", "VERSION", "PID", "STATES", "JOBS", "WORKERS", "SINCE", "SEEN", "HTTP", "NATS ROUTE")
			for _, h := range infos {
				workers := 0
				for _, n := range h.Workers {
					workers += n
				}
				t.row(h.Name, textValue(h.Version, "-"), fmt.Sprint(h.PID), ownedStates(h), fmt.Sprint(h.JobsInHand),
					fmt.Sprintf("%d in %d states, %d for batches%s", workers, len(h.Workers), h.BatchWorkers, accessWorkers(h.AccessWorkers)),
					when(h.Since), seen(h.Seen, time.Now()), textValue(h.HTTP, "-"), textValue(h.NATSRoute, "-"))
			}
			if err := t.flush(); err != nil {
				return err
			}
			a.printWaits(infos)
			a.printForgotten(forgotten)
			return nil
		}),
	}
}

// seen says how long ago a host last wrote its node: a live daemon does
// every 15 s, so a late one is dead or cut off, and goes from the list
// when its ZooKeeper session ends.
func seen(at, now time.Time) string {
	if at.IsZero() {
		return "-"
	}
	ago := now.Sub(at).Round(time.Second)
	if ago < 0 {
		ago = 0
	}
	if (reactor.HostInfo{Seen: at}).Late(now) {
		return fmt.Sprintf("%v ago (late: dead or cut off?)", ago)
	}
	return fmt.Sprintf("%v ago", ago)
}

// printWaits lists each host's long steps (its node's waits), a line each:
// which job, what its step waits on, since when.
func (a *app) printWaits(hosts []reactor.HostInfo) {
	for _, h := range hosts {
		for _, jid := range slices.Sorted(maps.Keys(h.Waits)) {
			w := h.Waits[jid]
			a.println("%s: %s %s", h.Name, jid, w)
		}
	}
}

// printForgotten lists the hosts taken out for good (hosts forget).
func (a *app) printForgotten(hosts []ops.ForgottenHost) {
	for _, h := range hosts {
		a.println("forgotten: %s, since %s by %s (its NATS server no longer counts; it joins afresh if it starts again)",
			h.Name, when(h.Since), textValue(h.By, "an operator"))
	}
}

// ownedStates shows what a daemon owns: "all", or its list.
func ownedStates(h reactor.HostInfo) string {
	if h.OwnsAll() {
		return "all"
	}
	return textValue(strings.Join(h.States, ","), "-")
}

// accessWorkers shows a daemon's access workers: ", access 2 small, 1
// large", or nothing when it assembles no packages.
func accessWorkers(n map[string]int) string {
	var parts []string
	for _, name := range queue.AccessQueues {
		if n[name] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[name], name))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return ", access " + strings.Join(parts, ", ")
}
