package ocfl

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ingestq/ingestq/handlers/storage"
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
	if head != nil && head.headVersion().holds(files) {
		return s.version(head, root, files), nil
	}
	user := cmp.Or(obj.User, defaultUser)
	inv, write := head.next(obj.ARK, files, version{
		Created: created.UTC().Truncate(time.Second).Format(time.RFC3339),
		Message: cmp.Or(obj.Message, defaultMessage),
		User:    &user,
	})
	if err := s.writeVersion(ctx, root, head == nil, inv, write); err != nil {
		return storage.Version{}, fmt.Errorf("ocfl: put %s version %d: %w", obj.ARK, inv.number(), err)
	}
	v := s.version(inv, root, files)
	v.Changed = true
	return v, nil
}

// writeVersion writes the new content, then the version's inventory and
// sidecar, then commits. It removes what it wrote when it fails before
// the commit began; the next Put removes whatever is left.
func (s *Store) writeVersion(ctx context.Context, root string, first bool, inv *inventory, write map[string]storage.File) error {
	body, side, err := inv.encode()
	if err != nil {
		return err
	}
	vdir := root + "/" + inv.Head
	err = s.writeUncommitted(ctx, root, vdir, first, body, side, write)
	if err != nil {
		s.discard(ctx, root, vdir, first)
		return err
	}
	return s.commit(ctx, root, body, side)
}

func (s *Store) writeUncommitted(ctx context.Context, root, vdir string, first bool, body, side []byte, write map[string]storage.File) error {
	if first {
		if err := putBytes(ctx, s.p, root+"/"+objectDeclaration, []byte(objectDeclared)); err != nil {
			return err
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(copyParallel)
	for key, f := range write {
		g.Go(func() error { return s.copyIn(gctx, root+"/"+key, f) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	// Only once every content file is there: a version folder whose
	// inventory verifies is whole.
	if err := putBytes(ctx, s.p, vdir+"/"+inventoryName, body); err != nil {
		return err
	}
	return putBytes(ctx, s.p, vdir+"/"+sidecarName, side)
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
