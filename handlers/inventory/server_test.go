package inventory

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
)

// newServer serves a fresh Local inventory and returns a client of it.
func newServer(t *testing.T) (*httptest.Server, *Local, *HTTP) {
	t.Helper()
	l, _ := openTemp(t)
	srv := httptest.NewServer(NewServer(l, nil)) // nil log: the tests assert on answers
	t.Cleanup(srv.Close)
	return srv, l, NewHTTP(srv.URL, testClient())
}

func TestServerRecordAndLookup(t *testing.T) {
	ctx := context.Background()
	_, l, h := newServer(t)
	odd := "a b/c?d"
	r := record(arkA, 1, "one", odd, "50% #1", "loc-1")
	r.Profile = odd
	mustRecord(t, h, r)
	mustRecord(t, h, r) // again: idempotent through the server

	vs, err := l.Versions(ctx, arkA)
	if err != nil || len(vs) != 1 || vs[0].Job != r.Job || vs[0].Profile != odd {
		t.Fatalf("server holds %+v, %v; want the one record", vs, err)
	}
	for _, id := range r.LocalIDs {
		ark, ok, err := h.LookupLocalID(ctx, odd, id)
		if err != nil || !ok || ark != arkA {
			t.Fatalf("lookup %q = %q, %v, %v; want %s", id, ark, ok, err, arkA)
		}
	}
	for _, q := range [][2]string{{odd, "a b/c?e"}, {"a b/c", "d"}, {"a b", "c?d"}} {
		if ark, ok, err := h.LookupLocalID(ctx, q[0], q[1]); err != nil || ok || ark != "" {
			t.Fatalf("lookup %q = %q, %v, %v; want none", q, ark, ok, err)
		}
	}
}

func TestHTTPConformance(t *testing.T) {
	runConformance(t, func(t *testing.T) Inventory { _, _, h := newServer(t); return h })
}

// A record contradicting the inventory is refused, not a local id conflict.
func TestServerMismatchIsRefused(t *testing.T) {
	ctx := context.Background()
	_, l, h := newServer(t)
	mustRecord(t, h, record(arkA, 1, "one", "loc-1"))
	err := h.Record(ctx, record(arkA, 1, "two", "loc-1"))
	if !Refused(err) || errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "422") ||
		!strings.Contains(err.Error(), "contradicts the inventory") {
		t.Fatalf("other content for a recorded version: %v, want a 422 refusal", err)
	}
	if vs, _ := l.Versions(ctx, arkA); len(vs) != 1 || vs[0].Job != "jid-one" {
		t.Fatalf("the first record was not kept: %+v", vs)
	}
}

func TestServerRejectsBadRequests(t *testing.T) {
	srv, l, _ := newServer(t)
	huge := `{"ark":"` + strings.Repeat("x", maxRecordBody) + `"}`
	for _, c := range []struct {
		name, body string
		status     int
		want       string
	}{
		{"not JSON", "ark", http.StatusBadRequest, "record body"},
		{"two values", `{} {}`, http.StatusBadRequest, "more than one JSON value"},
		{"no version", `{"ark":"ark:/99999/x","profile":"p"}`, http.StatusBadRequest, "version is not in 1.."},
		{"too large", huge, http.StatusRequestEntityTooLarge, "larger than 16777216 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, err := http.Post(srv.URL+"/records", "application/json", strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			answer := readAnswer(t, resp)
			if resp.StatusCode != c.status || !strings.Contains(answer, c.want) {
				t.Fatalf("answer %s %q, want %d with %q", resp.Status, answer, c.status, c.want)
			}
		})
	}
	if objs, err := l.List(context.Background(), "", 1); err != nil || len(objs) != 0 {
		t.Fatalf("inventory holds %+v (%v) after bad requests", objs, err)
	}

	resp, err := http.Get(srv.URL + "/localids/" + url.PathEscape(profile) + "/a%00b")
	if err != nil {
		t.Fatal(err)
	}
	if answer := readAnswer(t, resp); resp.StatusCode != http.StatusBadRequest || !strings.Contains(answer, "NUL") {
		t.Fatalf("lookup with a NUL: %s %q, want 400", resp.Status, answer)
	}
}

func readAnswer(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A service that knows no ?versions=latest (one written before it) answers
// every version: the client's Latest takes the last.
func TestLatestFromAServiceThatAnswersEveryVersion(t *testing.T) {
	l, _ := openTemp(t)
	older := NewServer(l, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.URL.RawQuery = "" // the parameter unknown to it
		older.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	h := NewHTTP(srv.URL, testClient())
	mustRecord(t, h, record(arkA, 1, "one"))
	mustRecord(t, h, record(arkA, 2, "two"))
	if r, err := h.Latest(context.Background(), arkA); err != nil || r.Version != 2 || r.Job != "jid-two" {
		t.Fatalf("Latest = %+v, %v; want version 2", r, err)
	}
}

// limitSpy is an inventory that notes the limit each List is asked.
type limitSpy struct {
	Inventory
	mu     sync.Mutex
	limits []int
}

func (s *limitSpy) List(ctx context.Context, after string, limit int) ([]ObjectRow, error) {
	s.mu.Lock()
	s.limits = append(s.limits, limit)
	s.mu.Unlock()
	return s.Inventory.List(ctx, after, limit)
}

// The server gives at most MaxPage rows a page: a larger limit, or none,
// is asked of the inventory as MaxPage. A limit that is no number, or
// below 1, is a 400 naming it. An empty page is [].
func TestServerCapsThePage(t *testing.T) {
	l, _ := openTemp(t)
	spy := &limitSpy{Inventory: l}
	srv := httptest.NewServer(NewServer(spy, nil))
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		query  string
		status int
		want   string
	}{
		{"", http.StatusOK, "[]"},
		{"?limit=5000", http.StatusOK, "[]"},
		{"?after=ark:/99999/x&limit=3", http.StatusOK, "[]"},
		{"?limit=x", http.StatusBadRequest, `list of objects after "": limit "x" is not a whole number`},
		{"?limit=0", http.StatusBadRequest, `list of objects after "": limit 0 is below 1`},
	} {
		resp, err := http.Get(srv.URL + "/objects" + c.query)
		if err != nil {
			t.Fatal(err)
		}
		if answer := strings.TrimSpace(readAnswer(t, resp)); resp.StatusCode != c.status || !strings.Contains(answer, c.want) {
			t.Errorf("GET /objects%s: %s %q, want %d with %q", c.query, resp.Status, answer, c.status, c.want)
		}
	}
	spy.mu.Lock()
	defer spy.mu.Unlock()
	if want := []int{MaxPage, MaxPage, 3, 0}; !slices.Equal(spy.limits, want) {
		t.Fatalf("the inventory was asked limits %v, want %v", spy.limits, want)
	}
}
