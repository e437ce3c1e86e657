package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

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
	msg := holdResult("queue "+name, hold, changed)
	s.Announce(ctx, holdAction(hold), events.Event{Message: msg, Attrs: map[string]any{"queue": name}})
	return Outcome{ID: name, Changed: changed, Message: msg}, nil
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
	return Outcome{ID: name, Changed: changed, Message: msg}, nil
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
		"?force=true holds it anyway (for a profile not published yet)")
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
	infos := make([]reactor.HostInfo, 0, len(hosts))
	var problems []HostProblem
	for _, h := range hosts {
		var info reactor.HostInfo
		if err := json.Unmarshal(h.Data, &info); err != nil {
			problems = append(problems, HostProblem{h.Name, err})
		}
		info.Name, info.Since, info.Seen = h.Name, h.Since.UTC(), h.Modified.UTC()
		infos = append(infos, info)
	}
	return infos, problems, nil
}
