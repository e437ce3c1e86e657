package handlers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ingestq/ingestq/handlers/audit"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/handlers/storage/ocfl"
	"github.com/ingestq/ingestq/handlers/storage/place"
	"github.com/ingestq/ingestq/internal/redact"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// A storage target is named by a URL: a folder or file:// URL, or an
// s3://bucket/prefix?endpoint=… URL, holds an OCFL storage root; an http(s)
// URL is a storage service. The first target of a list is the primary,
// the others its replicas.

// DefaultStorage is the storage target of a daemon given none: an OCFL
// storage root in its data folder.
func DefaultStorage(dataDir string) string { return filepath.Join(dataDir, "ocfl") }

// ParseTargets splits a comma-separated list of storage URLs.
func ParseTargets(list string) []string {
	var out []string
	for _, t := range strings.Split(list, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// openStore opens one storage target (not cached). With create, an empty
// place becomes an OCFL storage root (Storing's open); without, nothing is
// written and a place without a root is ocfl.ErrNoRoot (the audit's: an
// audit never writes, and a mistyped target must not become a root).
func (p *Pipeline) openStore(ctx context.Context, url string, create bool) (storage.Store, error) {
	if strings.HasPrefix(url, "http://") || strings.HasPrefix(url, "https://") {
		return storage.NewHTTP(url, p.backEnd), nil
	}
	openPlace, openRoot := place.Open, ocfl.New
	if !create {
		openPlace, openRoot = place.OpenExisting, ocfl.Open
	}
	pl, err := openPlace(ctx, url)
	if !create && errors.Is(err, fs.ErrNotExist) {
		return nil, noRoot(fmt.Errorf("%w at %s (no such folder)", ocfl.ErrNoRoot, url))
	}
	if errors.Is(err, place.ErrForm) {
		return nil, fmt.Errorf("%w; or http(s)://… for a storage service", err) // the place names only the OCFL roots
	}
	if err != nil {
		return nil, err
	}
	st, err := openRoot(ctx, pl)
	if errors.Is(err, ocfl.ErrNoRoot) {
		return nil, noRoot(err)
	}
	if err != nil {
		return nil, err
	}
	return st, nil
}

// noRoot is err, about a place without an OCFL storage root, with its
// likely causes.
func noRoot(err error) error {
	return fmt.Errorf("%w: nothing was ever stored there, or its profile names the wrong place", err)
}

// store returns the target at url, opened once per daemon, an empty place
// made an OCFL storage root: Storing's open.
func (p *Pipeline) store(ctx context.Context, url string) (storage.Store, error) {
	return p.openOnce(ctx, url, true)
}

// storeToRead returns the target at url as store does, but writes nothing:
// a place without an OCFL storage root is an error (ocfl.ErrNoRoot), and
// stays as it was for Storing to make a root of. A root it opens is the
// one Storing would open, and is kept for it.
func (p *Pipeline) storeToRead(ctx context.Context, url string) (storage.Store, error) {
	return p.openOnce(ctx, url, false)
}

// opened returns the target at url when it is open already (p.stores).
func (p *Pipeline) opened(url string) (storage.Store, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.stores[url]
	return s, ok
}

// openOnce returns the target at url from p.stores, or opens it there. A
// failed open is not kept: the next call tries again. The open (network
// calls: an S3 bucket's check, the root's declaration) runs outside p.mu,
// so a slow target holds up only the opens of its own URL, which take
// their turns one at a time (or give up when their context ends).
func (p *Pipeline) openOnce(ctx context.Context, url string, create bool) (storage.Store, error) {
	p.mu.Lock()
	s, ok := p.stores[url]
	turn := p.opening[url]
	if turn == nil {
		turn = make(chan struct{}, 1)
		p.opening[url] = turn
	}
	p.mu.Unlock()
	if ok {
		return s, nil
	}
	select {
	case turn <- struct{}{}:
		defer func() { <-turn }()
	case <-ctx.Done():
		return nil, fmt.Errorf("storage %s: %w", redact.Location(url), ctx.Err())
	}
	if s, ok := p.opened(url); ok { // opened while this one waited its turn?
		return s, nil
	}
	s, err := p.openStore(ctx, url, create)
	if err != nil {
		return nil, fmt.Errorf("storage %s: %w", redact.Location(url), err)
	}
	p.mu.Lock()
	p.stores[url] = s
	p.mu.Unlock()
	return s, nil
}

// checkFits refuses, as Fatal, an object with a file whose name cannot be
// stored at one of the profile's targets (its key or path there too long:
// an S3 key over 1,024 bytes, a local path over PATH_MAX), before any
// target is written: each OCFL root is asked (ocfl.Store.Fits). A storage
// service keeps objects under keys of its own: it judges the names
// itself, and refuses the Put (a 4xx, storage.Refused), which fails the
// job too.
func (p *Pipeline) checkFits(ctx context.Context, s *reactor.Step, prof *profile.Profile, ark string, entries []manifestEntry) error {
	files := make([]storage.File, len(entries))
	for i, e := range entries {
		files[i] = storage.File{Name: e.Name, Size: e.Size, SHA256: e.SHA256}
	}
	obj := storage.Object{ARK: ark, Files: files}
	for _, t := range p.targets(prof) {
		// A target is named (Doing) only when asked: a step that succeeds
		// tells the reactor each target it named answered, which ends an
		// outage Storing's jobs wait out (an open store and names that fit
		// at any version ask it nothing).
		st, opened := p.opened(t)
		if !opened {
			s.Doing(storageName(t))
			var err error
			if st, err = p.store(ctx, t); err != nil {
				return p.storageOut(t, err)
			}
		}
		root, ok := st.(*ocfl.Store)
		if !ok || root.FitsUnread(obj) {
			continue
		}
		s.Doing(storageName(t))
		err := root.Fits(ctx, obj)
		if tl := tooLong(err); tl != nil {
			return reactor.Fatal(fmt.Errorf("storage target %s: %w; nothing was stored: give the file a name %d bytes shorter or more, and deposit the object again",
				redact.Location(t), err, tl.Over()))
		}
		if err != nil {
			return p.storageOut(t, err)
		}
	}
	return nil
}

// tooLong is the place's refusal of a key in err (place.TooLong), or nil:
// no retry can store it.
func tooLong(err error) *place.TooLong {
	var tl *place.TooLong
	if errors.As(err, &tl) {
		return tl
	}
	return nil
}

// importOldStore moves the objects of the store ingestq kept before OCFL
// (dataDir/storage, versions as plain folders) into the primary target,
// where the daemon reads an object's head, once: the old folder is renamed
// when every version is in. A primary that is a storage service cannot
// take them; the folder is left as it is, with a warning.
func (p *Pipeline) importOldStore(ctx context.Context, dataDir string) error {
	old := filepath.Join(dataDir, "storage")
	if _, err := os.Stat(old); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	primary := p.cfg.Storage[0]
	s, err := p.store(ctx, primary)
	if err != nil {
		return err
	}
	root, ok := s.(*ocfl.Store)
	if !ok {
		p.log.Warn("storage: the pre-OCFL store is not imported: the primary target is a storage service, not an OCFL root",
			"from", old, "primary", redact.Location(primary))
		return nil
	}
	n, err := ocfl.Import(ctx, root, old)
	if err != nil {
		return fmt.Errorf("import of the pre-OCFL store %s: %w (the daemon tries again at its next start)", old, err)
	}
	done := old + ".imported"
	if err := os.Rename(old, done); err != nil {
		return err
	}
	p.log.Info("storage: the pre-OCFL store was imported into OCFL; its folder can be removed", "versions", n,
		"from", done, "to", redact.Location(primary))
	return nil
}

// ReaderFor is where the objects of a profile ("": the daemon's) are read
// back from, for the access queue: the first of its storage targets that
// is an OCFL root, opened without a write (storeToRead); where it has none,
// its storage services (services). A target without an OCFL storage root
// is a fatal error: no retry can read it.
func (p *Pipeline) ReaderFor(ctx context.Context, profileName string) (storage.Reader, error) {
	targets := p.cfg.Storage
	if prof, ok := p.cfg.Profiles.Get(profileName); ok {
		targets = p.targets(prof)
	}
	var svc services
	for _, t := range targets {
		s, err := p.storeToRead(ctx, t)
		if errors.Is(err, ocfl.ErrNoRoot) {
			return nil, reactor.Fatal(fmt.Errorf("objects of profile %q cannot be read back: %w", profileName, err))
		}
		if err != nil {
			return nil, err
		}
		switch s := s.(type) {
		case *storage.HTTP: // after any root: a local read, and one that serves every version (decision 521)
			svc = append(svc, s)
		case storage.Reader:
			return s, nil
		}
	}
	if len(svc) == 0 {
		return nil, reactor.Fatal(fmt.Errorf("profile %q has no storage target to read objects back from", profileName))
	}
	return svc, nil
}

// services are a profile's storage services, in its order, read from
// where it has no OCFL root. An object is read from the first that serves
// every version of it; failing that, from the first that serves its latest
// (an older service: storage.LatestOnly); failing both, the first error
// other than "not found" (a retry may reach that service, which may have
// the object), else the first.
type services []*storage.HTTP

func (ss services) Read(ctx context.Context, ark string) (storage.Stored, error) {
	var latest storage.Stored
	var first, notFound error
	for _, s := range ss {
		o, err := s.Read(ctx, ark)
		switch {
		case errors.Is(err, storage.ErrNotFound):
			notFound = cmp.Or(notFound, err)
		case err != nil:
			first = cmp.Or(first, err)
		case isLatestOnly(o):
			latest = cmp.Or(latest, o)
		default:
			return o, nil
		}
	}
	if latest != nil {
		return latest, nil
	}
	return nil, cmp.Or(first, notFound)
}

func isLatestOnly(o storage.Stored) bool {
	_, ok := o.(storage.LatestOnly)
	return ok
}

// AccessTargets are the profiles' own places for access packages
// (profile field access), by profile name.
func (p *Pipeline) AccessTargets() map[string]string {
	out := map[string]string{}
	for _, name := range p.cfg.Profiles.Names() {
		if prof, ok := p.cfg.Profiles.Get(name); ok && prof.Access != "" {
			out[name] = prof.Access
		}
	}
	return out
}

// Auditor audits the objects of the daemon's inventory and of each
// profile's own inventory at their profiles' storage targets.
func (p *Pipeline) Auditor() *audit.Auditor {
	return &audit.Auditor{Inventory: p.inventory, Own: p.ownInventories(), Targets: p.AuditTargets, Agent: p.cfg.Agent,
		Profiles: p.cfg.Profiles.Names(), FromStorage: recordFromStorage,
		IngestHeld: func(ctx context.Context) (bool, error) { return p.q.QueueHeld(ctx, queue.QueueIngest) }}
}

// ownInventories are the profiles' own inventories, each once, by URL, with
// the profiles that record into it. One that is the daemon's is not
// another: every object there is audited already. Each is opened at the
// audit's first question to it, as a job's step opens it.
func (p *Pipeline) ownInventories() []audit.Own {
	byURL := map[string][]string{}
	for _, name := range p.cfg.Profiles.Names() {
		if prof, ok := p.cfg.Profiles.Get(name); ok && prof.Inventory != "" && prof.Inventory != p.cfg.Inventory {
			byURL[prof.Inventory] = append(byURL[prof.Inventory], name)
		}
	}
	var out []audit.Own
	for _, at := range slices.Sorted(maps.Keys(byURL)) {
		names := byURL[at]
		prof, _ := p.cfg.Profiles.Get(names[0])
		name := inventoryName(prof)
		if len(names) > 1 {
			name = "the inventory of profiles " + strings.Join(names, ", ")
		}
		out = append(out, audit.Own{Name: name, Inventory: profileInventory{p, prof}, Profiles: names})
	}
	return out
}

// profileInventory is a profile's own inventory, opened at its first use
// (inventoryFor): one out of reach fails the audit's question, not the
// daemon's start.
type profileInventory struct {
	p    *Pipeline
	prof *profile.Profile
}

func (i profileInventory) List(ctx context.Context, after string, limit int) ([]inventory.ObjectRow, error) {
	inv, err := i.p.inventoryFor(ctx, i.prof)
	if err != nil {
		return nil, err
	}
	return inv.List(ctx, after, limit)
}

func (i profileInventory) Object(ctx context.Context, ark string) (inventory.ObjectDetail, error) {
	inv, err := i.p.inventoryFor(ctx, i.prof)
	if err != nil {
		return inventory.ObjectDetail{}, err
	}
	return inv.Object(ctx, ark)
}

func (i profileInventory) Record(ctx context.Context, r inventory.Record) error {
	inv, err := i.p.inventoryFor(ctx, i.prof)
	if err != nil {
		return err
	}
	return inv.Record(ctx, r)
}

// RecordVersions records rs in one transaction where the profile's
// inventory can (inventory.RecordAll): an audit's events of one object.
func (i profileInventory) RecordVersions(ctx context.Context, rs []inventory.Record) error {
	inv, err := i.p.inventoryFor(ctx, i.prof)
	if err != nil {
		return err
	}
	return inventory.RecordAll(ctx, inv, rs)
}

// AuditTargets are the storage targets of profile name for an audit, the
// primary first, each named as the profile names it, its password
// redacted, opened without a write (storeToRead). A target that cannot be
// opened, or holds no OCFL storage root, carries its error. A profile
// this daemon does not know is an error: its targets are not known here.
func (p *Pipeline) AuditTargets(ctx context.Context, name string) ([]audit.Target, error) {
	prof, ok := p.cfg.Profiles.Get(name)
	if !ok {
		return nil, fmt.Errorf("this daemon has no profile %q (it has %s)", name, strings.Join(p.cfg.Profiles.Names(), ", "))
	}
	var out []audit.Target
	for _, t := range p.targets(prof) {
		s, err := p.storeToRead(ctx, t)
		out = append(out, audit.Target{Name: redact.Location(t), URL: t, Store: s, Err: err})
	}
	return out, nil
}
