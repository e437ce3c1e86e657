package access

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ingestq/ingestq/reactor/queue"
)

// Sweep removes what has had its time, and returns the requests it
// removed:
//
//   - a Completed request whose package has expired: the package, then the
//     request (a folder package only by the host that made it; an S3 one
//     by any daemon that writes to that place);
//   - a package no request names any more (its request was deleted);
//   - a partial file no assembly here is writing (a killed daemon's).
//
// The places are listed before the requests: a package published after
// that listing is not looked at, so a package is never taken for an
// orphan before its request names it. A round in which some request
// cannot be read removes no orphan.
func (as *Assembler) Sweep(ctx context.Context) ([]*queue.Access, error) {
	now := as.cfg.Now()
	dests := as.destinations()
	listed := make([][]string, len(dests))
	for i, d := range dests {
		names, err := d.names(ctx)
		if err != nil {
			return nil, err
		}
		listed[i] = names
	}
	partials, err := as.partials()
	if err != nil {
		return nil, err
	}
	reqs, problems, err := as.cfg.Queue.AccessRequests(ctx)
	if err != nil {
		return nil, err
	}
	var inFolder []string // what the folder's server may serve; none when packages go to S3 alone
	for i, d := range dests {
		if d.kind() == "folder" {
			inFolder = append(inFolder, listed[i]...)
		}
	}
	as.served.keepOnly(inFolder) // else every request ever made stays remembered
	as.served.learn(reqs)
	live := map[string]bool{}
	var expired []*queue.Access
	var errs []error
	for _, a := range reqs {
		t, err := a.AccessToken()
		if err != nil {
			continue // another tool's
		}
		if t.Package == nil {
			if t.Token != "" && t.ARK != "" {
				live[packageName(t)] = true // being made, or about to be
			}
			continue
		}
		live[t.Package.Name] = true
		if a.State() != queue.Completed || !t.Package.Expired(now) {
			continue
		}
		d := as.holder(t.Package)
		if d == nil {
			continue // another host's folder
		}
		if err := d.remove(ctx, t.Package.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := as.cfg.Queue.DeleteAccess(ctx, a); err != nil && !errors.Is(err, queue.ErrStale) {
			errs = append(errs, err)
			continue
		}
		as.log.Info("access: package expired and removed", "request", a.ID, "name", t.Package.Name, "expired", t.Package.Expires)
		expired = append(expired, a)
	}
	if len(problems) == 0 {
		for i, d := range dests {
			for _, name := range listed[i] {
				if live[name] {
					continue
				}
				as.log.Info("access: removing a package no request names", "name", name, "from", d.location())
				errs = append(errs, d.remove(ctx, name))
			}
		}
	}
	for _, p := range partials {
		if !as.isWriting(strings.TrimPrefix(p, partialPrefix)) {
			errs = append(errs, ignoreMissing(os.Remove(filepath.Join(as.cfg.Dir, p))))
		}
	}
	return expired, errors.Join(errs...)
}

// destinations are the places this daemon writes packages to, each once.
func (as *Assembler) destinations() []destination {
	out := []destination{as.dflt}
	for _, d := range as.byPro {
		if !slices.ContainsFunc(out, func(o destination) bool { return o.kind() == d.kind() && o.location() == d.location() }) {
			out = append(out, d)
		}
	}
	return out
}

// holder is the destination of this daemon that holds pkg, or nil.
func (as *Assembler) holder(pkg *queue.AccessPackage) destination {
	for _, d := range as.destinations() {
		if d.kind() == pkg.Where && d.location() == pkg.Location && (d.kind() != "folder" || pkg.Host == as.cfg.Host) {
			return d
		}
	}
	return nil
}

// partials lists the folder's partial files.
func (as *Assembler) partials() ([]string, error) {
	des, err := os.ReadDir(as.cfg.Dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, de := range des {
		if strings.HasPrefix(de.Name(), partialPrefix) {
			out = append(out, de.Name())
		}
	}
	return out, nil
}

func (as *Assembler) isWriting(name string) bool {
	as.mu.Lock()
	defer as.mu.Unlock()
	return as.writing[name]
}

func ignoreMissing(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
