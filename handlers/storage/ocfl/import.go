package ocfl

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ingestq/ingestq/handlers/storage"
)

// oldVersion is the version.json of a storage.Local version folder.
type oldVersion struct {
	ARK     string         `json:"ark"`
	Number  int            `json:"number"`
	Created time.Time      `json:"created"`
	Files   []storage.File `json:"files"`
}

// Import copies every version of every object that storage.Local keeps in
// oldDir (<ark folder>/v0001/…/version.json) into st, oldest first, each
// with its creation time, and returns how many versions it wrote. Run
// again, after a crash or to catch up, it skips the versions st holds; a
// version st holds with other files is an error. oldDir is only read.
func Import(ctx context.Context, st *Store, oldDir string) (int, error) {
	entries, err := os.ReadDir(oldDir)
	if err != nil {
		return 0, fmt.Errorf("ocfl: import %s: %w", oldDir, err)
	}
	written := 0
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue // leftovers of a killed Put start with "."
		}
		n, err := importObject(ctx, st, filepath.Join(oldDir, e.Name()))
		written += n
		if err != nil {
			return written, fmt.Errorf("ocfl: import %s: %w", filepath.Join(oldDir, e.Name()), err)
		}
	}
	return written, nil
}

// importObject imports the versions of one object folder, in order.
func importObject(ctx context.Context, st *Store, dir string) (int, error) {
	versions, err := oldVersions(dir)
	if err != nil {
		return 0, err
	}
	written := 0
	for _, vdir := range versions {
		var m oldVersion
		b, err := os.ReadFile(filepath.Join(vdir, "version.json"))
		if err == nil {
			err = json.Unmarshal(b, &m)
		}
		if err != nil {
			return written, err
		}
		done, err := st.holds(ctx, m)
		if err != nil {
			return written, err
		}
		if done {
			continue
		}
		obj := storage.Object{ARK: m.ARK, Files: m.Files,
			Message: fmt.Sprintf("ingestq: imported from version %d of the built-in store", m.Number)}
		for i := range obj.Files {
			obj.Files[i].Path = filepath.Join(vdir, filepath.FromSlash(obj.Files[i].Name))
		}
		v, err := st.put(ctx, obj, m.Created)
		if err != nil {
			return written, err
		}
		if v.Number != m.Number {
			return written, fmt.Errorf("version %d of %s became version %d", m.Number, m.ARK, v.Number)
		}
		written++
	}
	return written, nil
}

// holds reports whether st already has version m.Number of m.ARK, and
// refuses one with other files.
func (s *Store) holds(ctx context.Context, m oldVersion) (bool, error) {
	if err := storage.CheckARK(m.ARK); err != nil {
		return false, err
	}
	head, _, _, err := s.readHead(ctx, objectRoot(m.ARK), m.ARK)
	if err != nil || head == nil || head.number() < m.Number {
		return false, err
	}
	files := slices.Clone(m.Files)
	slices.SortFunc(files, func(a, b storage.File) int { return strings.Compare(a.Name, b.Name) })
	if !head.Versions[versionName(m.Number)].holds(files) {
		return false, fmt.Errorf("%s already has a version %d with other files", m.ARK, m.Number)
	}
	return true, nil
}

// oldVersions lists dir's version folders (v0001, v0002, …) in order; a
// gap is an error.
func oldVersions(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries { // sorted by name: v0001 < v0002 < … < v9999
		n, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "v"))
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "v") || err != nil {
			continue
		}
		if n != len(out)+1 {
			return nil, fmt.Errorf("version folder %s follows %d others", e.Name(), len(out))
		}
		out = append(out, filepath.Join(dir, e.Name()))
	}
	return out, nil // none: a first Put that died before its rename
}
