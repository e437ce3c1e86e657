package audit_test

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/ingestq/ingestq/handlers/audit"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/internal/storagetest"
)

// service is ingestq's storage service, as a replica target of the
// bench, and its client.
type service struct {
	*storagetest.Service
	store *storage.HTTP
}

// startService starts the service (through wrap: storagetest.Start) and
// its client, which does not retry.
func startService(t *testing.T, wrap func(http.Handler) http.Handler) *service {
	t.Helper()
	s := storagetest.Start(t, wrap)
	client := retryablehttp.NewClient()
	client.Logger, client.RetryMax = nil, 0
	t.Cleanup(client.HTTPClient.CloseIdleConnections)
	return &service{s, storage.NewHTTP(s.URL, client)}
}

// serviceBench is the bench with an OCFL root as its primary and the
// service as its replica, two objects of two versions deposited in both:
// in the service, version 1 of the first has a file's bytes changed at the
// same size, and version 1 of the second has lost a file.
func serviceBench(t *testing.T, s *service) (b *bench, changed, lost string) {
	t.Helper()
	b = newBench(t, "", t.TempDir())
	primary := b.targets[0]
	b.targets = []string{primary, s.URL}
	b.a.Targets = func(context.Context, string) ([]audit.Target, error) {
		return []audit.Target{{Name: primary, URL: primary, Store: b.stores[0]}, {Name: s.URL, URL: s.URL, Store: s.store}}, nil
	}
	b.a.Agent = "ingestq test on host1"
	changed, lost = "ark:/99999/fk4a", "ark:/99999/fk4b"
	for _, ark := range []string{changed, lost} {
		for n, a := range []string{"one", "two"} {
			files := b.put(ark, object{"a.txt": a, "sub/b.txt": "beta"}, 0)
			if _, err := s.store.Put(t.Context(), storage.Object{ARK: ark, Files: files}); err != nil {
				t.Fatal(err)
			}
			b.record(ark, profile, n+1, files)
		}
	}
	if err := os.WriteFile(s.File(changed, 1, "a.txt"), []byte("ONE"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(s.File(lost, 1, "sub/b.txt")); err != nil {
		t.Fatal(err)
	}
	return b, changed, lost
}

// ingestq's storage service serves every version: the audit compares each
// at the service as at an OCFL root (a file lost from an older version
// found without fixity, bytes changed there with it), reads the bytes
// back, and records a fixity check of each version there; no note.
func TestAuditComparesEveryVersionAtAStorageService(t *testing.T) {
	t.Parallel()
	s := startService(t, nil)
	b, changed, lost := serviceBench(t, s)

	got, sum := b.run(audit.Options{})
	b.check("without fixity", got, []want{{audit.FileMissing, lost, 1, 1, "sub/b.txt"}})
	if len(sum.Notes) != 0 {
		t.Errorf("without fixity: notes %q, want none: every version was compared", sum.Notes)
	}

	got, sum = b.run(audit.Options{Fixity: true, Record: true})
	b.check("with fixity", got, []want{{audit.FixityFailed, changed, 1, 1, "a.txt"}, {audit.FileMissing, lost, 1, 1, "sub/b.txt"}})
	// Each object's three contents (10 bytes) once at each target: at the
	// service, the lost file's content is read from version 2.
	if want := int64(4 * 10); sum.BytesRead != want || sum.EventsRecorded != 8 || len(sum.Notes) != 0 {
		t.Errorf("with fixity: %+v, want %d bytes read back, 8 events (2 versions of 2 objects at 2 targets), no note", sum, want)
	}
	d, err := b.inv.Object(t.Context(), changed)
	if err != nil {
		t.Fatal(err)
	}
	var atService []inventory.Event
	for _, e := range d.Versions[0].Events {
		if strings.HasPrefix(e.Detail, "audit with fixity at storage target "+s.URL+":") {
			atService = append(atService, e)
		}
	}
	if len(atService) != 1 || atService[0].Outcome != inventory.OutcomeFailure || !strings.Contains(atService[0].Detail, `"a.txt" (fixity-failed)`) {
		t.Errorf("version 1 of %s: events at the service %+v, want one failure naming a.txt", changed, atService)
	}
}

// A storage service that answers every question with the latest version
// (one older than ingestq's) is compared at that version alone, and the
// summary says so plainly; it gets no fixity check event.
func TestAuditOfALatestOnlyStorageService(t *testing.T) {
	t.Parallel()
	s := startService(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.URL.RawQuery = "" // as a service that knows no versions=all
			h.ServeHTTP(w, r)
		})
	})
	b, _, _ := serviceBench(t, s)
	got, sum := b.run(audit.Options{Fixity: true, Record: true})
	b.check("a latest-only service", got, nil)
	if len(sum.Notes) != 1 || !strings.Contains(sum.Notes[0], s.URL+" is a storage service that serves each object's latest version alone: "+
		"only the latest version was compared there") || sum.EventsRecorded != 4 {
		t.Errorf("summary %+v: want one note saying only the latest version was compared at %s, and 4 events (the primary's)", sum, s.URL)
	}
}
