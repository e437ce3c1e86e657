package handlers

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/ingestq/ingestq/internal/durable"
)

// The digest record. Each file of the object is hashed once, while it is
// written: a download (by the manifest's algorithm and SHA-256 in one
// pass), an extraction from a container, a system file from the bytes in
// memory. Its SHA-256 is kept in the working folder (digestRecord), with
// what the file was when it was hashed (size, inode, modification time),
// so that no later step reads it to hash it again: not Processing, whose
// storage manifest takes the recorded digests, not Storing, which may
// store the very file by a hard link, and not a step on another host of a
// shared working area or after a restart. A file that is no longer what
// was hashed (its size, inode or modification time differ) is hashed
// again by Processing and is never linked into storage.
const digestRecord = "file-digests.json"

// fileDigest is one file of the record.
type fileDigest struct {
	Name   string `json:"name"` // producer/… or system/…
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	Inode  uint64 `json:"inode"`
	MTime  int64  `json:"mtime_ns"`
}

// digests is the record of a working folder, by file name. Safe for
// concurrent use.
type digests struct {
	mu    sync.Mutex
	files map[string]fileDigest
}

// readDigests reads a working folder's record; none (a job downloaded
// before records were kept) is an empty one.
func readDigests(work string) (*digests, error) {
	d := &digests{files: map[string]fileDigest{}}
	data, err := os.ReadFile(filepath.Join(work, digestRecord))
	if errors.Is(err, fs.ErrNotExist) {
		return d, nil
	}
	var list []fileDigest
	if err == nil {
		err = json.Unmarshal(data, &list)
	}
	if err != nil {
		return nil, fmt.Errorf("digest record %s: %w", filepath.Join(work, digestRecord), err)
	}
	for _, f := range list {
		d.files[f.Name] = f
	}
	return d, nil
}

// digestsOf is the record of a job's working folder. One that cannot be
// read is taken as none, with a warning: every file is then hashed again
// by Processing and copied, with its digest checked, by Storing, which is
// what the pipeline did before it kept records.
func (p *Pipeline) digestsOf(jid, work string) *digests {
	rec, err := readDigests(work)
	if err != nil {
		p.log.Warn("the digest record is unreadable: its files are hashed again and copied", "job", jid, "err", err)
		return &digests{files: map[string]fileDigest{}}
	}
	return rec
}

// write replaces the record in work, durably.
func (d *digests) write(work string) error {
	d.mu.Lock()
	list := slices.SortedFunc(maps.Values(d.files), func(a, b fileDigest) int { return cmp.Compare(a.Name, b.Name) })
	d.mu.Unlock()
	data, err := json.Marshal(list)
	if err != nil {
		return err
	}
	return durable.WriteFile(filepath.Join(work, digestRecord), data)
}

// add records that the file name (relative to work) has the SHA-256 sum,
// as the file is now.
func (d *digests) add(work, name, sum string) error {
	fi, err := os.Stat(filepath.Join(work, filepath.FromSlash(name)))
	if err != nil {
		return err
	}
	d.addInfo(name, sum, fi)
	return nil
}

// addInfo records that the file name, as fi describes it, has sum.
func (d *digests) addInfo(name, sum string, fi fs.FileInfo) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.files[name] = fileDigest{Name: name, Size: fi.Size(), SHA256: sum, Inode: inode(fi), MTime: fi.ModTime().UnixNano()}
}

// writeHashed writes data to the file name of work durably and records its
// SHA-256, computed from the bytes in memory.
func (d *digests) writeHashed(work, name string, data []byte) (manifestEntry, error) {
	path := filepath.Join(work, filepath.FromSlash(name))
	if err := durable.WriteFile(path, data); err != nil {
		return manifestEntry{}, fmt.Errorf("writing %s: %w", name, err)
	}
	sum := sha256.Sum256(data)
	e := manifestEntry{Name: name, Path: path, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
	return e, d.add(work, name, e.SHA256)
}

// lookup returns what the record says of name.
func (d *digests) lookup(name string) (fileDigest, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f, ok := d.files[name]
	return f, ok
}

// unchanged returns the recorded SHA-256 of name when fi is still the file
// that was hashed: same size, inode and modification time. Every write to
// a file changes its modification time, and a file put in its place has
// another inode.
func (d *digests) unchanged(name string, fi fs.FileInfo) (string, bool) {
	f, ok := d.lookup(name)
	if !ok || f.Size != fi.Size() || f.Inode != inode(fi) || f.MTime != fi.ModTime().UnixNano() {
		return "", false
	}
	return f.SHA256, true
}

// names are the recorded files' names under dir/, sorted.
func (d *digests) names(dir string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for name := range d.files {
		if strings.HasPrefix(name, dir+"/") {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// inode is the file's inode number, 0 when the file system gives none.
func inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino) // not a uint64 on every system
	}
	return 0
}
