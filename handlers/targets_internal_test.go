package handlers

import (
	"strings"
	"testing"

	"github.com/ingestq/ingestq/internal/s3test"
)

// A storage URL that is no form of a target names every form, the
// storage services' too; one of a right form that fails to open says why
// alone. Before, every failure ended "; or http(s)://… for a storage
// service": an S3 endpoint without TLS, named without secure=false, read
// as if the URL's form were wrong.
func TestStorageFormsNamedOnlyForAURLOfNoForm(t *testing.T) {
	var p Pipeline
	_, err := p.openStore(t.Context(), "ftp://example.org/ocfl", true)
	if err == nil || !strings.Contains(err.Error(), "s3://bucket/prefix") || !strings.Contains(err.Error(), "http(s)://… for a storage service") {
		t.Errorf("ftp:// storage: %v; want the forms named, a storage service's among them", err)
	}
	srv := s3test.Start(t)
	srv.SetEnv(t)
	url := strings.TrimSuffix(srv.URL(srv.Addr, "ocfl"), "&secure=false")
	_, err = p.openStore(t.Context(), url, true)
	if err == nil || !strings.Contains(err.Error(), "&secure=false") || strings.Contains(err.Error(), "storage service") {
		t.Errorf("S3 without TLS, secure=false left out: %v; want it to name &secure=false, and no other form", err)
	}
}
