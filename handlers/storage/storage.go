package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ingestq/ingestq/internal/sha256hex"
)

// File is one file of an object.
type File struct {
	Name   string `json:"name"`   // object-relative path, e.g. "producer/a.txt"
	Path   string `json:"-"`      // where the content is now; Local sets it to the stored copy
	Size   int64  `json:"size"`   // bytes
	SHA256 string `json:"sha256"` // lower-case hex
	// Linkable says the caller vouches for the file at Path: synced, its
	// SHA256 computed from the very bytes it holds, and never written again
	// (it may be removed). A store on the same file system may then take it
	// by a hard link instead of copying and hashing it; any other store
	// copies it and checks the digest as usual.
	Linkable bool `json:"-"`
}

// Object is what Put stores: an ARK and its files.
type Object struct {
	ARK      string
	LocalIDs []string
	Files    []File
	// Message and User describe why and by whom a new version is made
	// (both optional). The OCFL store keeps them in the version's
	// metadata; Local and a storage service ([HTTP]) keep the Message
	// alone, in its version.json.
	Message string
	User    User
	// Fence, when set, tells whether the caller still has the right to
	// write the object (it holds the object's storage lock). A store asks
	// once the content is written, before the version's own inventory,
	// before the commit and before it removes anything it wrote; when Fence
	// fails it does none of these and returns its error. A writer paused
	// past its lock's life thus never commits over, nor deletes, the version
	// another writer has made meanwhile. (Content writes under way when it
	// paused still land; for the same job's files they are the same bytes.)
	Fence func(context.Context) error
	// Describing names files that describe this deposit rather than the
	// object (the PREMIS record, the object's own manifest): they differ
	// with every deposit, so Put leaves them aside when it asks whether the
	// content changed. A deposit of unchanged content then makes no
	// version, and neither does a job stored again after a crash whose
	// first try a later Put completed (its describing files were written
	// again meanwhile).
	Describing []string
}

// User is who makes a version: a name, and an address (a mailto: or
// other URI).
type User struct {
	Name    string `json:"name"`
	Address string `json:"address,omitempty"`
}

// Version is one stored version of an object.
type Version struct {
	ARK     string    `json:"ark"`
	Number  int       `json:"number"`
	Created time.Time `json:"created"`
	Files   []File    `json:"files"`             // sorted by Name
	Changed bool      `json:"changed,omitempty"` // false when Put found the latest version identical
	// Message is the version's message when the store keeps one (OCFL:
	// Object.Message as the version was made), else "". It tells which
	// deposit made a version that a Put found already holding the content.
	Message string `json:"message,omitempty"`
	// Linked counts the files this Put took by a hard link (File.Linkable)
	// rather than copied and verified.
	Linked int `json:"-"`
	// URL is where the version's description stays readable: the file URL of
	// its version.json (Local), or the object's URL at the service (HTTP,
	// which serves its latest version there).
	URL string `json:"-"`
}

// ErrNotFound is returned (wrapped) by Latest for an ARK with no version.
var ErrNotFound = errors.New("not found")

// Store keeps objects as versions.
type Store interface {
	// Put stores obj as a new version unless its content (names and
	// digests, obj.Describing aside) equals the latest version's, in which
	// case it returns the latest with Changed false.
	Put(ctx context.Context, obj Object) (Version, error)
	// Latest returns the newest version of ark, or ErrNotFound.
	Latest(ctx context.Context, ark string) (Version, error)
}

// reserved is the name of the metadata file inside a version folder, which
// no object file may take.
const reserved = "version.json"

// CheckObject is what every store checks before a Put (see checkObject);
// it returns the files sorted by name.
func CheckObject(obj Object) ([]File, error) { return checkObject(obj) }

// CheckARK is what every store checks of an ARK.
func CheckARK(ark string) error { return checkARK(ark) }

// NoVersion says an object has no version n, naming those it has (1 to
// last): "it has only version 1", "it has versions 1 to 3".
func NoVersion(ark string, n, last int) string {
	has := fmt.Sprintf("versions 1 to %d", last)
	if last == 1 {
		has = "only version 1"
	}
	return fmt.Sprintf("object %s has no version %d (it has %s)", ark, n, has)
}

// SameContent reports whether two lists sorted by name agree on every
// file's name, size and digest.
func SameContent(a, b []File) bool { return sameContent(a, b) }

// Unchanged reports whether files hold what the head version holds: the
// same names and digests (equal SHA-256 digests mean equal sizes), the
// files named in describing left out of both. It is what makes a Put
// change nothing. Neither list need be sorted.
func Unchanged(head, files []File, describing []string) bool {
	content := func(fs []File) []File {
		out := slices.DeleteFunc(slices.Clone(fs), func(f File) bool { return slices.Contains(describing, f.Name) })
		slices.SortFunc(out, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
		return out
	}
	return slices.EqualFunc(content(head), content(files), func(x, y File) bool {
		return x.Name == y.Name && x.SHA256 == y.SHA256
	})
}

// checkObject rejects what must never reach storage: a bad ARK, a hostile or
// duplicate name, a malformed digest, a source file missing or of the wrong
// size. It returns the files sorted by name, without touching obj.
func checkObject(obj Object) ([]File, error) {
	if err := checkARK(obj.ARK); err != nil {
		return nil, err
	}
	if len(obj.Files) == 0 {
		return nil, fmt.Errorf("storage: object %s has no files", obj.ARK)
	}
	files := slices.Clone(obj.Files)
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	for i, f := range files {
		if err := checkName(f.Name); err != nil {
			return nil, fmt.Errorf("storage: object %s: %w", obj.ARK, err)
		}
		if i > 0 {
			prev := files[i-1].Name
			if prev == f.Name {
				return nil, fmt.Errorf("storage: object %s: file %q listed twice", obj.ARK, f.Name)
			}
			// "a" and "a/b" cannot both be files.
			if strings.HasPrefix(f.Name, prev+"/") {
				return nil, fmt.Errorf("storage: object %s: file %q is also a folder of %q", obj.ARK, prev, f.Name)
			}
		}
		if !sha256hex.Valid(f.SHA256) {
			return nil, fmt.Errorf("storage: object %s: file %q: sha256 %q is not 64 lower-case hex digits", obj.ARK, f.Name, f.SHA256)
		}
		if f.Path == "" {
			return nil, fmt.Errorf("storage: object %s: file %q has no local path", obj.ARK, f.Name)
		}
		st, err := os.Stat(f.Path)
		if err != nil {
			return nil, fmt.Errorf("storage: object %s: file %q: %w", obj.ARK, f.Name, err)
		}
		if !st.Mode().IsRegular() {
			return nil, fmt.Errorf("storage: object %s: file %q: %s is not a regular file", obj.ARK, f.Name, f.Path)
		}
		if st.Size() != f.Size {
			return nil, fmt.Errorf("storage: object %s: file %q: %s has %d bytes, expected %d", obj.ARK, f.Name, f.Path, st.Size(), f.Size)
		}
	}
	return files, nil
}

// checkName accepts a clean, relative, slash-separated path that stays inside
// the object and is safe in a multipart header.
func checkName(name string) error {
	bad := func(why string) error { return fmt.Errorf("file name %q %s", name, why) }
	switch {
	case name == "":
		return errors.New("empty file name")
	case !utf8.ValidString(name):
		return bad("is not UTF-8")
	case strings.ContainsFunc(name, unicode.IsControl):
		return bad("has a control character")
	case strings.Contains(name, `\`):
		return bad("has a backslash")
	case strings.HasPrefix(name, "/"):
		return bad("is absolute")
	case slices.Contains(strings.Split(name, "/"), ".."):
		return bad(`has a ".." element`)
	case path.Clean(name) != name || name == ".":
		return bad("is not a clean relative path")
	case name == reserved:
		return bad("is reserved for storage's own use")
	}
	return nil
}

// checkARK accepts an ARK that maps to one safe folder name.
func checkARK(ark string) error {
	dir := dirName(ark)
	switch {
	case ark == "":
		return errors.New("storage: empty ARK")
	case len(ark) > 200 || !utf8.ValidString(ark) || strings.ContainsFunc(ark, unicode.IsControl):
		return fmt.Errorf("storage: ARK %q is too long or has control characters", ark)
	case strings.Contains(ark, `\`) || strings.HasPrefix(dir, "."):
		return fmt.Errorf("storage: ARK %q does not make a safe folder name", ark)
	}
	return nil
}

// dirName maps an ARK to its object folder's name: "ark:/99999/fk4b" →
// "ark_99999_fk4b" (":/" together make one "_").
func dirName(ark string) string {
	return arkFolder.Replace(ark)
}

var arkFolder = strings.NewReplacer(":/", "_", ":", "_", "/", "_")

// sameContent compares two sorted file lists by name, size and digest.
func sameContent(a, b []File) bool {
	return slices.EqualFunc(a, b, func(x, y File) bool {
		return x.Name == y.Name && x.Size == y.Size && x.SHA256 == y.SHA256
	})
}

// Reader is a store whose objects can be read back, version by version:
// the access queue assembles its packages from one.
type Reader interface {
	// Read returns ark as stored, or an error wrapping ErrNotFound.
	Read(ctx context.Context, ark string) (Stored, error)
}

// Surveyor is a store an audit reads through: Survey is Read, except that
// a file whose stored content is missing has Size Absent (and fails Open)
// instead of failing the whole read, so that the audit names that file. A
// store that is both (an OCFL root, a storage service: [HTTP]) is surveyed
// by the audit. The access queue reads from a profile's first OCFL root,
// and from a storage service only where the profile has no root.
type Surveyor interface {
	Survey(ctx context.Context, ark string) (Stored, error)
}

// Lister is a store that can name every object it holds: the audit lists
// each target that is one, to find objects that no inventory records (the
// inventory restored from a backup older than storage).
type Lister interface {
	// Objects returns the ARKs after `after` (bytewise) of the objects that
	// have a version, sorted: what it holds is the ARKs, not the store's
	// keys. An object whose own record of its id is damaged is skipped and
	// named in unreadable (its ARK unknown, it may be anywhere in the
	// order): one damaged object does not hide the rest. err is the store's
	// listing or reading failing.
	Objects(ctx context.Context, after string) (arks []string, unreadable []Unreadable, err error)
}

// Unreadable is an object Lister.Objects could not name.
type Unreadable struct {
	Root string // the object's root in the store
	Err  error  // what is wrong there, naming the file
}

// Absent is the Size Survey gives a file whose content is missing.
const Absent = -1

// Stored is one object as a store holds it.
type Stored interface {
	// Versions lists every version, oldest first (Number 1, 2, …), each
	// with its files sorted by name, sizes and digests set; a LatestOnly
	// lists its latest alone.
	Versions() []Version
	// Open reads the bytes of file name of version n; a version or file
	// the object lacks wraps ErrNotFound.
	Open(ctx context.Context, n int, name string) (io.ReadCloser, error)
}

// Locator is a Stored that says where Open reads file name of version n
// from, for a person to find that copy: the storage target and the key,
// path or URL in it ("" when the object has no such file).
type Locator interface {
	Location(n int, name string) string
}

// LatestOnly is a Stored that holds its object's latest version alone (its
// Number may be above 1): what a storage service that serves no older
// version gives ([HTTP.Read]). Why wraps ErrLatestOnly, naming the service.
type LatestOnly interface {
	Stored
	Why() error
}
