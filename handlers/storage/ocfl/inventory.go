package ocfl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/handlers/storage/place"
)

const (
	inventoryName = "inventory.json"
	sidecarName   = inventoryName + ".sha256"
	inventoryType = "https://ocfl.io/1.1/spec/#inventory"
	contentDir    = "content" // the default: no contentDirectory key
)

// inventory is an OCFL 1.1 inventory.json with sha256 digests.
type inventory struct {
	ID              string                         `json:"id"`
	Type            string                         `json:"type"`
	DigestAlgorithm string                         `json:"digestAlgorithm"`
	Head            string                         `json:"head"`
	Manifest        map[string][]string            `json:"manifest"` // digest → content paths
	Versions        map[string]*version            `json:"versions"`
	Fixity          map[string]map[string][]string `json:"fixity,omitempty"` // kept as read, never written by us
}

// version is one entry of an inventory's versions.
type version struct {
	Created string              `json:"created"` // RFC 3339, UTC
	Message string              `json:"message,omitempty"`
	User    *storage.User       `json:"user,omitempty"`
	State   map[string][]string `json:"state"` // digest → logical paths
}

// versionName is the folder of version n: v1, v2, … (no zero padding).
func versionName(n int) string { return "v" + strconv.Itoa(n) }

// versionNumber reads n from versionName(n).
func versionNumber(name string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(name, "v"))
	return n, err == nil && n > 0 && versionName(n) == name
}

// contentPath is where version vname writes the content of file name,
// relative to the object's root.
func contentPath(vname, name string) string { return vname + "/" + contentDir + "/" + name }

// next returns inv (nil for a new object) with version n+1 of files added,
// and the files whose content the new version must write, by content path.
// A digest already in the manifest is not written again, nor twice in one
// version.
func (inv *inventory) next(id string, files []storage.File, meta version) (*inventory, map[string]storage.File) {
	out := &inventory{ID: id, Type: inventoryType, DigestAlgorithm: "sha256",
		Manifest: map[string][]string{}, Versions: map[string]*version{}}
	if inv != nil {
		out.Manifest, out.Versions, out.Fixity = maps.Clone(inv.Manifest), maps.Clone(inv.Versions), inv.Fixity
	}
	vname := versionName(len(out.Versions) + 1)
	out.Head = vname
	meta.State = map[string][]string{}
	write := map[string]storage.File{}
	for _, f := range files { // sorted by name, so each digest's paths are too
		meta.State[f.SHA256] = append(meta.State[f.SHA256], f.Name)
		if _, ok := out.Manifest[f.SHA256]; !ok {
			key := contentPath(vname, f.Name)
			out.Manifest[f.SHA256] = []string{key}
			write[key] = f
		}
	}
	out.Versions[vname] = &meta
	return out, write
}

// files lists the version's files, sorted by name, without sizes.
func (v *version) files() []storage.File {
	var out []storage.File
	for digest, names := range v.State {
		for _, n := range names {
			out = append(out, storage.File{Name: n, SHA256: digest})
		}
	}
	slices.SortFunc(out, func(a, b storage.File) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// holds reports whether the version holds exactly files, by name and
// digest: storage's own comparison, no file left aside.
func (v *version) holds(files []storage.File) bool {
	return storage.Unchanged(v.files(), files, nil)
}

// holding names the version that already holds obj's content, so that a
// Put makes none: the head, when it holds the content (names and digests,
// obj.Describing aside); else an earlier version that obj's own deposit
// made, by its message (which names the deposit) and content. That one is
// a try of this deposit that landed before another deposit's version (a job
// stored again after a host died before recording it): a new version would
// put the older content back on top. "" for none; inv may be nil.
func (inv *inventory) holding(obj storage.Object, files []storage.File) string {
	if inv == nil {
		return ""
	}
	if storage.Unchanged(inv.headVersion().files(), files, obj.Describing) {
		return inv.Head
	}
	if obj.Message == "" {
		return "" // the default message names no deposit
	}
	for n := inv.number() - 1; n >= 1; n-- {
		v := inv.Versions[versionName(n)]
		if v.Message == obj.Message && storage.Unchanged(v.files(), files, obj.Describing) {
			return versionName(n)
		}
	}
	return ""
}

// headVersion is the head's entry in versions.
func (inv *inventory) headVersion() *version { return inv.Versions[inv.Head] }

// number is the head's version number.
func (inv *inventory) number() int {
	n, _ := versionNumber(inv.Head)
	return n
}

// check accepts an inventory this store can extend: of id, sha256,
// versions v1…head without gaps, every state digest in the manifest.
func (inv *inventory) check(id string) error {
	head, ok := versionNumber(inv.Head)
	switch {
	case inv.ID != id:
		return fmt.Errorf("holds object %q, not %q", inv.ID, id)
	case inv.Type != inventoryType:
		return fmt.Errorf("type %q, not %q", inv.Type, inventoryType)
	case inv.DigestAlgorithm != "sha256":
		return fmt.Errorf("digestAlgorithm %q: this store reads and writes sha256 only", inv.DigestAlgorithm)
	case !ok || len(inv.Versions) != head:
		return fmt.Errorf("head %q with %d versions", inv.Head, len(inv.Versions))
	}
	for n := 1; n <= head; n++ {
		v := inv.Versions[versionName(n)]
		if v == nil {
			return fmt.Errorf("no version %s", versionName(n))
		}
		if _, err := time.Parse(time.RFC3339, v.Created); err != nil {
			return fmt.Errorf("version %s: created %q is not RFC 3339", versionName(n), v.Created)
		}
		for d := range v.State {
			if len(inv.Manifest[d]) == 0 {
				return fmt.Errorf("version %s: digest %s is not in the manifest", versionName(n), d)
			}
		}
	}
	return nil
}

// encode returns inv's bytes and the sidecar naming their digest.
func (inv *inventory) encode() (body, sidecar []byte, err error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(inv); err != nil {
		return nil, nil, err
	}
	return b.Bytes(), sidecarOf(b.Bytes()), nil
}

// sidecarOf is inventory.json.sha256 for an inventory's bytes.
func sidecarOf(body []byte) []byte {
	return []byte(digestOf(body) + " " + inventoryName + "\n")
}

// sidecarDigest reads the digest out of a sidecar: "DIGEST inventory.json".
func sidecarDigest(b []byte) string {
	f := strings.Fields(string(b))
	if len(f) != 2 || f[1] != inventoryName {
		return ""
	}
	return strings.ToLower(f[0])
}

// readVerified reads dir's inventory.json (dir is an object root or a
// version folder) and whether its sidecar names its digest. A missing
// inventory wraps place.ErrNotExist.
func readVerified(ctx context.Context, p place.Place, dir string) (body []byte, ok bool, err error) {
	body, err = readKey(ctx, p, dir+"/"+inventoryName)
	if err != nil {
		return nil, false, err
	}
	side, err := readKey(ctx, p, dir+"/"+sidecarName)
	if errors.Is(err, place.ErrNotExist) {
		return body, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return body, sidecarDigest(side) == digestOf(body), nil
}

// decode parses an inventory read from key and checks it is id's.
func decode(body []byte, key, id string) (*inventory, error) {
	var inv inventory
	if err := json.Unmarshal(body, &inv); err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	if err := inv.check(id); err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return &inv, nil
}

// maxSmallFile bounds what readKey reads: inventories and declarations.
const maxSmallFile = 256 << 20

func readKey(ctx context.Context, p place.Place, key string) ([]byte, error) {
	r, err := p.Open(ctx, key)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, maxSmallFile+1))
	if err == nil && len(b) > maxSmallFile {
		err = fmt.Errorf("%s is larger than %d bytes", key, maxSmallFile)
	}
	return b, err
}
