package ocfltest

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// Files is every file and folder under dir, by slash path relative to it,
// or "(no folder)" when dir is not there: what a test compares before and
// after an open that must write nothing. It writes nothing.
func Files(t testing.TB, dir string) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err == nil && path != dir {
			names = append(names, filepath.ToSlash(strings.TrimPrefix(path, dir+string(filepath.Separator))))
		}
		return err
	})
	if errors.Is(err, fs.ErrNotExist) {
		return []string{"(no folder)"}
	}
	if err != nil {
		t.Fatal(err)
	}
	return names
}
