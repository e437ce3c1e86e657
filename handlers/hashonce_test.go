package handlers_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/internal/linktest"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/reactor/queue"
)

// storedContent is where the OCFL root in the folder root keeps name
// (producer/… or system/…) of the one object's first version.
func storedContent(t testing.TB, root, name string) string {
	t.Helper()
	var found string
	suffix := filepath.FromSlash("/v1/content/" + name)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, suffix) {
			found = p
		}
		return err
	})
	if err != nil || found == "" {
		t.Fatalf("no stored %s in %s (%v)", name, root, err)
	}
	return found
}

// The working folder and the primary storage share a file system, so
// every file is stored by a hard link to the very file the download (or
// Processing, for the system files) hashed while writing it; removing the
// working folder at Notify leaves the stored copies whole (and the OCFL
// validator reads every one back with its digest when the test ends). A
// replica on the same file system is a copy all the same: linked, it would
// be the primary's bytes, not a second copy of them.
func TestStoredByLinkOutlivesTheWorkingFolder(t *testing.T) {
	t.Parallel()
	files := object{"a.txt": []byte("alpha\n"), "sub/b.bin": bytes.Repeat([]byte("bravo "), 50_000)}
	names := []string{"producer/a.txt", "producer/sub/b.bin", "system/mrt-erc.txt", "system/mrt-dc.xml",
		"system/mrt-premis.xml", "system/mrt-manifest.txt"}
	primary, replica := filepath.Join(t.TempDir(), "primary"), filepath.Join(t.TempDir(), "replica")
	var mu sync.Mutex
	linked, replicaLinked := map[string]bool{}, map[string]bool{}
	var r *rig
	r = newRig(t, nil, withStorage(primary, replica), beforeStep(queue.Notify, func(j *queue.Job) {
		mu.Lock()
		defer mu.Unlock()
		for _, name := range names {
			work := filepath.Join(r.data, "work", j.ID, filepath.FromSlash(name))
			linked[name] = linktest.SameFile(t, work, storedContent(t, primary, name))
			replicaLinked[name] = linktest.SameFile(t, work, storedContent(t, replica, name))
		}
	}))
	j := r.deposit("/obj.checkm", files)
	ark := r.checkStored(j, files) // Completed, the working folder gone
	// Each copy's fixity event says how it was verified.
	detail, err := r.p.Inventory().Object(t.Context(), ark)
	if err != nil || len(detail.Versions) != 1 {
		t.Fatalf("inventory of %s: %+v, %v", ark, detail, err)
	}
	var fixity []string
	for _, e := range detail.Versions[0].Events {
		if e.Type == inventory.EventFixityCheck && e.File == "" {
			fixity = append(fixity, e.Detail)
		}
	}
	slices.Sort(fixity) // "copy at file://…/primary…" first
	if len(fixity) != 2 || !strings.Contains(fixity[0], fmt.Sprintf("%d new files are hard links", len(names))) ||
		!strings.Contains(fixity[1], "verified by its store (sha256 of every file)") {
		t.Errorf("the copies' fixity events %q, want the primary's saying its %d files are hard links, the replica's that it verified them", fixity, len(names))
	}
	mu.Lock()
	defer mu.Unlock()
	for _, name := range names {
		if !linked[name] || replicaLinked[name] {
			t.Errorf("%s: linked into the primary %v, into the replica %v; want the primary only", name, linked[name], replicaLinked[name])
		}
	}
	for name, data := range files {
		if got, err := os.ReadFile(storedContent(t, primary, "producer/"+name)); err != nil || !bytes.Equal(got, data) {
			t.Errorf("stored %s after the working folder went: %d bytes, %v; want the depositor's %d", name, len(got), err, len(data))
		}
	}
}

// A depositor's file written over in the working folder after its
// verified download (same size, other bytes) is caught by Processing,
// which finds it is not the file the record's digest was computed from:
// it is fetched again, and the depositor's bytes are stored.
func TestFileChangedBeforeProcessingIsFetchedAgain(t *testing.T) {
	t.Parallel()
	files := object{"a.txt": []byte("the depositor's bytes\n"), "b.txt": []byte("untouched\n")}
	logs := &logtest.Buffer{}
	var once sync.Once
	var r *rig
	r = newRig(t, nil, withLogs(t, logs), beforeStep(queue.Processing, func(j *queue.Job) {
		once.Do(func() {
			path := filepath.Join(r.data, "work", j.ID, "producer", "a.txt")
			if err := os.WriteFile(path, []byte("SOMEONE ELSE'S BYTES!\n"), 0o644); err != nil {
				t.Error(err)
			}
		})
	}))
	j := r.deposit("/obj.checkm", files)
	r.checkStored(j, files)
	logs.WaitFor(t, "files changed since their verified download", "producer/a.txt")
	if n, m := r.content.getCount("/obj/a.txt"), r.content.getCount("/obj/b.txt"); n != 2 || m != 1 {
		t.Errorf("a.txt fetched %d times, b.txt %d; want 2 (again after the change) and 1", n, m)
	}
}

// A file written over between Processing and Storing is no longer the
// file its digest was recorded from: Storing does not link it but copies
// it, and the copy's check refuses the bytes. Nothing is stored.
func TestFileChangedBeforeStoringIsRefused(t *testing.T) {
	t.Parallel()
	files := object{"a.txt": []byte("the depositor's bytes\n")}
	var r *rig
	r = newRig(t, nil, beforeStep(queue.Storing, func(j *queue.Job) {
		path := filepath.Join(r.data, "work", j.ID, "producer", "a.txt")
		if err := os.WriteFile(path, []byte("SOMEONE ELSE'S BYTES!\n"), 0o644); err != nil {
			t.Error(err)
		}
	}))
	j := r.deposit("/obj.checkm", files)
	if j.State() != queue.Failed || !strings.Contains(j.Status.Message, `"producer/a.txt"`) ||
		!strings.Contains(j.Status.Message, "digest mismatch") || !strings.Contains(j.Status.Message, sha256hex(files["a.txt"])) {
		t.Fatalf("job %s: %q; want Failed in Storing naming producer/a.txt, a digest mismatch and the recorded digest", j.State(), j.Status.Message)
	}
	if v, err := r.p.Primary().Latest(t.Context(), j.Identifiers.PrimaryID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("storage holds version %d of the object (%v), want none", v.Number, err)
	}
}

// A digest record that cannot be read costs a second hash, not the job:
// Processing hashes every file, as before there were records.
func TestUnreadableRecordIsHashedAgain(t *testing.T) {
	t.Parallel()
	files := object{"a.txt": []byte("alpha\n")}
	logs := &logtest.Buffer{}
	var r *rig
	r = newRig(t, nil, withLogs(t, logs), beforeStep(queue.Processing, func(j *queue.Job) {
		if err := os.WriteFile(filepath.Join(r.data, "work", j.ID, "file-digests.json"), []byte("[{torn"), 0o644); err != nil {
			t.Error(err)
		}
	}))
	j := r.deposit("/obj.checkm", files)
	r.checkStored(j, files)
	logs.WaitFor(t, "the digest record is unreadable", "job="+j.ID)
}
