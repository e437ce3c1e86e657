package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor/queue"
)

// ForgottenNote is what ForgetHost notes of a host taken out for good, and
// (Removed) what a daemon adds once the NATS cluster dropped its server.
type ForgottenNote struct {
	By        string     `json:"by"`
	At        time.Time  `json:"at"`
	Removed   *time.Time `json:"removed,omitempty"`
	RemovedBy string     `json:"removed_by,omitempty"`
}

// ForgetHost notes that host is gone for good (decision 258): the daemons
// have their NATS cluster drop its server, so that the event stream's
// copies on it move to the hosts left and it no longer counts against the
// cluster's quorum. Refused while a daemon of that name runs, and, unless
// force, for a name no daemon of this queue ever registered under (a
// typo): a forgotten name stays listed, and has no undo.
func (s *Service) ForgetHost(ctx context.Context, host string, force bool) (Outcome, error) {
	if !force {
		if err := s.checkKnownHost(ctx, host); err != nil {
			return Outcome{}, err
		}
	}
	note, err := json.Marshal(ForgottenNote{By: s.actor(ctx), At: time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return Outcome{}, err
	}
	if err := s.Q.ForgetHost(ctx, host, note); err != nil {
		return Outcome{}, err
	}
	s.Announce(ctx, "forget", events.Event{Attrs: map[string]any{"host": host}})
	return Outcome{ID: host, Changed: true, Message: fmt.Sprintf("forgot host %s: the daemons' NATS cluster drops its server "+
		"(with --nats-cluster), and the event stream's copies on it move to the hosts left. "+
		"If %s ever starts again, it joins afresh.", host, host)}, nil
}

// ForgottenHost is a host taken out for good, as `ingestq hosts` lists it.
type ForgottenHost struct {
	Name  string    `json:"name"`
	Since time.Time `json:"since"`
	By    string    `json:"by,omitempty"`
}

// ForgottenHosts lists the hosts taken out for good and not back since.
func (s *Service) ForgottenHosts(ctx context.Context) ([]ForgottenHost, error) {
	hosts, err := s.Q.ForgottenHosts(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]ForgottenHost, 0, len(hosts))
	for _, h := range hosts {
		var note ForgottenNote
		_ = json.Unmarshal(h.Data, &note) // a note that cannot be read still names the host
		out = append(out, ForgottenHost{Name: h.Name, Since: h.Since.UTC(), By: note.By})
	}
	return out, nil
}

// checkKnownHost refuses a host name that no daemon of this queue ever
// registered under, and that is neither forgotten already nor live,
// naming those that are known. Daemons older than the record
// (/ingestq/known) left none: a live one is refused as running, by
// Queue.ForgetHost; --force forgets one gone.
func (s *Service) checkKnownHost(ctx context.Context, host string) error {
	known, err := s.Q.KnownHosts(ctx)
	if err != nil {
		return err
	}
	if slices.Contains(known, host) {
		return nil
	}
	if _, forgotten, err := s.Q.Forgotten(ctx, host); err != nil || forgotten {
		return err // forgetting again rewrites the note
	}
	if _, live, _, err := s.Q.LiveHost(ctx, host); err != nil || live {
		return err // a daemon older than the record: refused as running
	}
	have := "none recorded yet"
	if len(known) > 0 {
		have = "known: " + strings.Join(known, ", ")
	}
	return queue.Advised(fmt.Errorf("%w: no daemon of this queue ever ran as host %q (%s)", queue.ErrRefused, host, have),
		"`ingestq hosts` lists the live ones; --force forgets it anyway (a host that last ran before ingestq recorded host names)", "", "")
}
