package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ingestq/ingestq/internal/ctxio"
	"github.com/ingestq/ingestq/internal/durable"
)

// tmpPrefix starts the name of a version folder still being written.
const tmpPrefix = ".tmp-"

// manifest is version.json.
type manifest struct {
	ARK      string    `json:"ark"`
	Number   int       `json:"number"`
	Created  time.Time `json:"created"`
	LocalIDs []string  `json:"local_ids,omitempty"`
	Files    []File    `json:"files"`
	Message  string    `json:"message,omitempty"` // Object.Message; none before this field was kept
}

// version returns m as a Version whose files point into dir.
func (m manifest) version(dir string) Version {
	v := Version{ARK: m.ARK, Number: m.Number, Created: m.Created, Files: slices.Clone(m.Files), Message: m.Message,
		URL: (&url.URL{Scheme: "file", Path: filepath.ToSlash(filepath.Join(dir, reserved))}).String()}
	for i := range v.Files {
		v.Files[i].Path = filepath.Join(dir, filepath.FromSlash(v.Files[i].Name))
	}
	return v
}

func versionDir(n int) string { return fmt.Sprintf("v%04d", n) }

// parseVersionDir reads n from a folder named versionDir(n).
func parseVersionDir(name string) (int, bool) {
	if len(name) < 2 || name[0] != 'v' {
		return 0, false
	}
	n, err := strconv.Atoi(name[1:])
	if err != nil || n < 1 || versionDir(n) != name {
		return 0, false
	}
	return n, true
}

// readLatest reads the newest version in objDir. A non-empty ark must match
// the one recorded: two ARKs can map to one folder name ("a_b", "a/b").
func readLatest(objDir, ark string) (Version, error) {
	newest, err := newestVersion(objDir, ark)
	if err != nil {
		return Version{}, err
	}
	return readVersion(objDir, ark, newest)
}

// readVersions reads every version in objDir, oldest first: a version
// folder missing below the newest is an error naming it.
func readVersions(objDir, ark string) ([]Version, error) {
	newest, err := newestVersion(objDir, ark)
	if err != nil {
		return nil, err
	}
	out := make([]Version, 0, newest)
	for n := 1; n <= newest; n++ {
		v, err := readVersion(objDir, ark, n)
		if errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("storage: %s has no folder %s of version %d below its newest, %d",
				objDir, versionDir(n), n, newest)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// newestVersion is the number of the newest version folder in objDir.
func newestVersion(objDir, ark string) (int, error) {
	entries, err := os.ReadDir(objDir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("storage: %s: %w", ark, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("storage: read object folder %s: %w", objDir, err)
	}
	newest := 0
	for _, e := range entries {
		if n, ok := parseVersionDir(e.Name()); ok && e.IsDir() && n > newest {
			newest = n
		}
	}
	if newest == 0 {
		return 0, fmt.Errorf("storage: %s: %w", ark, ErrNotFound)
	}
	return newest, nil
}

// readVersion reads version n in objDir (ErrNotFound when its folder is
// missing); a non-empty ark must match the one recorded.
func readVersion(objDir, ark string, n int) (Version, error) {
	dir := filepath.Join(objDir, versionDir(n))
	b, err := os.ReadFile(filepath.Join(dir, reserved))
	if errors.Is(err, os.ErrNotExist) {
		if _, serr := os.Stat(dir); errors.Is(serr, os.ErrNotExist) {
			return Version{}, fmt.Errorf("storage: %s has no version %d: %w", ark, n, ErrNotFound)
		}
	}
	if err != nil {
		return Version{}, fmt.Errorf("storage: read version of %s: %w", ark, err)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return Version{}, fmt.Errorf("storage: %s: %w", filepath.Join(dir, reserved), err)
	}
	if m.Number != n || (ark != "" && m.ARK != ark) {
		return Version{}, fmt.Errorf("storage: %s holds %s version %d, not %s version %d",
			dir, m.ARK, m.Number, ark, n)
	}
	return m.version(dir), nil
}

// copyParallel bounds the files a Put copies at once. With one at a time
// every file's fsync is a journal commit of its own; several in flight
// share commits, and one file's hashing overlaps another's fsync.
const copyParallel = 8

// writeVersion fills dir with the files and version.json, each verified
// and synced, and syncs every folder it made, once each at the end.
func writeVersion(ctx context.Context, dir string, m manifest, files []File) error {
	dirs := map[string]bool{dir: true}
	for _, f := range files {
		for d := filepath.Dir(filepath.Join(dir, filepath.FromSlash(f.Name))); !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	for d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(copyParallel)
	for _, f := range files {
		dst := filepath.Join(dir, filepath.FromSlash(f.Name))
		g.Go(func() error { return copyFile(gctx, dst, f) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := writeSynced(filepath.Join(dir, reserved), b); err != nil {
		return err
	}
	for d := range dirs {
		if err := durable.SyncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// copyFile copies f.Path to dst, checking size and digest on the way.
func copyFile(ctx context.Context, dst string, f File) error {
	src, err := os.Open(f.Path)
	if err != nil {
		return fmt.Errorf("file %q: %w", f.Name, err)
	}
	defer src.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("file %q: %w", f.Name, err)
	}
	// The disk's writes start while the copy goes on hashing (decision 221).
	n, got, err := ctxio.CopySHA256(ctx, io.MultiWriter(out, durable.NewWriteback(out, 0)), src)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("file %q: copy %s: %w", f.Name, f.Path, err)
	}
	if n != f.Size {
		return fmt.Errorf("file %q: %s has %d bytes, expected %d", f.Name, f.Path, n, f.Size)
	}
	if got != f.SHA256 {
		return fmt.Errorf("file %q: %s has sha256 %s, expected %s", f.Name, f.Path, got, f.SHA256)
	}
	return nil
}

func writeSynced(name string, b []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
