package storage

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeStorage is a storage service in memory. It speaks HTTP's protocol and
// checks every file it receives against the digests declared in "version".
type fakeStorage struct {
	srv *httptest.Server

	mu         sync.Mutex
	objects    map[string][]fakeVersion
	posts      int      // POSTs seen
	fail503    int      // next POSTs answered 503 after reading part of the body
	cut        int      // next POSTs whose connection is cut mid-body
	refuse     int      // when non-zero, the status every POST gets
	violations []string // bodies that broke the protocol
}

type fakeVersion struct {
	number  int
	created time.Time
	files   []File
	content map[string][]byte
}

// refusal is 200 bytes of body that must reach the error, then a tail that must not.
var refusal = "refused-because" + strings.Repeat(".", 175) + "0123456789"

func newFakeStorage(t *testing.T) *fakeStorage {
	s := &fakeStorage{objects: map[string][]fakeVersion{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /objects", s.post)
	mux.HandleFunc("GET /objects/{ark}", s.get)
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	return s
}

func (s *fakeStorage) post(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.posts++
	refuse, fail, cut := s.refuse, s.fail503 > 0, s.fail503 == 0 && s.cut > 0
	if fail {
		s.fail503--
	} else if cut {
		s.cut--
	}
	s.mu.Unlock()

	switch {
	case refuse != 0:
		http.Error(w, refusal+"TAIL-NOT-SHOWN", refuse)
		return
	case fail:
		_, _ = io.CopyN(io.Discard, r.Body, 1000)
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	case cut:
		_, _ = io.CopyN(io.Discard, r.Body, 1000)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	meta, content, err := readPut(r)
	if err != nil {
		s.mu.Lock()
		s.violations = append(s.violations, err.Error())
		s.mu.Unlock()
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}

	s.mu.Lock()
	versions := s.objects[meta.ARK]
	reply := putReply{ARK: meta.ARK}
	if n := len(versions); n > 0 && Unchanged(versions[n-1].files, meta.Files, meta.Describing) {
		reply.Number, reply.Created = versions[n-1].number, versions[n-1].created
	} else {
		reply.Number, reply.Created, reply.Changed = n+1, time.Now().UTC(), true
		s.objects[meta.ARK] = append(versions, fakeVersion{reply.Number, reply.Created, meta.Files, content})
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(reply)
}

// readPut parses and verifies one Put body.
func readPut(r *http.Request) (putRequest, map[string][]byte, error) {
	var meta putRequest
	mr, err := r.MultipartReader()
	if err != nil {
		return meta, nil, err
	}
	p, err := mr.NextPart()
	if err != nil || p.FormName() != "version" {
		return meta, nil, fmt.Errorf("first part is not version: %v", err)
	}
	if err := json.NewDecoder(p).Decode(&meta); err != nil {
		return meta, nil, fmt.Errorf("version part: %w", err)
	}
	content := map[string][]byte{}
	for i := 0; ; i++ {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return meta, nil, fmt.Errorf("part %d: %w", i, err)
		}
		// Part.FileName keeps only the base name; the protocol wants the path.
		_, params, err := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
		if err != nil || params["name"] != "file" {
			return meta, nil, fmt.Errorf("part %d is not a file: %v", i, err)
		}
		b, err := io.ReadAll(p)
		if err != nil {
			return meta, nil, fmt.Errorf("part %d: %w", i, err)
		}
		name := params["filename"]
		if i >= len(meta.Files) || meta.Files[i].Name != name {
			return meta, nil, fmt.Errorf("part %d is %q, not in the declared order", i, name)
		}
		if f := meta.Files[i]; int64(len(b)) != f.Size || digest(b) != f.SHA256 {
			return meta, nil, fmt.Errorf("file %q: %d bytes with sha256 %s, declared %d and %s", name, len(b), digest(b), f.Size, f.SHA256)
		}
		content[name] = b
	}
	if len(content) != len(meta.Files) {
		return meta, nil, fmt.Errorf("%d files sent, %d declared", len(content), len(meta.Files))
	}
	return meta, content, nil
}

func (s *fakeStorage) get(w http.ResponseWriter, r *http.Request) {
	ark := r.PathValue("ark")
	s.mu.Lock()
	versions := s.objects[ark]
	s.mu.Unlock()
	if len(versions) == 0 {
		http.Error(w, "no such object "+ark, http.StatusNotFound)
		return
	}
	last := versions[len(versions)-1]
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(Version{ARK: ark, Number: last.number, Created: last.created, Files: last.files})
}

// stored returns what the service holds for ark's latest version.
func (s *fakeStorage) stored(ark string) (fakeVersion, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	versions := s.objects[ark]
	if len(versions) == 0 {
		return fakeVersion{}, false
	}
	return versions[len(versions)-1], true
}

func (s *fakeStorage) counts() (posts int, violations string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.posts, strings.Join(s.violations, "; ")
}
