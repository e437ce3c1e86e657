// Package storagetest runs ingestq's storage service for a test: the
// protocol's one server (storage.NewServer) over a Local store in a
// temporary folder, on a free port.
package storagetest

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ingestq/ingestq/handlers/storage"
)

// Service is a running storage service.
type Service struct {
	URL   string // its endpoint, a storage target
	local *storage.Local
	t     testing.TB
}

// Start serves a Local store through wrap (the server itself when wrap is
// nil: wrap plays an older or a faulty service) until the test ends.
func Start(t testing.TB, wrap func(http.Handler) http.Handler) *Service {
	t.Helper()
	local, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := storage.NewServer(local, nil)
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &Service{URL: srv.URL, local: local, t: t}
}

// File is where the service keeps file name of version n of ark: a test
// damages it there. The store says where, by its own layout.
func (s *Service) File(ark string, n int, name string) string {
	s.t.Helper()
	path, err := s.local.StoredFile(ark, n, name)
	if err != nil {
		s.t.Fatal(err)
	}
	return path
}
