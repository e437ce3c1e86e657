// Package storagetest runs ingestq's storage service for a test: the
// protocol's one server (storage.NewServer) over a Local store in a
// temporary folder, on a free port.
package storagetest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/handlers/storage"
)

// Service is a running storage service.
type Service struct {
	URL string // its endpoint, a storage target
	dir string // the Local store's folder
}

// Start serves a Local store through wrap (the server itself when wrap is
// nil: wrap plays an older or a faulty service) until the test ends.
func Start(t testing.TB, wrap func(http.Handler) http.Handler) *Service {
	t.Helper()
	dir := t.TempDir()
	local, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := storage.NewServer(local, nil)
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &Service{URL: srv.URL, dir: dir}
}

// File is where the service keeps file name of version n of ark: a test
// damages it there.
func (s *Service) File(ark string, n int, name string) string {
	folder := strings.NewReplacer(":/", "_", ":", "_", "/", "_").Replace(ark)
	return filepath.Join(s.dir, folder, fmt.Sprintf("v%04d", n), filepath.FromSlash(name))
}
