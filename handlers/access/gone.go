package access

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ingestq/ingestq/reactor/queue"
)

// served is which request names each package of the folder, so that the
// server reads that request (one ZooKeeper read a download) before it
// serves the package: a package whose request is deleted or expired is
// refused at once, on this host, whichever host or tool deleted it, not
// at the next sweep. Names hold their request's token, not its ref, hence
// this map: fed by each package this daemon publishes and by each sweep's
// read of the queues; a name it lacks is looked for in the queues once.
type served struct {
	mu    sync.Mutex
	byPkg map[string]servedBy // package name → its request; a zero value: no request names it
}

type servedBy struct {
	ref, ark string
	// doubted, for a name no readable request named while some request
	// could not be read (why), is when the queues are read again for it:
	// until then its downloads are 503 without a read, so that each
	// download of it is not a read of every request.
	doubted time.Time
	why     error
}

// retryAfter is how long a download refused while its request's state is
// unknown waits before it asks again (503's Retry-After).
const retryAfter = 10 * time.Second

func (s *served) remember(name string, by servedBy) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byPkg == nil {
		s.byPkg = map[string]servedBy{}
	}
	s.byPkg[name] = by
}

func (s *served) lookup(name string) (servedBy, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	by, ok := s.byPkg[name]
	return by, ok
}

// keepOnly forgets the packages that are no longer in the folder.
func (s *served) keepOnly(names []string) {
	keep := make(map[string]bool, len(names))
	for _, n := range names {
		keep[n] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for n := range s.byPkg {
		if !keep[n] {
			delete(s.byPkg, n)
		}
	}
}

// learn remembers which request names each package among reqs: the one it
// has, or the one it will have (being made).
func (s *served) learn(reqs []*queue.Access) {
	for _, a := range reqs {
		t, err := a.AccessToken()
		if err != nil || t.Token == "" || t.ARK == "" {
			continue // another tool's
		}
		name := packageName(t)
		if t.Package != nil {
			name = t.Package.Name
		}
		s.remember(name, servedBy{ref: a.Ref(), ark: t.ARK})
	}
}

// requestOf is the request that names package name: from the map, else
// from a read of the queues (which feeds the map). A name no request
// names is remembered as such when every request could be read, else as
// in doubt for retryAfter.
func (as *Assembler) requestOf(ctx context.Context, name string) (servedBy, error) {
	now := as.cfg.Now()
	switch by, ok := as.served.lookup(name); {
	case ok && by.doubted.IsZero():
		return by, nil
	case ok && now.Before(by.doubted):
		return servedBy{}, by.why
	}
	reqs, problems, err := as.cfg.Queue.AccessRequests(ctx)
	if err != nil {
		return servedBy{}, err
	}
	as.served.learn(reqs)
	if by, ok := as.served.lookup(name); ok && by.doubted.IsZero() {
		return by, nil // read: the requests that could not be read do not matter
	}
	if len(problems) > 0 {
		why := errors.Join(problems...) // one of them may name it
		as.served.remember(name, servedBy{doubted: now.Add(retryAfter), why: why})
		return servedBy{}, why
	}
	as.served.remember(name, servedBy{})
	return servedBy{}, nil
}

// gone says why package name is no longer to be had: its request was
// deleted (no request names it, or it is no longer in the queue) or its
// package has expired; "" when it may be served. err is a
// read that failed: whether it is gone is then not known.
func (as *Assembler) gone(ctx context.Context, name string) (string, error) {
	by, err := as.requestOf(ctx, name)
	if err != nil {
		return "", err
	}
	if by.ref == "" {
		return fmt.Sprintf("package %s: no access request names it any more (its request was deleted); "+
			"`ingestq access request ARK` asks again", name), nil
	}
	a, err := as.cfg.Queue.FindAccessNow(ctx, by.ref) // a read alone may come from a follower not yet told of a delete
	switch {
	case errors.Is(err, queue.ErrNotFound):
		return as.deleted(ctx, name, by), nil
	case err != nil:
		return "", err
	}
	t, err := a.AccessToken()
	if err != nil || t.Package == nil || t.Package.Name != name || !t.Package.Expired(as.cfg.Now()) {
		return "", nil
	}
	return fmt.Sprintf("package %s: access request %s expired at %s (its package goes at the next sweep); `ingestq access request %s` asks again",
		name, by.ref, queue.NodeText(t.Package.Expires), by.ark), nil
}

// deleted says of package name that its request (by) is no longer in the
// queue: in Config.Gone's words (who deleted it, when, from the recorded
// events), else in its own.
func (as *Assembler) deleted(ctx context.Context, name string, by servedBy) string {
	if as.cfg.Gone != nil {
		if err := as.cfg.Gone(ctx, by.ref); err != nil {
			return "package " + name + ": " + err.Error()
		}
	}
	return fmt.Sprintf("package %s: access request %s is no longer in the queue (deleted); `ingestq access request %s` asks again",
		name, by.ref, by.ark)
}

// RemovePackage deletes S3 package p now, at the place it was written to,
// with this process's S3 credentials (ops.Service.RemovePackage). A folder
// package is its host's to remove.
func RemovePackage(ctx context.Context, p *queue.AccessPackage) error {
	if p.Where != "s3" {
		return fmt.Errorf("package %s is in the folder of host %s, which removes it", p.Name, p.Host)
	}
	if !isPackage(p.Name) { // the token is ZooKeeper's data: the prefix may hold others' keys (the sweep's rule)
		return fmt.Errorf("%q in %s is not a package's name (WHAT-TOKEN.zip or .tar.gz): left as it is", p.Name, p.Location)
	}
	d, err := openDestination(ctx, p.Location, "", "")
	if err != nil {
		return err
	}
	return d.remove(ctx, p.Name)
}
