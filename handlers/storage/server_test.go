package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"os"
	"slices"
	"strings"
	"testing"
)

// newServer serves a fresh Local store; uploads go to the returned folder,
// so a test can see that none is left behind.
func newServer(t *testing.T) (*httptest.Server, *Local, string) {
	t.Helper()
	uploads := t.TempDir()
	t.Setenv("TMPDIR", uploads)
	l, _ := newLocal(t)
	srv := httptest.NewServer(NewServer(l, nil))
	t.Cleanup(srv.Close)
	return srv, l, uploads
}

// noUploadsLeft fails when a request left its temporary folder.
func noUploadsLeft(t *testing.T, uploads string) {
	t.Helper()
	entries, err := os.ReadDir(uploads)
	if err != nil || len(entries) != 0 {
		t.Fatalf("upload folder holds %v (%v), want nothing", entries, err)
	}
}

// sameBytes fails unless each stored file has its source's bytes.
func sameBytes(t *testing.T, stored, sources []File) {
	t.Helper()
	sameFiles(t, stored, sources)
	for i, f := range stored {
		got, err1 := os.ReadFile(f.Path)
		want, err2 := os.ReadFile(sources[i].Path)
		if err1 != nil || err2 != nil || !bytes.Equal(got, want) {
			t.Fatalf("file %q: stored bytes differ from the source (%v, %v)", f.Name, err1, err2)
		}
	}
}

func TestServerRoundTrip(t *testing.T) {
	ctx := context.Background()
	srv, l, uploads := newServer(t)
	h := NewHTTP(srv.URL, testClient())
	files := append(sampleFiles(t), bigFiles(t)[1]) // producer/big.bin, 600 KiB: many reads per part
	files = append(files, workFiles(t, map[string]string{`producer/say "hi".txt`: "quoted"})...)
	obj := Object{ARK: testARK, LocalIDs: []string{"loc-1"}, Files: files}

	v1, err := h.Put(ctx, obj)
	if err != nil {
		t.Fatal(err)
	}
	if v1.ARK != testARK || v1.Number != 1 || !v1.Changed {
		t.Fatalf("first put = %+v, want version 1 changed", v1)
	}
	stored, err := l.Latest(ctx, testARK)
	if err != nil {
		t.Fatal(err)
	}
	sameBytes(t, stored.Files, sortedFiles(files))

	again, err := h.Put(ctx, obj)
	if err != nil || again.Number != 1 || again.Changed {
		t.Fatalf("identical put = %+v, %v; want version 1 unchanged", again, err)
	}

	changed := workFiles(t, map[string]string{"producer/a.txt": "hello, archive, again\n"})
	v2, err := h.Put(ctx, Object{ARK: testARK, Files: changed})
	if err != nil || v2.Number != 2 || !v2.Changed {
		t.Fatalf("changed put = %+v, %v; want version 2 changed", v2, err)
	}
	latest, err := h.Latest(ctx, testARK)
	if err != nil {
		t.Fatal(err)
	}
	if latest.Number != 2 || !latest.Created.Equal(v2.Created) {
		t.Fatalf("latest = %+v, want version 2 created %v", latest, v2.Created)
	}
	sameFiles(t, latest.Files, changed)
	if latest.Files[0].Path != "" {
		t.Fatalf("the server leaked its path %q", latest.Files[0].Path)
	}
	if _, err := h.Latest(ctx, "ark:/99999/unknown"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("latest of an unknown ARK: %v, want ErrNotFound", err)
	}
	noUploadsLeft(t, uploads)

	// A client that does not escape the ARK's slashes is served too.
	resp, err := http.Get(srv.URL + "/objects/" + testARK)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw Version
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil || raw.ARK != testARK || raw.Number != 2 {
		t.Fatalf("GET with raw slashes: %s, %+v, %v", resp.Status, raw, err)
	}
}

func sortedFiles(files []File) []File {
	files = slices.Clone(files)
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	return files
}

// renamer is a transport that rewrites a name in the request body, standing
// in for a client that does not check names before sending.
type renamer struct {
	base     http.RoundTripper
	from, to string
}

func (rn renamer) RoundTrip(req *http.Request) (*http.Response, error) {
	b, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	b = bytes.ReplaceAll(b, []byte(rn.from), []byte(rn.to))
	out := req.Clone(req.Context())
	out.Body, out.ContentLength, out.GetBody = io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil
	return rn.base.RoundTrip(out)
}

func TestServerHostileNameIsRefused(t *testing.T) {
	srv, l, uploads := newServer(t)
	c := testClient()
	c.HTTPClient.Transport = renamer{srv.Client().Transport, "producer/a.txt", "../a.txt"}
	_, err := NewHTTP(srv.URL, c).Put(context.Background(), Object{ARK: testARK, Files: sampleFiles(t)})
	if !Refused(err) || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "../a.txt") {
		t.Fatalf("put of a hostile name: %v, want a 400 refusal naming it", err)
	}
	if arks, err := l.Objects(); err != nil || len(arks) != 0 {
		t.Fatalf("store holds %v (%v) after a refusal", arks, err)
	}
	noUploadsLeft(t, uploads)
}

// part is one part of a hand-made Put body.
type part struct {
	disposition string
	body        string
}

func versionPart(t *testing.T, files ...File) part {
	b, err := json.Marshal(putRequest{ARK: testARK, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	return part{`form-data; name="version"`, string(b)}
}

func filePart(name, body string) part {
	return part{multipart.FileContentDisposition("file", name), body}
}

func declare(name, content string) File {
	return File{Name: name, Size: int64(len(content)), SHA256: digest([]byte(content))}
}

func TestServerRejectsBadRequests(t *testing.T) {
	srv, l, uploads := newServer(t)
	a, b := declare("producer/a.txt", "hello"), declare("producer/b.txt", "bee")
	cases := []struct {
		name  string
		parts []part
		want  string // in the answer
	}{
		{"digest mismatch", []part{versionPart(t, a), filePart(a.Name, "HELLO")}, `file "producer/a.txt" has sha256`},
		{"too long", []part{versionPart(t, a), filePart(a.Name, "hello!")}, `file "producer/a.txt" is larger`},
		{"too short", []part{versionPart(t, a), filePart(a.Name, "hell")}, `file "producer/a.txt" has 4 bytes`},
		{"undeclared", []part{versionPart(t, a), filePart(a.Name, "hello"), filePart(b.Name, "bee")}, `file "producer/b.txt" was not declared`},
		{"not sent", []part{versionPart(t, a, b), filePart(a.Name, "hello")}, `file "producer/b.txt" declared but not sent`},
		{"sent twice", []part{versionPart(t, a), filePart(a.Name, "hello"), filePart(a.Name, "hello")}, `file "producer/a.txt" sent twice`},
		{"absolute name", []part{versionPart(t, declare("/etc/passwd", "x")), filePart("/etc/passwd", "x")}, `"/etc/passwd" is absolute`},
		{"file and folder", []part{versionPart(t, declare("a", "x"), declare("a/b", "y")), filePart("a", "x"), filePart("a/b", "y")}, `file "a" is also a folder`},
		{"version not first", []part{filePart(a.Name, "hello"), versionPart(t, a)}, `not "version"`},
		{"version too big", []part{{`form-data; name="version"`, strings.Repeat(" ", maxVersionPart+1)}}, "larger than 1048576"},
		{"not a file part", []part{versionPart(t, a), {`form-data; name="other"`, "hello"}}, "not a file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, answer := postParts(t, srv.URL, c.parts)
			if status != http.StatusBadRequest || !strings.Contains(answer, c.want) {
				t.Fatalf("answer %d %q, want 400 with %q", status, answer, c.want)
			}
		})
	}
	resp, err := http.Post(srv.URL+"/objects", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a JSON body: %s, want 400", resp.Status)
	}
	if arks, err := l.Objects(); err != nil || len(arks) != 0 {
		t.Fatalf("store holds %v (%v) after bad requests", arks, err)
	}
	noUploadsLeft(t, uploads)
}

// postParts posts a hand-made multipart body and returns the answer.
func postParts(t *testing.T, url string, parts []part) (int, string) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, p := range parts {
		w, err := mw.CreatePart(textproto.MIMEHeader{"Content-Disposition": {p.disposition}})
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, p.body)
	}
	mw.Close()
	resp, err := http.Post(url+"/objects", mw.FormDataContentType(), &body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(answer)
}

func TestServerLatestRejectsBadARK(t *testing.T) {
	srv, _, _ := newServer(t)
	resp, err := http.Get(srv.URL + "/objects/.hidden")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("GET of a bad ARK: %s, want 400", resp.Status)
	}
}
