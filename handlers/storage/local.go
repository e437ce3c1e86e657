package storage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ingestq/ingestq/internal/durable"
)

// Local is the built-in store: versions kept as folders under one directory.
type Local struct {
	dir string

	mu    sync.Mutex
	locks map[string]*arkLock // ARK → its lock, while someone holds or waits for it
}

var _ Store = (*Local)(nil)

// arkLock serialises Puts of one ARK within this process; the caller's
// ZooKeeper lock does the same across hosts.
type arkLock struct {
	sync.Mutex
	users int
}

// NewLocal returns a store keeping its objects under dir, creating dir.
func NewLocal(dir string) (*Local, error) {
	if dir == "" {
		return nil, errors.New("storage: empty folder for the local store")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("storage: local store folder: %w", err)
	}
	return &Local{dir: dir, locks: map[string]*arkLock{}}, nil
}

// Put stores obj as a new version unless its content equals the latest
// version's; see [Store].
func (l *Local) Put(ctx context.Context, obj Object) (Version, error) {
	files, err := checkObject(obj)
	if err != nil {
		return Version{}, err
	}
	if err := ctx.Err(); err != nil {
		return Version{}, fmt.Errorf("storage: put %s: %w", obj.ARK, err)
	}
	defer l.lock(obj.ARK)()

	objDir := filepath.Join(l.dir, dirName(obj.ARK))
	if err := l.prepare(objDir); err != nil {
		return Version{}, fmt.Errorf("storage: put %s: %w", obj.ARK, err)
	}
	latest, err := readLatest(objDir, obj.ARK)
	switch {
	case err == nil && Unchanged(latest.Files, files, obj.Describing):
		return latest, nil
	case err != nil && !errors.Is(err, ErrNotFound):
		return Version{}, err
	}

	m := manifest{
		ARK:      obj.ARK,
		Number:   latest.Number + 1,
		Created:  time.Now().UTC(),
		LocalIDs: obj.LocalIDs,
		Files:    make([]File, len(files)),
		Message:  obj.Message,
	}
	for i, f := range files {
		m.Files[i] = File{Name: f.Name, Size: f.Size, SHA256: f.SHA256}
	}
	tmp, err := os.MkdirTemp(objDir, tmpPrefix)
	if err != nil {
		return Version{}, fmt.Errorf("storage: put %s: %w", obj.ARK, err)
	}
	final := filepath.Join(objDir, versionDir(m.Number))
	if err := writeVersion(ctx, tmp, m, files); err != nil {
		_ = os.RemoveAll(tmp)
		return Version{}, fmt.Errorf("storage: put %s version %d: %w", obj.ARK, m.Number, err)
	}
	// The rename is the commit: before it the version does not exist, after
	// it the version is whole. Renaming onto an existing folder fails.
	if err := os.Rename(tmp, final); err != nil {
		_ = os.RemoveAll(tmp)
		return Version{}, fmt.Errorf("storage: put %s version %d: %w", obj.ARK, m.Number, err)
	}
	if err := durable.SyncDir(objDir); err != nil {
		// The version may not survive a power cut; a retried Put either
		// finds it or writes it again.
		return Version{}, fmt.Errorf("storage: put %s version %d: %w", obj.ARK, m.Number, err)
	}
	v := m.version(final)
	v.Changed = true
	return v, nil
}

// Latest returns the newest version of ark, or an error wrapping ErrNotFound.
func (l *Local) Latest(ctx context.Context, ark string) (Version, error) {
	if err := checkARK(ark); err != nil {
		return Version{}, err
	}
	if err := ctx.Err(); err != nil {
		return Version{}, fmt.Errorf("storage: latest of %s: %w", ark, err)
	}
	return readLatest(filepath.Join(l.dir, dirName(ark)), ark)
}

// Objects returns the ARKs that have at least one version, sorted.
func (l *Local) Objects() ([]string, error) {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("storage: list local store %s: %w", l.dir, err)
	}
	var arks []string
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		v, err := readLatest(filepath.Join(l.dir, e.Name()), "")
		if errors.Is(err, ErrNotFound) {
			continue // an object whose first Put died before its rename
		}
		if err != nil {
			return nil, err
		}
		arks = append(arks, v.ARK)
	}
	slices.Sort(arks)
	return arks, nil
}

// prepare makes the object folder and removes temporary folders left by a
// Put that was killed; the caller holds the ARK's lock, so none is live.
func (l *Local) prepare(objDir string) error {
	if _, err := os.Stat(objDir); errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir(objDir, 0o755); err != nil {
			return err
		}
		if err := durable.SyncDir(l.dir); err != nil {
			return err
		}
	}
	entries, err := os.ReadDir(objDir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			if err := os.RemoveAll(filepath.Join(objDir, e.Name())); err != nil {
				return fmt.Errorf("remove leftover %s: %w", e.Name(), err)
			}
		}
	}
	return nil
}

// lock takes the in-process lock of ark and returns its release.
func (l *Local) lock(ark string) (unlock func()) {
	l.mu.Lock()
	k := l.locks[ark]
	if k == nil {
		k = &arkLock{}
		l.locks[ark] = k
	}
	k.users++
	l.mu.Unlock()

	k.Lock()
	return func() {
		k.Unlock()
		l.mu.Lock()
		if k.users--; k.users == 0 {
			delete(l.locks, ark)
		}
		l.mu.Unlock()
	}
}

// survey reads every version of ark, oldest first, each file's Size as its
// stored copy has it (Absent when the copy is gone): what a storage service
// answers an audit (GET /objects/{ark}?versions=all).
func (l *Local) survey(ctx context.Context, ark string) ([]Version, error) {
	if err := checkARK(ark); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("storage: survey of %s: %w", ark, err)
	}
	vs, err := readVersions(filepath.Join(l.dir, dirName(ark)), ark)
	if err != nil {
		return nil, err
	}
	for _, v := range vs {
		for i := range v.Files {
			f := &v.Files[i]
			st, err := os.Stat(f.Path)
			switch {
			case errors.Is(err, os.ErrNotExist):
				f.Size = Absent
			case err != nil:
				return nil, fmt.Errorf("storage: survey of %s version %d: %w", ark, v.Number, err)
			default:
				f.Size = st.Size()
			}
		}
	}
	return vs, nil
}

// StoredFile is where the stored copy of file name of version n of ark is
// (the content call serves it, a test damages it there); a version or file
// the object lacks wraps ErrNotFound.
func (l *Local) StoredFile(ark string, n int, name string) (string, error) {
	v, err := readVersion(filepath.Join(l.dir, dirName(ark)), ark, n)
	if err != nil {
		return "", err
	}
	i := slices.IndexFunc(v.Files, func(f File) bool { return f.Name == name })
	if i < 0 {
		return "", fmt.Errorf("storage: version %d of %s has no file %q: %w", n, ark, name, ErrNotFound)
	}
	return v.Files[i].Path, nil
}
