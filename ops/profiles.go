package ops

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Profiles reads every profile the daemons on this queue have published;
// one that cannot be read is a problem, left out.
func (s *Service) Profiles(ctx context.Context) ([]*profile.Profile, []error, error) {
	names, err := profile.Published(ctx, s.Q)
	if err != nil {
		return nil, nil, err
	}
	var out []*profile.Profile
	var problems []error
	for _, name := range names {
		p, ok, err := profile.Known(ctx, s.Q, name)
		switch {
		case err != nil:
			problems = append(problems, err)
		case ok:
			out = append(out, p)
		}
	}
	return out, problems, nil
}

// Profile reads one published profile; one no daemon has published is
// not found, naming those that are.
func (s *Service) Profile(ctx context.Context, name string) (*profile.Profile, error) {
	if err := profile.ValidName(name); err != nil {
		return nil, invalid(fmt.Sprintf("profile name %v", err))
	}
	p, ok, err := profile.Known(ctx, s.Q, name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, s.MissingProfile(ctx, name, nil)
	}
	return p, nil
}

// MissingProfile is the not found of a profile no daemon has published,
// naming those published that shown keeps (nil: all).
func (s *Service) MissingProfile(ctx context.Context, name string, shown func(string) bool) error {
	return queue.Missing("profile %q: no daemon on this queue has published it (published: %s)", name, s.published(ctx, shown))
}

// published names the published profiles that shown keeps (nil: all),
// for a message.
func (s *Service) published(ctx context.Context, shown func(string) bool) string {
	names, err := s.Q.ProfileNames(ctx)
	if err == nil && shown != nil {
		names = slices.DeleteFunc(names, func(n string) bool { return !shown(n) })
	}
	if err == nil && len(names) > 0 {
		return strings.Join(names, ", ")
	}
	return "none yet"
}

// PayloadSchemes are the URL schemes of the payloads p's daemons fetch:
// http and https, and file when the profile allows local files.
func PayloadSchemes(p *profile.Profile) []string {
	if p.AllowLocalFiles {
		return []string{"http", "https", "file"}
	}
	return []string{"http", "https"}
}
