package profile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Registry is where daemons publish their profiles for the queue's other
// users: [queue.Queue], under /ingestq/profiles/<name>.
type Registry interface {
	PutProfile(ctx context.Context, name string, data []byte) error
	ProfileData(ctx context.Context, name string) ([]byte, bool, error)
	ProfileNames(ctx context.Context) ([]string, error)
}

// Publish writes every profile of s as JSON to the registry, overwriting a
// profile published before. Profiles published earlier that are not in s
// are left alone: another host may still be running with them.
func Publish(ctx context.Context, r Registry, s *Set) error {
	if s == nil {
		return errors.New("profile: publish: nil set")
	}
	for _, name := range s.names {
		data, err := json.Marshal(s.byName[name])
		if err != nil {
			return fmt.Errorf("profile %q: encode: %w", name, err)
		}
		if err := r.PutProfile(ctx, name, data); err != nil {
			return fmt.Errorf("profile: %w", err)
		}
	}
	return nil
}

// Known reads one published profile. A profile that was never published is
// (nil, false, nil); an invalid name or a node that does not hold the
// profile it is named after is an error.
func Known(ctx context.Context, r Registry, name string) (*Profile, bool, error) {
	if err := ValidName(name); err != nil {
		return nil, false, fmt.Errorf("profile name %w", err)
	}
	data, ok, err := r.ProfileData(ctx, name)
	if err != nil {
		return nil, false, fmt.Errorf("profile: %w", err)
	}
	if !ok {
		return nil, false, nil
	}
	// Unknown JSON fields are allowed: a newer ingestq may have published
	// fields this one does not know.
	var prof Profile
	if err := json.Unmarshal(data, &prof); err != nil {
		return nil, false, fmt.Errorf("profile: decode the published %s: %w", name, err)
	}
	if prof.Name != name {
		return nil, false, fmt.Errorf("profile: the published %s holds profile %q", name, prof.Name)
	}
	return &prof, true, nil
}

// Published lists the names of the profiles published on the queue (none
// when no daemon has published any).
func Published(ctx context.Context, r Registry) ([]string, error) {
	names, err := r.ProfileNames(ctx)
	if err != nil {
		return nil, fmt.Errorf("profile: list the published: %w", err)
	}
	return names, nil
}
