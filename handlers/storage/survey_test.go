package storage

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
)

// The service's answers to an audit: every version of an object, each
// file's bytes by version; a bad question is a 400 naming what is wrong,
// a version or file the object lacks a 404 naming it.
func TestServerSurveyAndContent(t *testing.T) {
	srv, _, _ := newServer(t)
	h := NewHTTP(srv.URL, testClient())
	for _, content := range []string{"one", "two"} {
		if _, err := h.Put(t.Context(), Object{ARK: testARK, Files: workFiles(t, map[string]string{"a.txt": content})}); err != nil {
			t.Fatal(err)
		}
	}
	stored, err := h.Survey(t.Context(), testARK)
	if err != nil {
		t.Fatal(err)
	}
	vs := stored.Versions()
	if len(vs) != 2 || vs[0].Number != 1 || vs[1].Number != 2 || vs[0].Files[0].SHA256 != digest([]byte("one")) {
		t.Fatalf("versions %+v, want 1 and 2, the first holding \"one\"", vs)
	}
	rc, err := stored.Open(t.Context(), 1, "a.txt")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(got) != "one" {
		t.Errorf("version 1 of a.txt: %q (%v), want \"one\"", got, err)
	}
	if _, err := stored.Open(t.Context(), 1, "b.txt"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `has no file \"b.txt\"`) {
		t.Errorf("a file the version lacks: %v, want ErrNotFound naming it", err)
	}
	if _, err := h.Survey(t.Context(), "ark:/99999/fk4none"); !errors.Is(err, ErrNotFound) {
		t.Errorf("survey of an object not stored: %v, want ErrNotFound", err)
	}

	ark := url.PathEscape(testARK)
	for _, c := range []struct {
		path   string
		status int
		says   string
	}{
		{"/objects/" + ark + "?versions=some", http.StatusBadRequest, `versions "some": want all`},
		{"/content/" + ark + "?version=x&file=a.txt", http.StatusBadRequest, `version "x": want a version number`},
		{"/content/" + ark + "?version=0&file=a.txt", http.StatusBadRequest, `version "0"`},
		{"/content/" + ark + "?version=1&file=..%2Fx", http.StatusBadRequest, `file: file name "../x" has a ".." element`},
		{"/content/" + ark + "?version=1", http.StatusBadRequest, "file: empty file name"},
		{"/content/" + ark + "?version=3&file=a.txt", http.StatusNotFound, testARK + " has no version 3"},
		{"/objects/ark:%2F99999%2Ffk4none", http.StatusNotFound, "no version of ark:/99999/fk4none"},
	} {
		resp, err := http.Get(srv.URL + c.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(body), c.says) {
			t.Errorf("GET %s: %s %q, want %d saying %q", c.path, resp.Status, body, c.status, c.says)
		}
	}
}

// The access queue's read of a service: a file whose stored copy is gone
// fails it, naming the file (Survey gives it Absent); a service that
// answers versions=all with the latest version gives that version alone,
// as a LatestOnly, whose bytes it serves if it has the content call and
// whose missing content call is named.
func TestHTTPReadForAccess(t *testing.T) {
	srv, l, _ := newServer(t)
	h := NewHTTP(srv.URL, testClient())
	for _, content := range []string{"one", "two"} {
		if _, err := h.Put(t.Context(), Object{ARK: testARK, Files: workFiles(t, map[string]string{"a.txt": content, "b.txt": "b"})}); err != nil {
			t.Fatal(err)
		}
	}
	o, err := h.Read(t.Context(), testARK)
	if _, latestOnly := o.(LatestOnly); err != nil || len(o.Versions()) != 2 || latestOnly {
		t.Fatalf("read: %v, want both versions", err)
	}
	gone, err := l.StoredFile(testARK, 1, "a.txt")
	if err == nil {
		err = os.Remove(gone)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Read(t.Context(), testARK); err == nil || !strings.Contains(err.Error(), `the stored copy of file "a.txt" of version 1 is gone`) {
		t.Errorf("read with a copy gone: %v, want an error naming it", err)
	}
	if _, err := h.Survey(t.Context(), testARK); err != nil {
		t.Errorf("survey with a copy gone: %v, want its size Absent", err)
	}

	for _, content := range []bool{true, false} {
		old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/content/") && !content {
				http.NotFound(w, r)
				return
			}
			if strings.HasPrefix(r.URL.Path, "/objects/") {
				r.URL.RawQuery = ""
			}
			srv.Config.Handler.ServeHTTP(w, r)
		}))
		defer old.Close()
		o, err := NewHTTP(old.URL, testClient()).Read(t.Context(), testARK)
		lo, ok := o.(LatestOnly)
		if err != nil || !ok || !errors.Is(lo.Why(), ErrLatestOnly) || len(o.Versions()) != 1 || o.Versions()[0].Number != 2 {
			t.Fatalf("read from a latest-only service: %v %v, want version 2 alone, a LatestOnly", o, err)
		}
		rc, err := o.Open(t.Context(), 2, "a.txt")
		if !content {
			if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), old.URL+" serves each object's latest version alone, and may be older") {
				t.Errorf("a service without the content call: %v, want ErrNotFound saying why", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || string(got) != "two" {
			t.Errorf("version 2 of a.txt: %q (%v), want \"two\"", got, err)
		}
	}
}
