package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// QueueNames are the queues a hold can stop.
var QueueNames = []string{queue.QueueIngest, queue.QueueAccessSmall, queue.QueueAccessLarge}

// queueAliases are other names of the access queues' holds (the CLI's).
var queueAliases = map[string]string{"access-small": queue.QueueAccessSmall, "access-large": queue.QueueAccessLarge}

// QueueName is the hold name of a queue named by one of QueueNames or an
// alias (access-small, access-large); "" when none.
func QueueName(name string) string {
	if slices.Contains(QueueNames, name) {
		return name
	}
	return queueAliases[name]
}

// Holds lists the queue and collection holds in force.
func (s *Service) Holds(ctx context.Context) ([]queue.Hold, error) {
	holds, err := s.Q.Holds(ctx)
	return append([]queue.Hold{}, holds...), err
}

// HoldQueue stops new acquisitions on a queue (ingest, accessSmall,
// accessLarge); ReleaseQueue lets them go on.
func (s *Service) HoldQueue(ctx context.Context, name string) (Outcome, error) {
	return s.holdQueue(ctx, name, true)
}

// ReleaseQueue lifts a queue hold.
func (s *Service) ReleaseQueue(ctx context.Context, name string) (Outcome, error) {
	return s.holdQueue(ctx, name, false)
}

func (s *Service) holdQueue(ctx context.Context, name string, hold bool) (Outcome, error) {
	if QueueName(name) == "" {
		return Outcome{}, invalid(fmt.Sprintf("queue %q: want one of %s (or access-small, access-large)", name, strings.Join(QueueNames, ", ")))
	}
	name = QueueName(name)
	change := s.Q.ReleaseQueue
	if hold {
		change = s.Q.HoldQueue
	}
	changed, err := change(ctx, name)
	if err != nil {
		return Outcome{}, err
	}
	s.Announce(ctx, holdAction(hold), events.Event{Message: holdResult("queue "+name, hold, changed), Attrs: map[string]any{"queue": name}})
	return holdOutcome("queue", hold, Outcome{ID: name, Changed: changed}), nil
}

// HoldCollection holds a collection (by profile name): daemons send its
// Pending batches and jobs to Held. A name no daemon has published a
// profile for is refused (a typo would hold nothing), unless force.
func (s *Service) HoldCollection(ctx context.Context, name string, force bool) (Outcome, error) {
	if err := collectionName(name); err != nil {
		return Outcome{}, err
	}
	if err := s.checkCollection(ctx, name, force); err != nil {
		return Outcome{}, err
	}
	return s.holdCollection(ctx, name, true)
}

// ReleaseCollection lifts a collection hold; what is Held stays Held.
func (s *Service) ReleaseCollection(ctx context.Context, name string) (Outcome, error) {
	return s.holdCollection(ctx, name, false)
}

// collectionName refuses what cannot be a node's name.
func collectionName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return invalid(fmt.Sprintf("collection name %q: must be non-empty, without '/'", name))
	}
	return nil
}

func (s *Service) holdCollection(ctx context.Context, name string, hold bool) (Outcome, error) {
	if err := collectionName(name); err != nil {
		return Outcome{}, err
	}
	change := s.Q.ReleaseCollection
	if hold {
		change = s.Q.HoldCollection
	}
	changed, err := change(ctx, name)
	if err != nil {
		return Outcome{}, err
	}
	msg := holdResult("collection "+name, hold, changed)
	if !hold && changed {
		msg += " (batches and jobs already Held stay Held: release them one by one)"
	}
	s.Announce(ctx, holdAction(hold), events.Event{Message: msg, Attrs: map[string]any{"collection": name}})
	return holdOutcome("collection", hold, Outcome{ID: name, Changed: changed}), nil
}

func (s *Service) checkCollection(ctx context.Context, name string, force bool) error {
	known, err := profile.Published(ctx, s.Q)
	if err != nil || force || slices.Contains(known, name) {
		return err
	}
	have := "none is published yet"
	if len(known) > 0 {
		have = "published: " + strings.Join(known, ", ")
	}
	return queue.Advised(fmt.Errorf("%w: no profile %q is published on this queue (%s)", queue.ErrRefused, name, have),
		"--force holds it anyway (for a profile not published yet)",
		"?force=true holds it anyway (for a profile not published yet)", "")
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

// HostProblem is a host node that is not an ingestq daemon's.
type HostProblem struct {
	Name string
	Err  error
}

// Hosts lists the daemons working the queue, from their ephemeral host
// nodes. A node another program wrote is listed by name, with a problem.
func (s *Service) Hosts(ctx context.Context) ([]reactor.HostInfo, []HostProblem, error) {
	hosts, err := s.Q.Hosts(ctx)
	if err != nil {
		return nil, nil, err
	}
	routes, err := s.Q.Routes(ctx) // the clustered daemons' NATS routes
	if err != nil {
		return nil, nil, err
	}
	route := map[string]string{}
	for _, r := range routes {
		route[r.Name] = string(r.Data)
	}
	infos := make([]reactor.HostInfo, 0, len(hosts))
	var problems []HostProblem
	for _, h := range hosts {
		var info reactor.HostInfo
		if err := json.Unmarshal(h.Data, &info); err != nil {
			problems = append(problems, HostProblem{h.Name, err})
		}
		info.Name, info.Since, info.Seen, info.NATSRoute = h.Name, h.Since.UTC(), h.Modified.UTC(), route[h.Name]
		infos = append(infos, info)
	}
	return infos, problems, nil
}

// The words of holds, one place for the CLI, the API and the dashboard:
// what a hold stops, what its release lets go on, and how each caller
// releases it (Door). The CLI quotes its command lines in a sentence.

// holdSays is what a hold stops and what its release lets go on.
type holdSays struct{ stops, release string }

// holdWords are what holds say, by kind, and for a queue by "queue NAME".
var holdWords = map[string]holdSays{
	"job":   {"no daemon takes it", "back to Pending, where a daemon takes it"},
	"batch": {"no daemon makes its jobs", "back to Pending, where a daemon makes its jobs"},
	"collection": {"daemons send its Pending batches and jobs to Held (work under way goes on)",
		"its new batches and jobs go ahead; those it sent to Held stay Held (%s lists them, each with its release)"},
	"queue " + queue.QueueIngest:      {"no new step of any batch or job starts (steps under way finish)", "daemons start new steps again"},
	"queue " + queue.QueueAccessSmall: {"no new small access request is taken (those under way finish)", "new small access requests are taken again"},
	"queue " + queue.QueueAccessLarge: {"no new large access request is taken (those under way finish)", "new large access requests are taken again"},
}

func wordsOf(kind, name string) holdSays {
	if kind == "queue" {
		kind += " " + name
	}
	if w, ok := holdWords[kind]; ok {
		return w
	}
	return holdSays{"a hold of another program's queue", "released"}
}

// HoldEffect says what a hold of a queue, a collection, a batch or a job
// (kind) named name stops.
func HoldEffect(kind, name string) string { return wordsOf(kind, name).stops }

// releaseEffect says what a release lets go on, naming d's listing of
// what is held.
func releaseEffect(kind, name string, d Door) string {
	if kind == "collection" {
		listing := map[Door]string{CLI: "`ingestq holds`", HTTP: "GET /api/v1/holds", Dashboard: "the overview's Holds"}[d]
		return fmt.Sprintf(wordsOf(kind, name).release, listing)
	}
	return wordsOf(kind, name).release
}

// ReleaseOf is how a caller at d releases the hold of a queue, a
// collection, a batch or a job (kind) named name: the command line, the
// request, or the job page's button.
func ReleaseOf(kind, name string, d Door) string {
	switch {
	case kind == "queue" && !slices.Contains(QueueNames, name): // another program's (its node's name, not an alias): a release of ingestq's would name the wrong hold
		return "by the program that set it (ingestq releases only the queues " + strings.Join(QueueNames, ", ") + ")"
	case d == CLI && kind == "queue":
		return strings.TrimSpace("ingestq release queue " + map[string]string{
			queue.QueueIngest: "", queue.QueueAccessSmall: "access-small", queue.QueueAccessLarge: "access-large"}[name])
	case d == CLI:
		return "ingestq release " + kind + " " + name
	case d == Dashboard && kind == "job":
		return "Release on the job's page"
	case kind == "queue":
		return "DELETE /api/v1/holds/queues/" + name
	case kind == "collection":
		return "DELETE /api/v1/holds/collections/" + name
	}
	return "POST /api/v1/" + map[string]string{"job": "jobs", "batch": "batches"}[kind] + "/" + name + "/release"
}

// quoted is a command line or request as a sentence gives it: the CLI's
// in backquotes.
func quoted(s string, d Door) string {
	if d == CLI {
		return "`" + s + "`"
	}
	return s
}

// holdOutcome is o, a hold (or release) of kind, saying for each door
// what it did, what it stops and how to undo it. Holding what is held, or
// releasing what is not, is no error: it says so.
func holdOutcome(kind string, hold bool, o Outcome) Outcome {
	o.Message, o.API, o.UI = holdSaid(kind, hold, o, CLI), holdSaid(kind, hold, o, HTTP), holdSaid(kind, hold, o, Dashboard)
	return o
}

func holdSaid(kind string, hold bool, o Outcome, d Door) string {
	what := kind + " " + o.ID
	switch {
	case hold && o.Changed:
		return what + " held: " + HoldEffect(kind, o.ID) + " until " + quoted(ReleaseOf(kind, o.ID, d), d)
	case hold:
		return what + " was already held: " + quoted(ReleaseOf(kind, o.ID, d), d) + " releases it"
	case o.Changed:
		return what + " released: " + releaseEffect(kind, o.ID, d)
	case kind == "job" || kind == "batch":
		return fmt.Sprintf("%s was not held (it is %s)", what, o.State)
	}
	return what + " was not held"
}

// HeldItem is one thing held, as the holds listings give it.
type HeldItem struct {
	Kind    string     `json:"kind"` // queue, collection, batch or job
	Name    string     `json:"name"` // the queue's hold, the collection (profile), the bid or the jid
	Since   *time.Time `json:"since"`
	Effect  string     `json:"effect"`  // what it stops
	Release string     `json:"release"` // how it is released, at the door asked for
}

// HoldItems are the queue and collection holds as listed, for a caller at
// d.
func HoldItems(holds []queue.Hold, d Door) []HeldItem {
	items := []HeldItem{}
	for _, h := range holds {
		since := h.Since.UTC()
		items = append(items, HeldItem{h.Kind, h.Name, &since, HoldEffect(h.Kind, h.Name), ReleaseOf(h.Kind, h.Name, d)})
	}
	return items
}

// HeldItems lists everything held: the queue and collection holds in
// force (on the first page), then the Held batches and jobs, each with
// since when, what its hold stops and how a caller at d releases it, p's
// page of them: at most p.Limit batches and jobs (0: all) after p.After,
// a bid or a Held job's ref. next is the cursor of the page after, ""
// on the last. problems are the batches and jobs that could not be read.
func (s *Service) HeldItems(ctx context.Context, d Door, p Page) (items []HeldItem, next string, problems []error, err error) {
	holds, err := s.Holds(ctx)
	if err != nil {
		return nil, "", nil, err
	}
	items = []HeldItem{}
	if p.After == "" {
		items = HoldItems(holds, d)
	}
	x := Situation{holds: holds}
	item := func(kind, id, profile, lastModified string) HeldItem {
		it := HeldItem{Kind: kind, Name: id, Effect: HoldEffect(kind, id), Release: x.Releases(kind, id, profile, d)}
		if t, ok := queue.NodeTime(lastModified); ok {
			t = t.UTC()
			it.Since = &t
		}
		if _, ok := x.collection(profile); ok {
			it.Effect += " (its collection " + profile + " is held)"
		}
		return it
	}
	var batches BatchList
	if !strings.Contains(p.After, "-jid") { // not past the batches yet
		if batches, err = s.ListBatches(ctx, BatchFilter{State: queue.Held}, p); err != nil {
			return nil, "", nil, err
		}
		for _, b := range batches.Batches {
			items = append(items, item("batch", b.ID, b.Profile(), b.Status.LastModified))
		}
		switch {
		case batches.Next != "":
			return items, batches.Next, batches.Problems, nil
		case p.Limit > 0 && len(batches.Batches) == p.Limit:
			return items, batches.Batches[p.Limit-1].ID, batches.Problems, nil // the jobs on the next page
		}
		p = Page{Limit: max(p.Limit-len(batches.Batches), 0)} // the jobs from their first
	}
	jobs, err := s.ListJobs(ctx, JobFilter{State: queue.Held}, p)
	if err != nil {
		return nil, "", nil, err
	}
	for _, j := range jobs.Jobs {
		items = append(items, item("job", j.ID, j.Profile(), j.Status.LastModified))
	}
	return items, jobs.Next, append(batches.Problems, jobs.Problems...), nil
}
