package place

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/internal/s3test"
)

func TestPlaceKind(t *testing.T) {
	for rawURL, want := range map[string][2]string{
		"/var/lib/ingestq/ocfl":        {"local", "/var/lib/ingestq/ocfl"},
		"data/ocfl":                    {"local", "data/ocfl"},
		"file:///var/lib/ingestq/ocfl": {"local", "/var/lib/ingestq/ocfl"},
		"file://localhost/srv/a%20b":   {"local", "/srv/a b"},
		"s3://bucket/p?endpoint=h:1":   {"s3", "s3://bucket/p?endpoint=h:1"},
		"s3://bucket":                  {"s3", "s3://bucket"},
	} {
		kind, target, err := placeKind(rawURL)
		if err != nil || kind != want[0] || target != want[1] {
			t.Errorf("%s: %s %q, %v; want %s %q", rawURL, kind, target, err, want[0], want[1])
		}
	}
	for _, rawURL := range []string{"", "https://store.example/ocfl", "file://host/srv", "file:///srv?x=1", "gs://b/p"} {
		_, _, err := placeKind(rawURL)
		if err == nil || !strings.Contains(err.Error(), "s3://bucket/prefix") || !strings.Contains(err.Error(), rawURL) {
			t.Errorf("%q: got %v, want an error naming the URL and the accepted forms", rawURL, err)
		}
	}
}

func TestOpenS3(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	p, err := Open(t.Context(), srv.URL(srv.Addr, "a/b"))
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := p.(*S3); !ok || s.String() != "s3://test/a/b" {
		t.Fatalf("Open gave %T %v, want the S3 place s3://test/a/b", p, p)
	}
	if _, err := Open(t.Context(), "s3://missing/a?endpoint="+srv.Addr+"&secure=false"); err == nil ||
		!strings.Contains(err.Error(), `no bucket "missing"`) {
		t.Fatalf("open of a missing bucket: %v", err)
	}
}

func TestOpenFolder(t *testing.T) {
	dir := t.TempDir()
	for _, rawURL := range []string{dir, "file://" + dir} {
		p, err := Open(t.Context(), rawURL)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := p.(*Local); !ok {
			t.Fatalf("Open(%q) gave %T, want *Local", rawURL, p)
		}
	}
}

// OpenExisting makes nothing: a missing folder is fs.ErrNotExist and stays
// missing, a file is not a folder.
func TestOpenExistingMakesNoFolder(t *testing.T) {
	dir := t.TempDir()
	if p, err := OpenExisting(t.Context(), "file://"+dir); err != nil || p.String() != dir {
		t.Errorf("OpenExisting of a folder: %v, %v", p, err)
	}
	missing := filepath.Join(dir, "mistyped")
	if _, err := OpenExisting(t.Context(), missing); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("OpenExisting of a missing folder: %v, want fs.ErrNotExist naming it", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("OpenExisting made %s: %v", missing, err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenExisting(t.Context(), file); err == nil || !strings.Contains(err.Error(), file+": not a folder") {
		t.Errorf("OpenExisting of a file: %v, want not a folder", err)
	}
}
