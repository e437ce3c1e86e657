package place

import (
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
