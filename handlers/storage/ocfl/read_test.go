package ocfl

import (
	"errors"
	"io"
	"testing"

	"github.com/ingestq/ingestq/handlers/storage"
)

// Read gives every version with its files and sizes, and each file's
// bytes as stored, deduplicated content included; what is not there is
// ErrNotFound, naming it.
func TestReadVersionsAndFiles(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	if _, err := s.Put(ctx, storage.Object{ARK: testARK, Files: workFiles(t, sample)}); err != nil {
		t.Fatal(err)
	}
	v2 := map[string]string{"producer/a.txt": "hello, archive\n", "producer/new.txt": "second version\n"}
	if _, err := s.Put(ctx, storage.Object{ARK: testARK, Files: workFiles(t, v2)}); err != nil {
		t.Fatal(err)
	}
	o, err := s.Read(ctx, testARK)
	if err != nil {
		t.Fatal(err)
	}
	vs := o.Versions()
	if len(vs) != 2 || vs[0].Number != 1 || vs[1].Number != 2 || len(vs[0].Files) != len(sample) || len(vs[1].Files) != 2 {
		t.Fatalf("versions %+v", vs)
	}
	for n, contents := range map[int]map[string]string{1: sample, 2: v2} {
		for _, f := range vs[n-1].Files {
			want := contents[f.Name]
			if f.Size != int64(len(want)) || f.SHA256 != digest([]byte(want)) {
				t.Errorf("v%d %s: size %d sha256 %s, want %d %s", n, f.Name, f.Size, f.SHA256, len(want), digest([]byte(want)))
			}
			r, err := o.Open(ctx, n, f.Name)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(r)
			r.Close()
			if err != nil || string(got) != want {
				t.Errorf("v%d %s: read %q (%v), want %q", n, f.Name, got, err, want)
			}
		}
	}
	for _, c := range []struct {
		n    int
		name string
	}{{3, "producer/a.txt"}, {0, "producer/a.txt"}, {2, "producer/sub/b.csv"}} {
		if _, err := o.Open(ctx, c.n, c.name); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("open v%d %s: %v, want not found", c.n, c.name, err)
		}
	}
	if _, err := s.Read(ctx, "ark:/99999/none"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("read of an unknown ARK: %v, want not found", err)
	}
}
