package place

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ingestq/ingestq/internal/ctxio"
	"github.com/ingestq/ingestq/internal/durable"
)

// Local is a place in a local folder: each key is a file under it.
type Local struct {
	dir   string    // absolute
	names nameLimit // of the folder's file system
}

var (
	_ Place   = (*Local)(nil)
	_ Linker  = (*Local)(nil)
	_ Sweeper = (*Local)(nil)
)

// tmpPrefix starts the name of a file still being written; List skips such
// files and Sweep removes those a killed process left. It holds a
// backslash, which no key may, so that no key is ever taken for one (a
// depositor's file may be called ".put-1").
const tmpPrefix = `.put\`

// NewLocal returns the place in dir, creating the folder.
func NewLocal(dir string) (*Local, error) { return localIn(dir, true) }

// ExistingLocal returns the place in dir, a folder that must exist: it
// creates nothing. A missing folder is an error wrapping fs.ErrNotExist.
func ExistingLocal(dir string) (*Local, error) { return localIn(dir, false) }

func localIn(dir string, create bool) (*Local, error) {
	if dir == "" {
		return nil, errors.New("place: empty folder name")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("place %s: %w", dir, err)
	}
	if create {
		err = os.MkdirAll(abs, 0o755)
	} else {
		err = isFolder(abs)
	}
	if err != nil {
		return nil, fmt.Errorf("place %s: %w", dir, err)
	}
	return &Local{dir: abs, names: namesIn(abs)}, nil
}

// isFolder says why dir is not an existing folder, or nil.
func isFolder(dir string) error {
	fi, err := os.Stat(dir)
	if err == nil && !fi.IsDir() {
		err = errors.New("not a folder")
	}
	return err
}

// String returns the folder's absolute path.
func (l *Local) String() string { return l.dir }

// Put writes r to a temporary file beside key's, hashing on the way, syncs
// it, checks size and digest, and renames it onto key: the key holds the
// old bytes or the new, verified ones, never a mix.
func (l *Local) Put(ctx context.Context, key string, r io.Reader, size int64, sha256 string) error {
	name, err := l.file(key)
	if err != nil {
		return err
	}
	if err := l.put(ctx, name, r, size, sha256); err != nil {
		_ = l.prune(filepath.Dir(name)) // folders made for nothing
		return fmt.Errorf("place %s: put %s: %w", l.dir, key, err)
	}
	return nil
}

func (l *Local) put(ctx context.Context, name string, r io.Reader, size int64, want string) error {
	tmp, err := l.createTemp(filepath.Dir(name))
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone after the rename; cleans up after an error
	n, got, err := ctxio.CopySHA256(ctx, tmp, r)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if n != size || got != want {
		return fmt.Errorf("%d bytes with sha256 %s, expected %d bytes with %s: %w", n, got, size, want, ErrDigest)
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return err
	}
	return durable.SyncDir(filepath.Dir(name))
}

// Link makes key a hard link to src; see [Linker]. A src on another file
// system, or on one without hard links, gives ErrNoLink.
func (l *Local) Link(ctx context.Context, key, src string) error {
	name, err := l.file(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("place %s: link %s: %w", l.dir, key, err)
	}
	if err := l.mkdirs(filepath.Dir(name)); err != nil {
		return fmt.Errorf("place %s: link %s: %w", l.dir, key, err)
	}
	if err := link(src, name); err != nil {
		if durable.NoLink(err) {
			// The folder stays for the copy that stands for the link: pruned,
			// it vanished under the links and copies of the object's other
			// files into it, made at once, which then failed (not exist).
			return fmt.Errorf("place %s: link %s: %w: %w", l.dir, key, ErrNoLink, err)
		}
		_ = l.prune(filepath.Dir(name)) // folders made for nothing
		return fmt.Errorf("place %s: link %s: %w", l.dir, key, err)
	}
	return nil
}

// link makes name a hard link to src, replacing what name held: linked
// beside it under a temporary name, then renamed onto it.
func link(src, name string) error {
	err := os.Link(src, name)
	if !errors.Is(err, fs.ErrExist) {
		return err
	}
	tmp := filepath.Join(filepath.Dir(name), tmpPrefix+rand.Text())
	if err := os.Link(src, tmp); err != nil {
		return err
	}
	err = os.Rename(tmp, name)
	// Renaming a link onto another link of the same file does nothing and
	// leaves tmp: remove it either way.
	_ = os.Remove(tmp)
	return err
}

// SyncLinks syncs each folder of keys once; see [Linker].
func (l *Local) SyncLinks(ctx context.Context, keys []string) error {
	dirs := map[string]bool{}
	for _, key := range keys {
		name, err := l.file(key)
		if err != nil {
			return err
		}
		dirs[filepath.Dir(name)] = true
	}
	for d := range dirs {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("place %s: sync: %w", l.dir, err)
		}
		if err := durable.SyncDir(d); err != nil {
			return fmt.Errorf("place %s: %w", l.dir, err)
		}
	}
	return nil
}

// createTemp makes the folder and a temporary file in it. A Delete may
// remove the folder once empty between the two, so the pair is tried again.
func (l *Local) createTemp(dir string) (f *os.File, err error) {
	for range 3 {
		if err = l.mkdirs(dir); err == nil {
			f, err = os.CreateTemp(dir, tmpPrefix+"*")
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return f, err
		}
	}
	return nil, err
}

// mkdirs makes dir and its missing parents durable: each new folder's
// parent is synced.
func (l *Local) mkdirs(dir string) error {
	var missing []string
	for d := dir; d != l.dir; d = filepath.Dir(d) {
		_, err := os.Stat(d)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, d)
	}
	if len(missing) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range missing {
		if err := durable.SyncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// Open reads key.
func (l *Local) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	name, err := l.file(key)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("place %s: open %s: %w", l.dir, key, err)
	}
	f, err := os.Open(name)
	if err == nil {
		var st os.FileInfo
		if st, err = f.Stat(); err == nil && st.IsDir() {
			err = fs.ErrNotExist // a folder is no key
		}
		if err != nil {
			f.Close()
		}
	}
	if err != nil {
		return nil, l.fail("open", key, err)
	}
	return f, nil
}

// Stat returns key's size.
func (l *Local) Stat(ctx context.Context, key string) (int64, error) {
	name, err := l.file(key)
	if err != nil {
		return 0, err
	}
	st, err := os.Stat(name)
	if err == nil && st.IsDir() {
		err = fs.ErrNotExist
	}
	if err != nil {
		return 0, l.fail("stat", key, err)
	}
	return st.Size(), nil
}

// List returns the keys of the files under prefix, sorted, skipping files
// still being written.
func (l *Local) List(ctx context.Context, prefix string) ([]string, error) {
	return sortedKeys(l.Keys(ctx, prefix))
}

// Keys gives the keys of the files under prefix in the walk's order,
// skipping files still being written; see [Place].
func (l *Local) Keys(ctx context.Context, prefix string) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		root, err := l.folder("list", prefix)
		if err != nil {
			yield("", err)
			return
		}
		stopped := false
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			switch {
			case errors.Is(err, fs.ErrNotExist) && p == root:
				return fs.SkipAll // nothing under prefix
			case errors.Is(err, fs.ErrNotExist):
				return nil // removed since its folder was read (another writer's Delete pruned it): not a key now
			case err != nil:
				return err
			case ctx.Err() != nil:
				return ctx.Err()
			case d.IsDir() || strings.HasPrefix(d.Name(), tmpPrefix):
				return nil
			}
			rel, err := filepath.Rel(l.dir, p)
			if err != nil {
				return err
			}
			if !yield(filepath.ToSlash(rel), nil) {
				stopped = true
				return fs.SkipAll
			}
			return nil
		})
		if err != nil && !stopped {
			yield("", fmt.Errorf("place %s: list %q: %w", l.dir, prefix, err))
		}
	}
}

// Sweep removes the temporary files under the folder prefix ("" for
// all), and the folders they leave empty; see [Sweeper].
func (l *Local) Sweep(ctx context.Context, prefix string) error {
	root, err := l.folder("sweep", prefix)
	if err != nil {
		return err
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		switch {
		case errors.Is(err, fs.ErrNotExist) && p == root:
			return fs.SkipAll
		case errors.Is(err, fs.ErrNotExist):
			return nil // pruned by another writer's Delete since its folder was read
		case err != nil:
			return err
		case ctx.Err() != nil:
			return ctx.Err()
		case d.IsDir() || !strings.HasPrefix(d.Name(), tmpPrefix):
			return nil
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return l.prune(filepath.Dir(p))
	})
	if err != nil {
		return fmt.Errorf("place %s: sweep %q: %w", l.dir, prefix, err)
	}
	return nil
}

// folder maps a List or Sweep prefix ("a/b/", or "" for all) to its folder.
func (l *Local) folder(op, prefix string) (string, error) {
	if prefix != "" {
		if err := checkKey(strings.TrimSuffix(prefix, "/")); err != nil || !strings.HasSuffix(prefix, "/") {
			return "", fmt.Errorf("place %s: %s: prefix %q is not a folder (\"a/b/\", or \"\" for all)", l.dir, op, prefix)
		}
	}
	return filepath.Join(l.dir, filepath.FromSlash(prefix)), nil
}

// Delete removes key, then its folders up to the place's root as they
// become empty: a place has keys, not folders.
func (l *Local) Delete(ctx context.Context, key string) error {
	name, err := l.file(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("place %s: delete %s: %w", l.dir, key, err)
	}
	if err := os.Remove(name); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return l.fail("delete", key, err)
	}
	if err := l.prune(filepath.Dir(name)); err != nil {
		return fmt.Errorf("place %s: delete %s: %w", l.dir, key, err)
	}
	return nil
}

// prune removes dir and its parents up to the root while they are empty,
// and syncs the folder where it stopped. Another Delete may prune the same
// folders at once: one already gone is passed by, and the first folder
// still there is synced.
func (l *Local) prune(dir string) error {
	for dir != l.dir && os.Remove(dir) == nil {
		dir = filepath.Dir(dir)
	}
	for {
		err := durable.SyncDir(dir)
		if !errors.Is(err, fs.ErrNotExist) || dir == l.dir {
			return err
		}
		dir = filepath.Dir(dir)
	}
}

// fail names the operation and key, and wraps ErrNotExist for a missing one.
func (l *Local) fail(op, key string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("place %s: %s %s: %w", l.dir, op, key, ErrNotExist)
	}
	return fmt.Errorf("place %s: %s %s: %w", l.dir, op, key, err)
}

// pathMax is the longest path Linux takes: PATH_MAX counts the NUL that
// ends a path.
const pathMax = 4096 - 1

// nameLimit is the longest name a file system takes in a path, and where
// that limit comes from.
type nameLimit struct {
	max  int
	rule string
}

// nameMax is NAME_MAX, most file systems' limit (ext4, XFS, Btrfs, tmpfs):
// a folder's when its file system does not say its own.
var nameMax = nameLimit{255, "a file or folder name is at most 255 bytes (NAME_MAX)"}

// namesIn is the name limit of dir's file system, asked once, when the
// place is made: a file system of shorter names (a FUSE or network file
// system, an old one) refuses a name of 255 bytes that NAME_MAX allows.
// One that cannot be asked, or says 0, is taken as NAME_MAX.
func namesIn(dir string) nameLimit {
	n, err := namelen(dir)
	if err != nil || n <= 0 || n == nameMax.max {
		return nameMax
	}
	return nameLimit{n, fmt.Sprintf("a file or folder name is at most %d bytes on the file system of the place's folder (its statfs f_namelen)", n)}
}

// maxTempName is the longest name a Put or Link gives its file before
// renaming it onto the key: link's, tmpPrefix and rand.Text's 26
// characters (createTemp's random number is 10 digits at most).
const maxTempName = len(tmpPrefix) + 26

// Fits says whether key's file, and the temporary file written beside it
// first, have paths Linux takes: no path over PATH_MAX, no name in key
// longer than the folder's file system takes.
func (l *Local) Fits(key string) error {
	name := filepath.Join(l.dir, filepath.FromSlash(key))
	if n := max(len(name), len(filepath.Dir(name))+1+maxTempName); n > pathMax {
		return &TooLong{What: "its path (the place's folder, then the key, or the temporary file written beside it)",
			Length: n, Limit: pathMax, Rule: "a path on Linux is at most 4095 bytes (PATH_MAX 4096 with its ending NUL)"}
	}
	for elem := range strings.SplitSeq(key, "/") {
		if len(elem) > l.names.max {
			return &TooLong{What: "a name in its path", Length: len(elem), Limit: l.names.max, Rule: l.names.rule}
		}
	}
	return nil
}

// file maps key to its file under the folder.
func (l *Local) file(key string) (string, error) {
	if err := checkKey(key); err != nil {
		return "", fmt.Errorf("place %s: %w", l.dir, err)
	}
	return filepath.Join(l.dir, filepath.FromSlash(key)), nil
}

// checkKey accepts a clean, relative, slash-separated key that stays in
// the place.
func checkKey(key string) error {
	bad := func(why string) error { return fmt.Errorf("key %q %s", key, why) }
	elems := strings.Split(key, "/")
	switch {
	case key == "":
		return errors.New("empty key")
	case strings.ContainsAny(key, "\\\x00"):
		return bad("has a backslash or a NUL")
	case strings.HasPrefix(key, "/"):
		return bad("is absolute")
	case slices.Contains(elems, ".."):
		return bad(`has a ".." element`)
	case path.Clean(key) != key || key == ".":
		return bad("is not a clean relative path")
	}
	return nil
}
