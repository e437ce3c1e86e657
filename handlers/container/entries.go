package container

import (
	"archive/zip"
	"fmt"
	"io/fs"
	"math/bits"
	"path"
	"strings"

	"github.com/ingestq/ingestq/handlers/checkm"
)

// entry is a zip entry that passed the checks, with its cleaned name.
type entry struct {
	zf      *zip.File
	name    string
	folder  bool
	written int64  // bytes written, once extracted
	sha256  string // their SHA-256, once extracted
}

// zipFlagEncrypted is bit 0 of the general purpose flags; archive/zip
// cannot decrypt, so such an entry would extract as garbage.
const zipFlagEncrypted = 0x1

// checkEntries vets every entry before anything is written: safe names,
// regular files or folders only, no name used twice or as both a file and
// a folder, and header sizes within the limits. Errors name the entry.
func checkEntries(files []*zip.File, lim Limits) ([]*entry, error) {
	if len(files) > lim.MaxFiles {
		return nil, fmt.Errorf("entry %q: more than the limit of %d entries", files[lim.MaxFiles].Name, lim.MaxFiles)
	}
	entries := make([]*entry, 0, len(files))
	names := newNameSet()
	claimed := uint64(0) // header sizes so far, at most lim.MaxBytes
	for _, zf := range files {
		e, err := checkEntry(zf)
		if err != nil {
			return nil, fmt.Errorf("entry %q: %w", zf.Name, err)
		}
		if e == nil {
			continue // the container's own folder: nothing to do
		}
		if err := names.add(e); err != nil {
			return nil, fmt.Errorf("entry %q: %w", zf.Name, err)
		}
		if !e.folder {
			size := zf.UncompressedSize64
			if size > uint64(lim.MaxBytes)-claimed {
				return nil, fmt.Errorf("entry %q: its header brings the total size past the limit of %d bytes (zip bomb?)", zf.Name, lim.MaxBytes)
			}
			claimed += size
			if size > ratioCap(zf.CompressedSize64, lim.MaxRatio) {
				return nil, fmt.Errorf("entry %q: its header claims %d bytes from %d compressed, more than %d:1 (zip bomb?)",
					zf.Name, size, zf.CompressedSize64, lim.MaxRatio)
			}
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// checkEntry checks one entry on its own; a nil entry with no error is a
// folder entry for the container's root ("./").
func checkEntry(zf *zip.File) (*entry, error) {
	mode := zf.Mode()
	folder := mode.IsDir() || strings.HasSuffix(zf.Name, "/")
	switch {
	case mode&fs.ModeSymlink != 0:
		return nil, fmt.Errorf("is a symbolic link")
	case !folder && !mode.IsRegular():
		return nil, fmt.Errorf("is not a regular file or folder (mode %v)", mode)
	case zf.Flags&zipFlagEncrypted != 0:
		return nil, fmt.Errorf("is encrypted")
	}
	if folder && path.Clean(zf.Name) == "." {
		return nil, nil
	}
	name, err := checkm.CleanName(zf.Name)
	if err != nil {
		return nil, err
	}
	return &entry{zf: zf, name: name, folder: folder}, nil
}

// nameSet tracks names taken by entries and folders implied by file names,
// to refuse duplicates and a name that is both a file and a folder.
type nameSet struct {
	taken   map[string]*entry // cleaned name → entry
	implied map[string]string // folder a file name implies → that file's entry name
}

func newNameSet() *nameSet {
	return &nameSet{taken: map[string]*entry{}, implied: map[string]string{}}
}

func (s *nameSet) add(e *entry) error {
	if prev, dup := s.taken[e.name]; dup {
		return fmt.Errorf("duplicate of entry %q (both are %q)", prev.zf.Name, e.name)
	}
	if by, ok := s.implied[e.name]; ok && !e.folder {
		return fmt.Errorf("is a file, but entry %q puts files inside it", by)
	}
	for dir := path.Dir(e.name); dir != "."; dir = path.Dir(dir) {
		if prev, ok := s.taken[dir]; ok && !prev.folder {
			return fmt.Errorf("puts a file inside %q, a file of entry %q", dir, prev.zf.Name)
		}
		if _, seen := s.implied[dir]; seen {
			break // its parents were checked with it
		}
		s.implied[dir] = e.zf.Name
	}
	s.taken[e.name] = e
	return nil
}

// ratioFloor is the size below which the ratio limit does not apply: a small
// file cannot hurt, whatever its ratio, and tiny inputs compress oddly.
const ratioFloor = 1 << 20

// ratioCap is the most bytes an entry of compressed size c may expand to.
func ratioCap(c uint64, maxRatio int64) uint64 {
	hi, lo := bits.Mul64(c, uint64(maxRatio))
	if hi != 0 {
		return ^uint64(0)
	}
	return max(lo, ratioFloor)
}
