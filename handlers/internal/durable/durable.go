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
	dir := filepath.Dir(name)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone after the rename; cleans up after an error
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
	if err := os.Rename(tmp.Name(), name); err != nil {
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
