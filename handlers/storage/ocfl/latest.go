package ocfl

import (
	"context"
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

// Objects returns the ids (ARKs) of the objects that have a version,
// sorted. It lists the whole storage root.
func (s *Store) Objects(ctx context.Context) ([]string, error) {
	keys, err := s.p.List(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("ocfl: objects: %w", err)
	}
	var ids []string
	for _, k := range keys {
		root, ok := strings.CutSuffix(k, "/"+inventoryName)
		if !ok || strings.Count(root, "/") != 3 {
			continue // a version's inventory, or not an object's
		}
		var inv inventory
		if err := readJSON(ctx, s.p, k, &inv); err != nil {
			return nil, fmt.Errorf("ocfl: objects: %w", err)
		}
		if objectRoot(inv.ID) != root {
			return nil, fmt.Errorf("ocfl: objects: %s holds %q, which belongs at %s", k, inv.ID, objectRoot(inv.ID))
		}
		ids = append(ids, inv.ID)
	}
	slices.Sort(ids)
	return ids, nil
}
