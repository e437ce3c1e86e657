package ocfl

import (
	"context"
	"fmt"
	"io"
	"maps"
	"time"

	"github.com/ingestq/ingestq/handlers/storage"
)

var _ storage.Surveyor = (*Store)(nil)

// Read returns ark's committed object: every version with its files and
// their sizes (one Stat per content file), and a way to read each file.
// The inventory is read once: a Put that commits meanwhile is not seen,
// and the content the read names stays (OCFL never rewrites content).
func (s *Store) Read(ctx context.Context, ark string) (storage.Stored, error) {
	return s.read(ctx, ark, false)
}

// Survey is Read for an audit: a content file the place lacks gives the
// files that name it the size storage.Absent.
func (s *Store) Survey(ctx context.Context, ark string) (storage.Stored, error) {
	return s.read(ctx, ark, true)
}

func (s *Store) read(ctx context.Context, ark string, absentOK bool) (storage.Stored, error) {
	if err := storage.CheckARK(ark); err != nil {
		return nil, err
	}
	root := objectRoot(ark)
	inv, _, _, err := s.readHead(ctx, root, ark)
	if err != nil {
		return nil, fmt.Errorf("ocfl: read %s: %w", ark, err)
	}
	if inv == nil {
		return nil, fmt.Errorf("ocfl: %s: %w", ark, storage.ErrNotFound)
	}
	size, err := s.contentSizes(ctx, root, inv, maps.Keys(inv.Manifest), absentOK)
	if err != nil {
		return nil, fmt.Errorf("ocfl: read %s: %w", ark, err)
	}
	o := &stored{s: s, root: root, inv: inv}
	for n := 1; n <= inv.number(); n++ {
		v := inv.Versions[versionName(n)]
		files := v.files()
		digests := make(map[string]string, len(files))
		for i, f := range files {
			files[i].Size = size[f.SHA256]
			digests[f.Name] = f.SHA256
		}
		o.digests = append(o.digests, digests)
		created, _ := time.Parse(time.RFC3339, v.Created) // checked when read
		// URL as Latest and Put give it: a repaired record's copy names it.
		o.versions = append(o.versions, storage.Version{ARK: ark, Number: n, Created: created, Files: files, Message: v.Message,
			URL: s.location(root + "/" + versionName(n) + "/" + inventoryName)})
	}
	return o, nil
}

// stored is an object as Read found it.
type stored struct {
	s        *Store
	root     string
	inv      *inventory
	versions []storage.Version
	digests  []map[string]string // per version (index n-1): file name → digest
}

func (o *stored) Versions() []storage.Version { return o.versions }

// Open reads the content file that holds the digest of name in version n.
func (o *stored) Open(ctx context.Context, n int, name string) (io.ReadCloser, error) {
	if n < 1 || n > len(o.versions) {
		return nil, fmt.Errorf("ocfl: %s has no version %d: %w", o.inv.ID, n, storage.ErrNotFound)
	}
	if key, ok := o.contentKey(n, name); ok {
		return o.s.p.Open(ctx, key)
	}
	return nil, fmt.Errorf("ocfl: %s version %d has no file %q: %w", o.inv.ID, n, name, storage.ErrNotFound)
}

// Location is the URL of the content file Open reads (storage.Locator).
func (o *stored) Location(n int, name string) string {
	if key, ok := o.contentKey(n, name); ok {
		return o.s.location(key)
	}
	return ""
}

// contentKey is the key, in the root's place, of the content file that
// holds the digest of name in version n (1 to the last).
func (o *stored) contentKey(n int, name string) (string, bool) {
	if n < 1 || n > len(o.digests) {
		return "", false
	}
	digest, ok := o.digests[n-1][name]
	if !ok {
		return "", false
	}
	return o.root + "/" + o.inv.Manifest[digest][0], true
}
