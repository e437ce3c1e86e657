package ocfl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/handlers/storage/place"
)

// defaultUser and defaultMessage describe a version whose Object says
// nothing of who and why.
var (
	defaultUser    = storage.User{Name: "ingestq"}
	defaultMessage = "ingestq: stored"
)

// copyParallel bounds the files a Put writes at once: several in flight
// share journal commits (local) or round trips (S3).
const copyParallel = 8

// Put stores obj as a new version unless its files (names and digests,
// hence sizes) equal the head version's; see [storage.Store].
func (s *Store) Put(ctx context.Context, obj storage.Object) (storage.Version, error) {
	return s.put(ctx, obj, time.Now())
}

// put is Put with the version's creation time given.
func (s *Store) put(ctx context.Context, obj storage.Object, created time.Time) (storage.Version, error) {
	files, err := storage.CheckObject(obj)
	if err != nil {
		return storage.Version{}, err
	}
	if err := ctx.Err(); err != nil {
		return storage.Version{}, fmt.Errorf("ocfl: put %s: %w", obj.ARK, err)
	}
	defer s.lock(obj.ARK)()

	root := objectRoot(obj.ARK)
	head, err := s.recover(ctx, root, obj.ARK)
	if err != nil {
		return storage.Version{}, fmt.Errorf("ocfl: put %s: %w", obj.ARK, err)
	}
	if name := head.holding(obj, files); name != "" {
		return s.unchanged(ctx, root, head, name, files)
	}
	user := cmp.Or(obj.User, defaultUser)
	inv, write := head.next(obj.ARK, files, version{
		Created: created.UTC().Truncate(time.Second).Format(time.RFC3339),
		Message: cmp.Or(obj.Message, defaultMessage),
		User:    &user,
	})
	if err := s.fits(root, write); err != nil {
		return storage.Version{}, fmt.Errorf("ocfl: put %s version %d: %w", obj.ARK, inv.number(), err)
	}
	linked, err := s.writeVersion(ctx, root, head == nil, inv, write, fence(obj))
	if err != nil {
		return storage.Version{}, fmt.Errorf("ocfl: put %s version %d: %w", obj.ARK, inv.number(), err)
	}
	v := s.version(inv, inv.Head, root, files)
	v.Changed, v.Linked = true, linked
	return v, nil
}

// Fits tells, writing nothing, whether the place takes the key of each
// content file a Put of obj would write now (the object's root, the next
// version's content folder, the file's name): nil, or the error of the
// first by name that does not fit, naming the file and wrapping the
// place's *place.TooLong. Files already in the object's manifest are
// written again by no Put, and are not asked about. Names that fit at any
// version (FitsUnread) need no read of the object.
func (s *Store) Fits(ctx context.Context, obj storage.Object) error {
	if err := storage.CheckARK(obj.ARK); err != nil {
		return err
	}
	if s.FitsUnread(obj) {
		return nil
	}
	root := objectRoot(obj.ARK)
	head, _, _, err := s.readHead(ctx, root, obj.ARK)
	if err != nil {
		return fmt.Errorf("ocfl: %s: %w", obj.ARK, err)
	}
	files := slices.SortedFunc(slices.Values(obj.Files), func(a, b storage.File) int { return strings.Compare(a.Name, b.Name) })
	inv, write := head.next(obj.ARK, files, version{})
	if err := s.fits(root, write); err != nil {
		return fmt.Errorf("ocfl: %s version %d: %w", obj.ARK, inv.number(), err)
	}
	return nil
}

// FitsUnread tells, asking the store nothing, whether every file of obj
// fits in the content folder of the largest version number, and so in
// any: then Fits reads nothing either. A caller that names the store as a
// back end it waits on (reactor.Step.Doing) need not when this is true.
func (s *Store) FitsUnread(obj storage.Object) bool {
	root, last := objectRoot(obj.ARK), versionName(math.MaxInt)
	return !slices.ContainsFunc(obj.Files, func(f storage.File) bool { return s.p.Fits(root+"/"+contentPath(last, f.Name)) != nil })
}

// fits asks the place about each content key of write (under root), in
// order of name: the first that does not fit is an error naming its file.
func (s *Store) fits(root string, write map[string]storage.File) error {
	for _, key := range slices.Sorted(maps.Keys(write)) {
		if err := s.p.Fits(root + "/" + key); err != nil {
			name := write[key].Name
			return fmt.Errorf("file %q (a name of %d bytes) does not fit: %w", name, len(name), err)
		}
	}
	return nil
}

// unchanged describes version name, which a Put found holding obj's
// content: with files when they are its very files, else with its own (its
// describing files came from another try or deposit), their sizes asked.
func (s *Store) unchanged(ctx context.Context, root string, head *inventory, name string, files []storage.File) (storage.Version, error) {
	if !head.Versions[name].holds(files) {
		var err error
		if files, err = s.sizes(ctx, root, head, name); err != nil {
			return storage.Version{}, fmt.Errorf("ocfl: put %s: %w", head.ID, err)
		}
	}
	return s.version(head, name, root, files), nil
}

// writeVersion writes the new content, then the version's inventory and
// sidecar, then commits; it returns how many content files it linked. It
// removes what it wrote when it fails before the commit began; the next
// Put removes whatever is left.
//
// fence is asked before the commit and before the removal: a writer that
// has lost the right to write the object leaves both to the one that has it.
func (s *Store) writeVersion(ctx context.Context, root string, first bool, inv *inventory, write map[string]storage.File, fence func(context.Context) error) (int, error) {
	body, side, err := inv.encode()
	if err != nil {
		return 0, err
	}
	vdir := root + "/" + inv.Head
	linked, err := s.writeUncommitted(ctx, root, vdir, first, body, side, write, fence)
	if errors.Is(err, errFenced) {
		return 0, err
	}
	if err != nil {
		if ferr := fence(context.WithoutCancel(ctx)); ferr != nil {
			return 0, errors.Join(err, fenced(ferr))
		}
		s.discard(ctx, root, vdir, first)
		return 0, err
	}
	if err := fence(ctx); err != nil {
		return 0, fenced(err)
	}
	return linked, s.commit(ctx, root, body, side)
}

// errFenced marks a Put stopped by its object's fence.
var errFenced = errors.New("fenced")

func fenced(err error) error { return fmt.Errorf("%w: %w", errFenced, err) }

// fence is obj.Fence, or a fence that always passes.
func fence(obj storage.Object) func(context.Context) error {
	if obj.Fence == nil {
		return func(context.Context) error { return nil }
	}
	return obj.Fence
}

// writeUncommitted writes a version's content and then its inventory and
// sidecar, none of it the head yet. Writes that no reader orders are made
// at once (the declaration with the content, the inventory with its
// sidecar): each waits for its own sync, and syncs under way together
// share the file system's journal commits or a store's round trips.
func (s *Store) writeUncommitted(ctx context.Context, root, vdir string, first bool, body, side []byte, write map[string]storage.File, fence func(context.Context) error) (int, error) {
	var linked int
	g, gctx := errgroup.WithContext(ctx)
	if first {
		g.Go(func() error { return putBytes(gctx, s.p, root+"/"+objectDeclaration, []byte(objectDeclared)) })
	}
	g.Go(func() (err error) {
		linked, err = s.writeContent(gctx, root, write)
		return err
	})
	if err := g.Wait(); err != nil {
		return 0, err
	}
	// Only once every content file is there: a version folder whose
	// inventory verifies is whole. And only by a writer that may still
	// write: a version another writer committed meanwhile keeps its own.
	if err := fence(ctx); err != nil {
		return linked, fenced(err)
	}
	g, gctx = errgroup.WithContext(ctx)
	g.Go(func() error { return putBytes(gctx, s.p, vdir+"/"+inventoryName, body) })
	g.Go(func() error { return putBytes(gctx, s.p, vdir+"/"+sidecarName, side) })
	if err := g.Wait(); err != nil {
		return 0, err
	}
	return linked, nil
}

// commit makes a written version the head. The root inventory is the
// commit point; its sidecar follows. A crash between the two leaves a root
// inventory that its own sidecar does not name but the head version's
// does: readers accept it, the next Put rewrites the sidecar.
func (s *Store) commit(ctx context.Context, root string, body, side []byte) error {
	if err := putBytes(ctx, s.p, root+"/"+inventoryName, body); err != nil {
		return err
	}
	return putBytes(ctx, s.p, root+"/"+sidecarName, side)
}

// writeContent puts each new content file at its key: by a hard link where
// it can (linkIn), else by a copy the place verifies. The links' folders
// are synced once each at the end, instead of once per file. It returns
// how many it linked.
func (s *Store) writeContent(ctx context.Context, root string, write map[string]storage.File) (int, error) {
	var mu sync.Mutex
	var linked []string
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(copyParallel)
	for key, f := range write {
		key := root + "/" + key
		g.Go(func() error {
			ok, err := s.linkIn(gctx, key, f)
			switch {
			case err != nil:
				return err
			case ok:
				mu.Lock()
				linked = append(linked, key)
				mu.Unlock()
				return nil
			}
			return s.copyIn(gctx, key, f)
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	if len(linked) == 0 {
		return 0, nil
	}
	return len(linked), s.p.(place.Linker).SyncLinks(ctx, linked)
}

// linkIn takes one file's content by a hard link when the place can and
// the caller vouches for the file (storage.File.Linkable): the stored copy
// is then the very file whose digest the caller computed while writing it.
// false, nil: copy it instead.
func (s *Store) linkIn(ctx context.Context, key string, f storage.File) (bool, error) {
	lk, ok := s.p.(place.Linker)
	if !ok || !f.Linkable {
		return false, nil
	}
	err := lk.Link(ctx, key, f.Path)
	if errors.Is(err, place.ErrNoLink) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("file %q: %w", f.Name, err)
	}
	return true, nil
}

// copyIn writes one file's content from its local copy; the place checks
// size and digest.
func (s *Store) copyIn(ctx context.Context, key string, f storage.File) error {
	src, err := os.Open(f.Path)
	if err != nil {
		return fmt.Errorf("file %q: %w", f.Name, err)
	}
	defer src.Close()
	if err := s.p.Put(ctx, key, src, f.Size, f.SHA256); err != nil {
		return fmt.Errorf("file %q: %w", f.Name, err)
	}
	return nil
}

// discard removes an uncommitted version folder, and the object's
// declaration when it was the first version, on a best effort: even when
// ctx has ended, for a minute.
func (s *Store) discard(ctx context.Context, root, vdir string, first bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if s.removeVersion(ctx, vdir) == nil && first {
		_ = s.p.Delete(ctx, root+"/"+objectDeclaration)
	}
}
