package handlers_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// A data folder written before OCFL (versions as plain folders under
// storage/) is imported into the OCFL root when the pipeline starts, once:
// the old folder is renamed, and its objects are read from OCFL.
func TestPreOCFLStoreImported(t *testing.T) {
	t.Parallel()
	const ark = "ark:/99999/fk4old0001"
	data := []byte("written before OCFL\n")
	r := newRig(t, nil, withPreOCFLObject(t, ark, data))
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
