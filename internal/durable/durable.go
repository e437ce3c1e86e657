// Package durable makes changes to files survive a crash: fsync of files
// and folders, and writes that replace a file atomically. A file's data is
// durable once it is synced; its name (a create, a rename) only once its
// folder is synced too.
package durable

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sync/errgroup"
)

// SyncDir makes a folder's entries durable. A file system that cannot sync
// a folder (EINVAL) is let pass: the files' data is synced anyway.
func SyncDir(dir string) error {
	if err := sync(dir); err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("sync folder %s: %w", dir, err)
	}
	return nil
}

// SyncTree makes every file and folder under dir durable.
func SyncTree(dir string) error {
	var dirs []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir():
			dirs = append(dirs, path)
			return nil
		}
		return sync(path)
	})
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	for _, d := range dirs {
		if err := SyncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// SyncFiles fsyncs files, n at a time. Syncs under way together share the
// file system's journal commits: files written first and synced together
// cost a few commits, where a sync after each write costs one each.
func SyncFiles(files []string, n int) error {
	var g errgroup.Group
	g.SetLimit(n)
	for _, f := range files {
		g.Go(func() error {
			if err := sync(f); err != nil {
				return fmt.Errorf("sync %s: %w", f, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// WriteFile replaces name with data through a temporary file, a sync and
// a rename, creating the folder: after a crash the file is the old one or
// the new one, never a mix.
func WriteFile(name string, data []byte) error {
	return place(name, data, os.Rename)
}

// CreateFile writes name with data as WriteFile does, but only when name
// is not there: then it returns an error matching fs.ErrExist and leaves
// the file as it is. Of writers at once, exactly one creates it, whole (a
// hard link to the synced temporary file, which never replaces a file). On
// a file system that makes no hard links (NoLink) the file is renamed into
// place when it is not there yet: whole, but two writers at once may each
// replace the other's.
func CreateFile(name string, data []byte) error {
	return place(name, data, func(tmp, name string) error {
		err := os.Link(tmp, name)
		if !NoLink(err) {
			return err
		}
		if _, err := os.Lstat(name); err == nil {
			return &fs.PathError{Op: "create", Path: name, Err: fs.ErrExist}
		}
		return os.Rename(tmp, name)
	})
}

// NoLink tells the errors of a hard link that the file system makes none
// here (another device, a file system without them, too many links).
func NoLink(err error) bool {
	for _, e := range []error{syscall.EXDEV, syscall.EPERM, syscall.EMLINK, syscall.ENOTSUP, syscall.EOPNOTSUPP} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// place writes data to a synced temporary file beside name, creating the
// folder, and puts it at name with put (a rename or a link).
func place(name string, data []byte, put func(tmp, name string) error) error {
	dir := filepath.Dir(name)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone after a rename, left beside a link; cleans up after an error
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := put(tmp.Name(), name); err != nil {
		return err
	}
	return SyncDir(dir)
}

// sync fsyncs one file or folder.
func sync(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
