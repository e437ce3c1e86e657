package storage

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

// bigFiles returns files large enough that a body is cut or refused while
// it is still being streamed.
func bigFiles(t *testing.T) []File {
	r := rand.New(rand.NewPCG(1, 2))
	big := make([]byte, 600<<10)
	for i := range big {
		big[i] = byte(r.IntN(256))
	}
	return workFiles(t, map[string]string{
		"producer/big.bin":   string(big),
		"producer/a.txt":     "hello",
		"system/mrt-erc.txt": "erc:\nwho: W\n",
	})
}

// checkStored asserts that the service holds exactly files' bytes.
func checkStored(t *testing.T, s *fakeStorage, ark string, files []File) fakeVersion {
	t.Helper()
	v, ok := s.stored(ark)
	if !ok {
		t.Fatalf("service holds nothing for %s", ark)
	}
	sameFiles(t, v.files, files)
	for _, f := range files {
		want, err := os.ReadFile(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(v.content[f.Name], want) {
			t.Fatalf("service holds other bytes for %s", f.Name)
		}
	}
	return v
}

func TestHTTPPutAndLatest(t *testing.T) {
	ctx := context.Background()
	s := newFakeStorage(t)
	h := NewHTTP(s.srv.URL+"/", testClient())
	files := sampleFiles(t)

	v1, err := h.Put(ctx, Object{ARK: testARK, LocalIDs: []string{"loc-1"}, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	if v1.Number != 1 || !v1.Changed || v1.ARK != testARK {
		t.Fatalf("first put = %+v", v1)
	}
	sameFiles(t, v1.Files, files)
	checkStored(t, s, testARK, files)

	again, err := h.Put(ctx, Object{ARK: testARK, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	if again.Number != 1 || again.Changed {
		t.Fatalf("identical put = %+v, want version 1 unchanged", again)
	}

	latest, err := h.Latest(ctx, testARK)
	if err != nil {
		t.Fatal(err)
	}
	if latest.ARK != testARK || latest.Number != 1 || !latest.Created.Equal(v1.Created) {
		t.Fatalf("latest = %+v", latest)
	}
	sameFiles(t, latest.Files, files)
	if latest.Files[0].Path != "" {
		t.Fatalf("a version read back has a local path %q", latest.Files[0].Path)
	}
	if _, err := h.Latest(ctx, "ark:/99999/unknown"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("latest of an unknown ark: %v, want ErrNotFound", err)
	}
}

// A refusal names the service's URL, its password masked.
func TestHTTPRefused(t *testing.T) {
	s := newFakeStorage(t)
	s.refuse = 422
	h := NewHTTP(strings.Replace(s.srv.URL, "http://", "http://ingest:s3cret@", 1), testClient())
	_, err := h.Put(context.Background(), Object{ARK: testARK, Files: bigFiles(t)})
	if !Refused(err) {
		t.Fatalf("put refused with 422: %v, want Refused", err)
	}
	msg := err.Error()
	for _, want := range []string{strings.Replace(s.srv.URL, "http://", "http://ingest:xxxxx@", 1) + "/objects", "422", refusal} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not name %q", msg, want)
		}
	}
	if strings.Contains(msg, "s3cret") {
		t.Errorf("error %q shows the service's password", msg)
	}
	if strings.Contains(msg, "TAIL") {
		t.Errorf("error %q carries more than 200 bytes of the answer", msg)
	}
	if posts, _ := s.counts(); posts != 1 {
		t.Fatalf("a refusal was sent %d times, want once", posts)
	}
}

// An error names the service by its endpoint, password masked, whatever
// the request's path holds: an ARK may hold "@", which redacting the whole
// request URL took for a password's end, hiding the service's host
// ("http://127.0.0.1:xxxxx@b").
func TestHTTPErrorsNameTheServiceOfAnARKWithAt(t *testing.T) {
	srv, _, _ := newServer(t)
	const ark = "ark:/99999/fk4a@b"
	for endpoint, shown := range map[string]string{
		srv.URL: srv.URL,
		strings.Replace(srv.URL, "http://", "http://ingest:s3cret@", 1): strings.Replace(srv.URL, "http://", "http://ingest:xxxxx@", 1),
	} {
		_, err := NewHTTP(endpoint, testClient()).Latest(t.Context(), ark)
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), shown+"/objects/ark:") || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("latest of %s, which the service lacks: %v, want ErrNotFound naming %s/objects/…", ark, err, shown)
		}
	}
}

// A 503 after part of the body was read is retried with the body rebuilt
// from the files; the service verifies the second attempt's digests.
func TestHTTP503ThenSuccess(t *testing.T) {
	s := newFakeStorage(t)
	s.fail503 = 1
	h := NewHTTP(s.srv.URL, testClient())
	files := bigFiles(t)
	v, err := h.Put(context.Background(), Object{ARK: testARK, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	if v.Number != 1 || !v.Changed {
		t.Fatalf("put = %+v", v)
	}
	posts, violations := s.counts()
	if posts != 2 || violations != "" {
		t.Fatalf("service saw %d posts (want 2), violations %q", posts, violations)
	}
	checkStored(t, s, testARK, files)
}

func TestHTTPCutConnectionThenSuccess(t *testing.T) {
	s := newFakeStorage(t)
	s.cut = 1
	h := NewHTTP(s.srv.URL, testClient())
	files := bigFiles(t)
	if _, err := h.Put(context.Background(), Object{ARK: testARK, Files: files}); err != nil {
		t.Fatal(err)
	}
	if posts, violations := s.counts(); posts < 2 || violations != "" {
		t.Fatalf("service saw %d posts (want 2 or more), violations %q", posts, violations)
	}
	checkStored(t, s, testARK, files)
}

func TestHTTPServerErrorsExhaustRetries(t *testing.T) {
	s := newFakeStorage(t)
	s.fail503 = 100
	h := NewHTTP(s.srv.URL, testClient())
	_, err := h.Put(context.Background(), Object{ARK: testARK, Files: sampleFiles(t)})
	if err == nil || Refused(err) || !strings.Contains(err.Error(), s.srv.URL+"/objects") {
		t.Fatalf("put to a failing service: %v, want an unrefused error naming the endpoint", err)
	}
	if posts, _ := s.counts(); posts != 3 {
		t.Fatalf("service saw %d posts, want 3 (1 + 2 retries)", posts)
	}
	if _, ok := s.stored(testARK); ok {
		t.Fatal("a failed put was stored")
	}
}

func TestHTTPServiceDown(t *testing.T) {
	s := newFakeStorage(t)
	s.srv.Close()
	h := NewHTTP(s.srv.URL, testClient())
	_, err := h.Put(context.Background(), Object{ARK: testARK, Files: sampleFiles(t)})
	if err == nil || Refused(err) || !strings.Contains(err.Error(), s.srv.URL+"/objects") {
		t.Fatalf("put to a closed service: %v, want an unrefused error naming the endpoint", err)
	}
	_, err = h.Latest(context.Background(), testARK)
	if err == nil || errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), s.srv.URL) {
		t.Fatalf("latest from a closed service: %v", err)
	}
}

// A source file whose bytes no longer match its digest stops the upload at
// once: no version, no retries, an error naming the file.
func TestHTTPSourceDigestMismatch(t *testing.T) {
	s := newFakeStorage(t)
	h := NewHTTP(s.srv.URL, testClient())
	files := bigFiles(t)
	if err := os.WriteFile(files[0].Path, []byte("HELLO"), 0o644); err != nil { // same size, other bytes
		t.Fatal(err)
	}
	_, err := h.Put(context.Background(), Object{ARK: testARK, Files: files})
	if err == nil || !strings.Contains(err.Error(), `"`+files[0].Name+`"`) || !strings.Contains(err.Error(), "sha256") {
		t.Fatalf("put of a changed file: %v, want a digest error naming %s", err, files[0].Name)
	}
	if posts, _ := s.counts(); posts > 1 {
		t.Fatalf("a local digest mismatch was retried: %d posts", posts)
	}
	if _, ok := s.stored(testARK); ok {
		t.Fatal("a put with a bad file was stored")
	}
}
