package ocfl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/handlers/storage/place"
)

// Latest returns the head version of ark, or an error wrapping
// storage.ErrNotFound. OCFL inventories hold no sizes: each content file
// is asked its size from the place.
func (s *Store) Latest(ctx context.Context, ark string) (storage.Version, error) {
	if err := storage.CheckARK(ark); err != nil {
		return storage.Version{}, err
	}
	root := objectRoot(ark)
	inv, _, _, err := s.readHead(ctx, root, ark)
	if err != nil {
		return storage.Version{}, fmt.Errorf("ocfl: latest of %s: %w", ark, err)
	}
	if inv == nil {
		return storage.Version{}, fmt.Errorf("ocfl: %s: %w", ark, storage.ErrNotFound)
	}
	files, err := s.sizes(ctx, root, inv, inv.Head)
	if err != nil {
		return storage.Version{}, fmt.Errorf("ocfl: latest of %s: %w", ark, err)
	}
	return s.version(inv, inv.Head, root, files), nil
}

// sizes returns the files of version name with their sizes.
func (s *Store) sizes(ctx context.Context, root string, inv *inventory, name string) ([]storage.File, error) {
	files := inv.Versions[name].files()
	size, err := s.contentSizes(ctx, root, inv, maps.Keys(inv.Versions[name].State), false)
	if err != nil {
		return nil, err
	}
	for i := range files {
		files[i].Size = size[files[i].SHA256]
	}
	return files, nil
}

// contentSizes asks the place the size of each digest's content file, one
// Stat per digest, several at once. With absentOK a content file the place
// lacks has size storage.Absent rather than failing them all.
func (s *Store) contentSizes(ctx context.Context, root string, inv *inventory, digests iter.Seq[string], absentOK bool) (map[string]int64, error) {
	var mu sync.Mutex
	size := map[string]int64{}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(copyParallel)
	for digest := range digests {
		g.Go(func() error {
			n, err := s.p.Stat(gctx, root+"/"+inv.Manifest[digest][0])
			if absentOK && errors.Is(err, place.ErrNotExist) {
				n, err = storage.Absent, nil
			}
			mu.Lock()
			size[digest] = n
			mu.Unlock()
			return err
		})
	}
	return size, g.Wait()
}

// version describes version name of inv with files (sorted, sizes set).
// URL names the version's own inventory, which never changes.
func (s *Store) version(inv *inventory, name, root string, files []storage.File) storage.Version {
	created, _ := time.Parse(time.RFC3339, inv.Versions[name].Created) // checked when read
	n, _ := versionNumber(name)
	v := storage.Version{ARK: inv.ID, Number: n, Created: created, Files: slices.Clone(files),
		Message: inv.Versions[name].Message, URL: s.location(root + "/" + name + "/" + inventoryName)}
	for i := range v.Files {
		v.Files[i].Path = "" // the stored copy is in the place, maybe not on this host
	}
	return v
}

var _ storage.Lister = (*Store)(nil)

// Objects returns the ids (ARKs) after `after` (bytewise) of the objects
// that have a version, sorted. The layout hashes ids, so the whole root is
// listed and every object's inventory.json read, a few at once; what is
// held is the ids kept, not the root's keys (3.7 KB an object when it
// held them all: gigabytes for a root of millions of objects). An
// inventory.json that is not an inventory, or names an id that belongs
// elsewhere, is unreadable, not an error: storage damage hides no other
// object. One that cannot be read is an error (the place may be out).
func (s *Store) Objects(ctx context.Context, after string) ([]string, []storage.Unreadable, error) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(copyParallel)
	var mu sync.Mutex
	var ids []string
	var unreadable []storage.Unreadable
	for k, err := range s.p.Keys(gctx, "") {
		if err != nil {
			if werr := g.Wait(); werr != nil {
				err = werr // it cancelled the listing
			}
			return nil, nil, fmt.Errorf("ocfl: objects: %w", err)
		}
		root, ok := strings.CutSuffix(k, "/"+inventoryName)
		if !ok || strings.Count(root, "/") != 3 {
			continue // a version's inventory, or not an object's
		}
		g.Go(func() error {
			b, err := readKey(gctx, s.p, k)
			if errors.Is(err, place.ErrNotExist) {
				return nil // removed since it was listed
			}
			if err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			var inv inventory
			if err = json.Unmarshal(b, &inv); err != nil {
				err = fmt.Errorf("%s: %w", k, err)
			} else if objectRoot(inv.ID) != root {
				err = fmt.Errorf("%s holds %q, which belongs at %s", k, inv.ID, objectRoot(inv.ID))
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				unreadable = append(unreadable, storage.Unreadable{Root: root, Err: err})
			case inv.ID > after:
				ids = append(ids, inv.ID)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, fmt.Errorf("ocfl: objects: %w", err)
	}
	slices.Sort(ids)
	slices.SortFunc(unreadable, func(a, b storage.Unreadable) int { return strings.Compare(a.Root, b.Root) })
	return ids, unreadable, nil
}
