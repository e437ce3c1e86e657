package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// fakeService is an inventory service kept in a Local database.
type fakeService struct {
	srv *httptest.Server
	db  *Local

	mu      sync.Mutex
	posts   int
	fail503 int // next POSTs answered 503
	refuse  int // when non-zero, the status every POST gets
}

func newFakeService(t *testing.T) *fakeService {
	db, _ := openTemp(t)
	s := &fakeService{db: db}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /records", s.record)
	mux.HandleFunc("GET /localids/{profile}/{localid}", s.lookup)
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	return s
}

func (s *fakeService) record(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.posts++
	refuse, fail := s.refuse, s.fail503 > 0
	if fail {
		s.fail503--
	}
	s.mu.Unlock()
	switch {
	case refuse != 0:
		http.Error(w, "refused by policy", refuse)
		return
	case fail:
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	var rec Record
	if err := json.NewDecoder(r.Body).Decode(&rec); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	err := s.db.Record(r.Context(), rec)
	switch {
	case errors.Is(err, ErrConflict):
		http.Error(w, err.Error(), http.StatusConflict)
	case err != nil:
		http.Error(w, err.Error(), http.StatusUnprocessableEntity)
	default:
		w.WriteHeader(http.StatusCreated)
	}
}

func (s *fakeService) lookup(w http.ResponseWriter, r *http.Request) {
	ark, ok, err := s.db.LookupLocalID(r.Context(), r.PathValue("profile"), r.PathValue("localid"))
	switch {
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadRequest)
	case !ok:
		http.Error(w, "no such local id", http.StatusNotFound)
	default:
		_ = json.NewEncoder(w).Encode(map[string]string{"ark": ark})
	}
}

func (s *fakeService) postCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.posts
}

func testClient() *retryablehttp.Client {
	c := retryablehttp.NewClient()
	c.Logger = nil
	c.RetryMax = 2
	c.RetryWaitMin = time.Millisecond
	c.RetryWaitMax = 5 * time.Millisecond
	return c
}

func TestHTTPRecordAndLookup(t *testing.T) {
	ctx := context.Background()
	s := newFakeService(t)
	h := NewHTTP(s.srv.URL+"/", testClient())
	r := record(arkA, 1, "one", "loc/with slash?", "loc-1")
	r.Profile = "odd profile/x"
	mustRecord(t, h, r)
	mustRecord(t, h, r) // again: idempotent through the service too

	vs, err := s.db.Versions(ctx, arkA)
	if err != nil || len(vs) != 1 || vs[0].Job != r.Job {
		t.Fatalf("service holds %+v, %v; want the one record", vs, err)
	}
	for _, id := range r.LocalIDs {
		ark, ok, err := h.LookupLocalID(ctx, r.Profile, id)
		if err != nil || !ok || ark != arkA {
			t.Fatalf("lookup %q = %q, %v, %v; want %s", id, ark, ok, err, arkA)
		}
	}
	if ark, ok, err := h.LookupLocalID(ctx, r.Profile, "loc-unknown"); err != nil || ok || ark != "" {
		t.Fatalf("lookup of an unknown id = %q, %v, %v; want none", ark, ok, err)
	}
}

func TestHTTPRecordRetriedAfter503(t *testing.T) {
	s := newFakeService(t)
	s.fail503 = 1
	h := NewHTTP(s.srv.URL, testClient())
	mustRecord(t, h, record(arkA, 1, "one", "loc-1"))
	if n := s.postCount(); n != 2 {
		t.Fatalf("service saw %d posts, want 2", n)
	}
	if vs, _ := s.db.Versions(context.Background(), arkA); len(vs) != 1 {
		t.Fatalf("service holds %d versions, want 1", len(vs))
	}
}

func TestHTTPServiceDown(t *testing.T) {
	s := newFakeService(t)
	s.srv.Close()
	h := NewHTTP(s.srv.URL, testClient())
	err := h.Record(context.Background(), record(arkA, 1, "one"))
	if err == nil || Refused(err) || !strings.Contains(err.Error(), s.srv.URL+"/records") {
		t.Fatalf("record at a closed service: %v, want an error naming the endpoint", err)
	}
	_, _, err = h.LookupLocalID(context.Background(), profile, "loc-1")
	if err == nil || !strings.Contains(err.Error(), s.srv.URL+"/localids/") {
		t.Fatalf("lookup at a closed service: %v, want an error naming the endpoint", err)
	}
}

func TestHTTPLocalIDConflict(t *testing.T) {
	s := newFakeService(t)
	h := NewHTTP(s.srv.URL, testClient())
	mustRecord(t, h, record(arkA, 1, "one", "loc-1"))
	err := h.Record(context.Background(), record(arkB, 1, "bee", "loc-1"))
	if !errors.Is(err, ErrConflict) || Refused(err) {
		t.Fatalf("a taken local id through the service: %v, want ErrConflict", err)
	}
	if !strings.Contains(err.Error(), arkA) || !strings.Contains(err.Error(), s.srv.URL) {
		t.Fatalf("error %q does not carry the service's reason and endpoint", err)
	}
}

// A refusal carries the status and the answer, and names the service
// with its password masked.
func TestHTTPRefused(t *testing.T) {
	s := newFakeService(t)
	s.refuse = http.StatusForbidden
	h := NewHTTP(strings.Replace(s.srv.URL, "http://", "http://ingest:s3cret@", 1), testClient())
	err := h.Record(context.Background(), record(arkA, 1, "one"))
	if !Refused(err) || errors.Is(err, ErrConflict) {
		t.Fatalf("a 403: %v, want Refused", err)
	}
	if !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "refused by policy") ||
		!strings.Contains(err.Error(), "ingest:xxxxx@") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error %q does not carry the status and the answer, or shows the password", err)
	}
	if n := s.postCount(); n != 1 {
		t.Fatalf("a refusal was sent %d times, want once", n)
	}
}

// An error names the service by its endpoint, password masked, whatever
// the request's path holds: an answer without the version asked named the
// endpoint as configured, password and all; and a local id may hold "@",
// which redacting the whole request URL took for a password's end, hiding
// the service's host ("http://127.0.0.1:xxxxx@example.org").
func TestHTTPErrorsNameTheServiceAsShown(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/objects/") {
			_, _ = w.Write([]byte(`{"object":{"ark":"` + arkA + `"},"versions":[]}`))
			return
		}
		_, _ = w.Write([]byte(`{"ark":""}`)) // a look-up's answer without its ARK
	}))
	t.Cleanup(srv.Close)
	withPassword := strings.Replace(srv.URL, "http://", "http://ingest:s3cret@", 1)
	masked := strings.Replace(srv.URL, "http://", "http://ingest:xxxxx@", 1)
	_, err := NewHTTP(withPassword, testClient()).Latest(t.Context(), arkA)
	if err == nil || !strings.Contains(err.Error(), "at "+masked+": the answer has no version") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("latest from an answer without versions: %v, want an error naming %s", err, masked)
	}
	const localID = "someone@example.org"
	_, _, err = NewHTTP(srv.URL, testClient()).LookupLocalID(t.Context(), profile, localID)
	if err == nil || !strings.Contains(err.Error(), srv.URL+"/localids/") {
		t.Errorf("look-up of %s answered without an ARK: %v, want an error naming %s/localids/…", localID, err, srv.URL)
	}
}

func TestHTTPServerErrorsExhaustRetries(t *testing.T) {
	s := newFakeService(t)
	s.fail503 = 100
	h := NewHTTP(s.srv.URL, testClient())
	err := h.Record(context.Background(), record(arkA, 1, "one"))
	if err == nil || Refused(err) || !strings.Contains(err.Error(), s.srv.URL+"/records") {
		t.Fatalf("record at a failing service: %v", err)
	}
	if n := s.postCount(); n != 3 {
		t.Fatalf("service saw %d posts, want 3 (1 + 2 retries)", n)
	}
}

// A page out of order, not after after, or over the limit would make a
// walk skip objects or never end: the client refuses it, naming the
// service. A service without the route (a 404) is said to list nothing.
func TestHTTPListChecksThePage(t *testing.T) {
	for _, c := range []struct {
		name, answer, after string
		limit               int
		want                string
	}{
		{"out of order", `[{"ark":"ark:/b"},{"ark":"ark:/a"}]`, "", 5, `lists "ark:/a" after "ark:/b": not in ARK order`},
		{"not after after", `[{"ark":"ark:/a"}]`, "ark:/a", 5, `lists "ark:/a" after "ark:/a": not in ARK order`},
		{"over the limit", `[{"ark":"ark:/a"},{"ark":"ark:/b"}]`, "", 1, "the answer has 2 objects, more than the limit 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = w.Write([]byte(c.answer))
			}))
			t.Cleanup(srv.Close)
			page, err := NewHTTP(srv.URL, testClient()).List(context.Background(), c.after, c.limit)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), srv.URL+"/objects?") {
				t.Fatalf("List = %+v, %v; want an error naming the service and saying %q", page, err, c.want)
			}
		})
	}
	s := newFakeService(t)
	_, err := NewHTTP(s.srv.URL, testClient()).List(context.Background(), "", 1)
	if err == nil || !strings.Contains(err.Error(), "the service lists no objects") {
		t.Fatalf("List at a service without the route: %v", err)
	}
}
