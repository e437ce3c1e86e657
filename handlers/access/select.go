package access

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/reactor/queue"
)

// entry is one file to put in a package: which stored file, and its name
// in the package.
type entry struct {
	version  int
	file     storage.File // Name as stored; Size and SHA256 as recorded
	name     string       // in the package
	modified time.Time    // its version's creation
}

// What a request asks for, from the object as stored:
//
//   - the whole object (no version, no files): every version, each in its
//     folder, TOP/v1/…, TOP/v2/…;
//   - one version: its files, TOP/…;
//   - some files, of a version or of the latest: those, TOP/….
//
// TOP names the object (its ARK as a folder name, and the version asked).
// A version or a file the object lacks is a bad request: the error names
// each one missing. So is anything but the latest version, or its files,
// from a store that serves that alone (storage.LatestOnly).
func selectFiles(o storage.Stored, t queue.AccessToken) ([]entry, error) {
	vs := o.Versions()
	if len(vs) == 0 {
		return nil, fmt.Errorf("object %s has no version", t.ARK)
	}
	if lo, ok := o.(storage.LatestOnly); ok {
		latest := vs[0].Number
		if t.Version == 0 && len(t.Files) == 0 || t.Version > 0 && t.Version < latest {
			asked := "every version"
			if t.Version > 0 {
				asked = "version " + strconv.Itoa(t.Version)
			}
			return nil, fmt.Errorf("object %s: %s asked, and only its latest, version %d, can be read: %w; ask for that "+
				"version or its files, or read from an OCFL root holding the object", t.ARK, asked, latest, lo.Why())
		}
	}
	top := topFolder(t)
	if t.Version == 0 && len(t.Files) == 0 {
		var out []entry
		for _, v := range vs {
			for _, f := range v.Files {
				out = append(out, entry{v.Number, f, top + "/v" + strconv.Itoa(v.Number) + "/" + f.Name, v.Created})
			}
		}
		return out, nil
	}
	last := vs[len(vs)-1]
	n := cmp.Or(t.Version, last.Number)
	if n < 1 || n > last.Number {
		return nil, errors.New(storage.NoVersion(t.ARK, n, last.Number))
	}
	v := vs[n-last.Number+len(vs)-1] // a LatestOnly holds the last alone
	if len(t.Files) == 0 {
		out := make([]entry, len(v.Files))
		for i, f := range v.Files {
			out[i] = entry{n, f, top + "/" + f.Name, v.Created}
		}
		return out, nil
	}
	var out []entry
	var missing []string
	for _, name := range t.Files {
		i, found := slices.BinarySearchFunc(v.Files, name, func(f storage.File, name string) int { return strings.Compare(f.Name, name) })
		if !found {
			missing = append(missing, strconv.Quote(name))
			continue
		}
		out = append(out, entry{n, v.Files[i], top + "/" + name, v.Created})
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("object %s version %d has no file %s (it has %d files, e.g. %s)",
			t.ARK, n, strings.Join(missing, ", "), len(v.Files), strconv.Quote(v.Files[0].Name))
	}
	return out, nil
}

// topFolder is the folder a package holds its files in: the ARK as a
// folder name, with the version asked for.
func topFolder(t queue.AccessToken) string {
	top := arkFolder.Replace(t.ARK)
	if t.Version > 0 {
		top += "_v" + strconv.Itoa(t.Version)
	}
	return top
}

// arkFolder maps an ARK to a name safe as a folder and a file name:
// "ark:/99999/fk4b" → "ark_99999_fk4b", as storage names object folders.
var arkFolder = strings.NewReplacer(":/", "_", ":", "_", "/", "_", "\\", "_")

// packageName is the file name of a request's package: what it holds, and
// its token, which no one can guess (the folder is served without
// authentication).
func packageName(t queue.AccessToken) string {
	what := topFolder(t)
	if len(t.Files) > 0 {
		what += "_files"
	}
	return what + "-" + t.Token + "." + t.Format
}
