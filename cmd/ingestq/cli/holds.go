package cli

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
)

// What hold can hold, and how the CLI says so: what hold and release did,
// a Held job's or batch's hold in show and ls, and holds, which lists
// everything held. Each says what the hold stops and the command that
// releases it.

// queueArg is the argument of `ingestq hold|release queue` that names a
// queue's hold: none for ingest (the default), the CLI's names of the
// access queues' holds.
func queueArg(name string) string {
	switch name {
	case queue.QueueIngest:
		return ""
	case queue.QueueAccessSmall:
		return "access-small"
	case queue.QueueAccessLarge:
		return "access-large"
	}
	return name
}

// releaseCommand is the command line that releases the hold of a queue, a
// collection, a batch or a job (kind) named name.
func releaseCommand(kind, name string) string {
	if kind == "queue" {
		return strings.TrimSpace("ingestq release queue " + queueArg(name))
	}
	return "ingestq release " + kind + " " + name
}

// holdEffect says what a hold stops.
func holdEffect(kind, name string) string {
	switch kind {
	case "job":
		return "no daemon takes it"
	case "batch":
		return "no daemon makes its jobs"
	case "collection":
		return "daemons send its Pending batches and jobs to Held (work under way goes on)"
	}
	switch name {
	case queue.QueueIngest:
		return "no new step of any batch or job starts (steps under way finish)"
	case queue.QueueAccessSmall:
		return "no new small access request is taken (those under way finish)"
	case queue.QueueAccessLarge:
		return "no new large access request is taken (those under way finish)"
	}
	return "a hold of another program's queue"
}

// releaseEffect says what a release lets go on.
func releaseEffect(kind, name string) string {
	switch kind {
	case "job":
		return "back to Pending, where a daemon takes it"
	case "batch":
		return "back to Pending, where a daemon makes its jobs"
	case "collection":
		return "its new batches and jobs go ahead; those it sent to Held stay Held (`ingestq holds` lists them, each with its release)"
	}
	switch name {
	case queue.QueueIngest:
		return "daemons start new steps again"
	case queue.QueueAccessSmall:
		return "new small access requests are taken again"
	case queue.QueueAccessLarge:
		return "new large access requests are taken again"
	}
	return "released"
}

// printHold prints what a hold or release of a kind of thing did (its
// outcome and error as the change gives them), or returns its error.
// Holding what is held, or releasing what is not, is no error: it says so.
func (a *app) printHold(kind string, hold bool) func(ops.Outcome, error) error {
	return func(o ops.Outcome, err error) error {
		if err != nil {
			return err
		}
		a.holdSaid(kind, hold, o)
		return nil
	}
}

func (a *app) holdSaid(kind string, hold bool, o ops.Outcome) {
	what := kind + " " + o.ID
	switch {
	case hold && o.Changed:
		a.println("%s held: %s until `%s`", what, holdEffect(kind, o.ID), releaseCommand(kind, o.ID))
	case hold:
		a.println("%s was already held: `%s` releases it", what, releaseCommand(kind, o.ID))
	case o.Changed:
		a.println("%s released: %s", what, releaseEffect(kind, o.ID))
	case kind == "job" || kind == "batch":
		a.println("%s was not held (it is %s)", what, o.State)
	default:
		a.println("%s was not held", what)
	}
}

// holdsInForce are the queue and collection holds, read once for a
// listing. Holds that cannot be read are none: only what they would add
// to a Held item's description is missing.
type holdsInForce []queue.Hold

func readHolds(ctx context.Context, q *queue.Queue) holdsInForce {
	h, _ := q.Holds(ctx)
	return h
}

func (h holdsInForce) since(kind, name string) (time.Time, bool) {
	for _, x := range h {
		if x.Kind == kind && x.Name == name {
			return x.Since, true
		}
	}
	return time.Time{}, false
}

// collection is the hold of a job's or batch's collection (its profile),
// when there is one.
func (h holdsInForce) collection(profile string) (time.Time, bool) {
	if profile == "" {
		return time.Time{}, false
	}
	return h.since("collection", profile)
}

// release is the command line, or two, that release a Held job or batch:
// its collection's hold first while that is in force (a daemon would hold
// it again at once, and the release is refused).
func (h holdsInForce) release(kind, id, profile string) string {
	if _, ok := h.collection(profile); ok {
		return releaseCommand("collection", profile) + ", then " + releaseCommand(kind, id)
	}
	return releaseCommand(kind, id)
}

// held says of a job or batch (kind) in state that it is Held, since when,
// what that stops and how to release it; "" unless it is Held. short is
// a table's cell: the release alone.
func (h holdsInForce) held(kind, id string, state queue.State, profile, lastModified string, short bool) string {
	if state != queue.Held {
		return ""
	}
	if short {
		return "held: " + h.release(kind, id, profile)
	}
	out := "held"
	if since := nodeTime(lastModified).String(); since != "" {
		out += " since " + since
	}
	out += ": " + holdEffect(kind, id)
	if since, ok := h.collection(profile); ok {
		out += "; its collection " + profile + " is held too (since " + when(since) + "): `" +
			releaseCommand("collection", profile) + "`, then `" + releaseCommand(kind, id) + "`"
	} else {
		out += " until `" + releaseCommand(kind, id) + "`"
	}
	if since, ok := h.since("queue", queue.QueueIngest); ok {
		out += "; the ingest queue is held too (since " + when(since) + "): `" + releaseCommand("queue", queue.QueueIngest) + "`"
	}
	return out
}

// heldItem is one thing held, as holds lists it.
type heldItem struct {
	Kind    string     `json:"kind"` // queue, collection, batch or job
	Name    string     `json:"name"` // the queue's hold, the collection (profile), the bid or the jid
	Since   *time.Time `json:"since"`
	Effect  string     `json:"effect"`  // what it stops
	Release string     `json:"release"` // the command line that releases it
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
			items, err := a.heldItems(ctx, q)
			if err != nil {
				return err
			}
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

// heldItems lists the holds in force, then the Held batches and jobs.
func (a *app) heldItems(ctx context.Context, q *queue.Queue) ([]heldItem, error) {
	holds, err := a.ops(q).Holds(ctx)
	if err != nil {
		return nil, err
	}
	items := []heldItem{}
	for _, h := range holds {
		since := h.Since.UTC()
		items = append(items, heldItem{h.Kind, h.Name, &since, holdEffect(h.Kind, h.Name), releaseCommand(h.Kind, h.Name)})
	}
	inForce := holdsInForce(holds)
	item := func(kind, id, profile, lastModified string) heldItem {
		it := heldItem{Kind: kind, Name: id, Effect: holdEffect(kind, id), Release: inForce.release(kind, id, profile)}
		if t, ok := nodeTime(lastModified).parse(); ok {
			t = t.UTC()
			it.Since = &t
		}
		if _, ok := inForce.collection(profile); ok {
			it.Effect += " (its collection " + profile + " is held)"
		}
		return it
	}
	batches, err := a.ops(q).ListBatches(ctx, ops.BatchFilter{State: queue.Held}, ops.Page{})
	if err != nil {
		return nil, err
	}
	jobs, err := a.ops(q).ListJobs(ctx, ops.JobFilter{State: queue.Held}, ops.Page{})
	if err != nil {
		return nil, err
	}
	a.warnAll("skipped unreadable batch", batches.Problems)
	a.warnAll("skipped unreadable job", jobs.Problems)
	for _, b := range batches.Batches {
		items = append(items, item("batch", b.ID, b.Profile(), b.Status.LastModified))
	}
	for _, j := range jobs.Jobs {
		items = append(items, item("job", j.ID, j.Profile(), j.Status.LastModified))
	}
	return items, nil
}
