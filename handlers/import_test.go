package handlers_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/reactor"
)

// A data folder written before OCFL (versions as plain folders under
// storage/) is imported into the OCFL root when the pipeline starts, once:
// the old folder is renamed, and its objects are read from OCFL.
func TestPreOCFLStoreImported(t *testing.T) {
	t.Parallel()
	const ark = "ark:/99999/fk4old0001"
	data := []byte("written before OCFL\n")
	src := filepath.Join(t.TempDir(), "a.txt")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, nil, func(hc *handlers.Config, _ *reactor.Config) {
		old, err := storage.NewLocal(filepath.Join(hc.DataDir, "storage"))
		if err == nil {
			_, err = old.Put(context.Background(), storage.Object{ARK: ark, Files: []storage.File{
				{Name: "producer/a.txt", Path: src, Size: int64(len(data)), SHA256: sha256hex(data)}}})
		}
		if err != nil {
			t.Fatal(err)
		}
	})
	v, err := r.p.Primary().Latest(context.Background(), ark)
	if err != nil || v.Number != 1 || len(v.Files) != 1 || v.Files[0].SHA256 != sha256hex(data) {
		t.Fatalf("imported object %+v (%v), want version 1 with producer/a.txt", v, err)
	}
	if _, err := os.Stat(filepath.Join(r.data, "storage")); !os.IsNotExist(err) {
		t.Errorf("the old store is still in place (%v); want it renamed", err)
	}
	if _, err := os.Stat(filepath.Join(r.data, "storage.imported")); err != nil {
		t.Errorf("the old store was not kept as storage.imported: %v", err)
	}
}
