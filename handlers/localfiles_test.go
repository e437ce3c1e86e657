package handlers_test

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/reactor/queue"
)

// A local path (a file: URL, as submit makes it) is read only for a profile
// that allows local files, for the payload and for the files it lists.
func TestLocalFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := []byte("on this host's disk\n")
	if err := os.WriteFile(filepath.Join(dir, "local.txt"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	fileURL := func(name string) string { return (&url.URL{Scheme: "file", Path: filepath.Join(dir, name)}).String() }
	m := manifest("mrt-ingest-manifest", fileRow(fileURL("local.txt"), "local.txt", data))
	if err := os.WriteFile(filepath.Join(dir, "obj.checkm"), m, 0o600); err != nil {
		t.Fatal(err)
	}

	trusted := profile.Default()
	trusted.AllowLocalFiles = true
	r := newRig(t, trusted)
	b := r.submit(fileURL("obj.checkm"))
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("trusted profile: batch %s %q", b.State(), b.Status.Message)
	}
	r.checkStored(r.jobsOf(b.ID)["manifest"], object{"local.txt": data})

	// The same payload for the built-in profile, which does not allow them.
	plain := newRig(t, nil)
	b = plain.submit(fileURL("obj.checkm"))
	if b = plain.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Failed ||
		!strings.Contains(b.Status.Message, `scheme "file" not allowed`) {
		t.Fatalf("plain profile: batch %s %q, want Failed refusing the file: scheme", b.State(), b.Status.Message)
	}
	// And an http manifest listing a local file: the job fails in Downloading.
	b = plain.submit(plain.content.put("/obj.checkm", m))
	plain.waitBatch(b.ID, queue.Completed, queue.Failed)
	if j := plain.jobsOf(b.ID)["manifest"]; j.State() != queue.Failed || !strings.HasPrefix(j.Status.Message, "Downloading: producer/local.txt") {
		t.Fatalf("a listed local file: job %s %q, want Failed in Downloading naming the file", j.State(), j.Status.Message)
	}
}
