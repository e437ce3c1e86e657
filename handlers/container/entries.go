package container

import (
	"archive/zip"
	"errors"
	"fmt"
	"io/fs"
	"math/bits"
	"path"
	"strings"
	"unicode/utf8"

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
// a folder, header sizes within the limits, and a file among them. Errors
// name the entry. It returns the entries, the bytes their headers give in
// all and how many are files.
func checkEntries(files []*zip.File, lim Limits) (entries []*entry, unpacked uint64, fileCount int, err error) {
	if len(files) > lim.MaxFiles {
		return nil, 0, 0, fmt.Errorf("entry %q: more than the limit of %d entries", files[lim.MaxFiles].Name, lim.MaxFiles)
	}
	entries = make([]*entry, 0, len(files))
	names := newNameSet()
	for _, zf := range files {
		e, err := checkEntry(zf)
		if err != nil {
			return nil, 0, 0, fmt.Errorf("entry %q: %w", zf.Name, err)
		}
		if e == nil {
			continue // the container's own folder: nothing to do
		}
		if err := names.add(e); err != nil {
			return nil, 0, 0, fmt.Errorf("entry %q: %w", zf.Name, err)
		}
		if !e.folder {
			size := zf.UncompressedSize64
			if size > uint64(lim.MaxBytes)-unpacked { // the header sizes so far are at most lim.MaxBytes
				return nil, 0, 0, fmt.Errorf("entry %q: its header brings the total size past the limit of %d bytes (zip bomb?)", zf.Name, lim.MaxBytes)
			}
			unpacked += size
			fileCount++
			if size > ratioCap(zf.CompressedSize64, lim.MaxRatio) {
				return nil, 0, 0, fmt.Errorf("entry %q: its header claims %d bytes from %d compressed, more than %d:1 (zip bomb?)",
					zf.Name, size, zf.CompressedSize64, lim.MaxRatio)
			}
		}
		entries = append(entries, e)
	}
	if fileCount == 0 {
		return nil, 0, 0, errors.New("holds no files (folders at most): nothing to store")
	}
	return entries, unpacked, fileCount, nil
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
	case folder && zf.UncompressedSize64 > 0:
		// A folder is made, never read: its data would be lost unsaid.
		return nil, fmt.Errorf("is a folder, but its header gives it %d bytes of data", zf.UncompressedSize64)
	case !folder && zf.Method != zip.Store && zf.Method != zip.Deflate:
		// Found here, before anything is written, not by Open halfway through.
		return nil, fmt.Errorf("is compressed with method %d%s, which ingestq cannot unpack: "+
			"only stored (0) and deflated (8) entries; make the zip again with deflate", zf.Method, methodName(zf.Method))
	}
	if folder && path.Clean(zf.Name) == "." {
		return nil, nil
	}
	clean := checkm.CleanName
	if folder {
		clean = checkm.CleanFolderName // "memo /" holds "memo /x.txt"
	}
	name, err := clean(zf.Name)
	if err != nil && zf.NonUTF8 && !utf8.ValidString(zf.Name) {
		// Bit 11 off: the name is in a code page, which one the zip does not
		// say. Read as CP437, as the zip specification has it, a name made in
		// any other (Latin-1, Shift-JIS) would be stored as another name.
		return nil, fmt.Errorf("%w: the zip does not mark its names as UTF-8, and this one is not: it is in a code page "+
			"the zip does not name (CP437, Latin-1, Shift-JIS, …); make the zip again with UTF-8 names", err)
	}
	if err != nil {
		return nil, err
	}
	return &entry{zf: zf, name: name, folder: folder}, nil
}

// methodName is the usual name of a zip compression method archive/zip
// cannot read, in parentheses, or "" (APPNOTE 4.4.5).
func methodName(method uint16) string {
	name, ok := map[uint16]string{6: "implode", 9: "deflate64", 12: "bzip2", 14: "LZMA", 93: "Zstandard",
		95: "XZ", 96: "JPEG", 97: "WavPack", 98: "PPMd", 99: "AES-encrypted"}[method]
	if !ok {
		return ""
	}
	return " (" + name + ")"
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
		switch {
		case prev.folder != e.folder:
			return fmt.Errorf("duplicate of entry %q: one is a file, the other a folder, both %q", prev.zf.Name, e.name)
		case prev.zf.Name == e.zf.Name: // neither wins: which one the depositor meant cannot be told
			return fmt.Errorf("duplicate of an earlier entry of the same name: which of the two is meant cannot be told")
		}
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
