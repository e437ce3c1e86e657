package handlers_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/checkm"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// get fetches url; a redirect is not followed (a cleaned path is not a
// way in).
func get(t *testing.T, url string, header ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// The daemon serves what a job hands on: the store node's manifest URL is
// the daemon's, and lists each file at a URL of the daemon whose bytes have
// the listed digest; the inventory node's URL gives the stored version.
// Nothing else of the data folder can be had, whatever the path.
func TestHandoffServed(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	// This daemon does not work Recording: the job waits there, its
	// working folder still in place, for another consumer.
	r, recording := newRigWithout(t, queue.Recording, 1, func(hc *handlers.Config, _ *reactor.Config) { hc.Advertise = srv.URL })
	mux.Handle(handlers.HandoffPrefix, r.p.Handoff())

	files := object{"a.txt": []byte("alpha\n"), "sub/b c.txt": bytes.Repeat([]byte("bravo "), 5000)}
	var rows []row
	for name, data := range files {
		rows = append(rows, fileRow(r.content.put("/obj/"+strings.ReplaceAll(name, " ", "_"), data), name, data))
	}
	b := r.submit(r.content.put("/obj.checkm", manifest("mrt-ingest-manifest", rows...)))
	jid := r.arrivals(b, recording, queue.Recording, 1)[0]
	j, err := r.q.LoadJob(t.Context(), jid)
	if err != nil {
		t.Fatal(err)
	}
	// Each URL carries the hand-off's key, the one its folder keeps.
	base := srv.URL + "/work/" + jid + "/"
	kept, err := os.ReadFile(filepath.Join(r.data, "work", jid, "handoff.key"))
	keyed := "?key=" + strings.TrimSpace(string(kept))
	if err != nil || len(keyed) < len("?key=")+26 {
		t.Fatalf("the hand-off's key in job %s's folder: %q (%v), want 26 or more characters", jid, kept, err)
	}
	if j.Store == nil || j.Store.ManifestURL != base+"storage-manifest"+keyed || len(j.Store.Copies) != 1 ||
		j.Inventory == nil || j.Inventory.ManifestURL != base+"inventory-manifest"+keyed {
		t.Fatalf("job %s: store %+v, inventory %+v; want the daemon's URLs under %s with %s and the stored copy", jid, j.Store, j.Inventory, base, keyed)
	}

	// The storage manifest, and each file it lists, as a consumer on
	// another host fetches them.
	code, body := get(t, j.Store.ManifestURL)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", j.Store.ManifestURL, code, body)
	}
	m, err := checkm.Parse(bytes.NewReader(body), j.Store.ManifestURL, checkm.Limits{})
	if err != nil || m.Profile != checkm.IngestManifest || len(m.Entries) != len(files)+4 {
		t.Fatalf("the storage manifest: %v, profile %q, %d entries, want %d:\n%s", err, m.Profile, len(m.Entries), len(files)+4, body)
	}
	listed := map[string]string{} // name → sha256
	for _, e := range m.Entries {
		listed[e.FileName] = e.HashValue
		if !strings.HasPrefix(e.URL, base+"files/") || !strings.HasSuffix(e.URL, keyed) || e.HashAlg != "sha256" {
			t.Errorf("%s: URL %s, %s digest; want the daemon's URL and sha256", e.FileName, e.URL, e.HashAlg)
			continue
		}
		code, data := get(t, e.URL)
		sum := sha256.Sum256(data)
		if code != http.StatusOK || hex.EncodeToString(sum[:]) != e.HashValue || int64(len(data)) != e.Size {
			t.Errorf("GET %s: %d, %d bytes, sha256 %x; want 200, %d bytes, %s", e.URL, code, len(data), sum, e.Size, e.HashValue)
		}
		if want, ok := files[strings.TrimPrefix(e.FileName, "producer/")]; ok && !bytes.Equal(data, want) {
			t.Errorf("GET %s: not the depositor's bytes", e.URL)
		}
	}
	if !strings.Contains(string(body), base+"files/producer/sub/b%20c.txt"+keyed+" | sha256") {
		t.Errorf("a name with a blank is not escaped in its URL:\n%s", body)
	}
	code, tail := get(t, base+"files/producer/a.txt"+keyed, "Range", "bytes=2-")
	if code != http.StatusPartialContent || string(tail) != "pha\n" {
		t.Errorf("a Range request: %d %q, want 206 and the file's end", code, tail)
	}

	// The stored version, as a consumer of Recording reads it.
	code, body = get(t, j.Inventory.ManifestURL)
	var inv struct {
		ARK    string `json:"ark"`
		Number int    `json:"number"`
		Files  []struct {
			Name   string `json:"name"`
			Size   int64  `json:"size"`
			SHA256 string `json:"sha256"`
		} `json:"files"`
		Copies []struct {
			URL string `json:"url"`
		} `json:"copies"`
	}
	if err := json.Unmarshal(body, &inv); code != http.StatusOK || err != nil || inv.ARK != j.Identifiers.PrimaryID || inv.Number != 1 ||
		len(inv.Files) != len(listed) || len(inv.Copies) != 1 || inv.Copies[0].URL != j.Store.Copies[0] {
		t.Fatalf("GET %s: %d %v %+v; want version 1 of %s with %d files and its copy", j.Inventory.ManifestURL, code, err, inv, j.Identifiers.PrimaryID, len(listed))
	}
	for _, f := range inv.Files {
		if listed[f.Name] != f.SHA256 {
			t.Errorf("the inventory manifest's %s has sha256 %s, the storage manifest's %s", f.Name, f.SHA256, listed[f.Name])
		}
	}

	// Path tricks, with the key. A file outside the data folder, and one
	// beside the listed files that the manifest does not list, must stay
	// out of reach, also through a listed name made a symlink.
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(r.data, "work", jid)
	if err := os.Remove(filepath.Join(work, "producer", "a.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(work, "producer", "a.txt")); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{
		"files/producer/a.txt",
		"files/premis-events.json",
		"files/stored-version.json",
		"files/../stored-version.json",
		"files/producer/%2e%2e/%2e%2e/stored-version.json",
		"files/producer/..%2f..%2fstored-version.json",
		"files/%2fetc%2fpasswd",
		"../../../../etc/passwd",
		"..%2f..%2f..%2f..%2fetc%2fpasswd/storage-manifest",
	} {
		code, body := get(t, base+path+keyed)
		if code == http.StatusOK || bytes.Contains(body, []byte("SECRET")) || bytes.Contains(body, []byte(`"ark"`)) || bytes.Contains(body, []byte("root:")) {
			t.Errorf("GET %s: %d %q, want it refused", base+path, code, body)
		}
	}

	// A pipe in the place of a listed file, of the stored version, of the
	// storage manifest (last: the listing reads it again once it changed):
	// each is refused at once, not waited on, which held the request, and
	// every later one for the manifest, until a writer came.
	pipes := []struct{ url, path string }{
		{base + "files/producer/sub/b%20c.txt" + keyed, filepath.Join(work, "producer", "sub", "b c.txt")},
		{j.Inventory.ManifestURL, filepath.Join(work, "stored-version.json")},
		{j.Store.ManifestURL, filepath.Join(work, "storage-manifest.checkm")},
	}
	// Runs before the server's Close, which waits for its requests: one hung
	// on a pipe ends when a writer opens it and goes.
	t.Cleanup(func() {
		for _, p := range pipes {
			if w, err := os.OpenFile(p.path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				_ = w.Close()
			}
		}
	})
	impatient := &http.Client{Timeout: 10 * time.Second}
	for _, p := range pipes {
		if err := os.Remove(p.path); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(p.path, 0o600); err != nil {
			t.Fatal(err)
		}
		resp, err := impatient.Get(p.url)
		if err != nil {
			t.Errorf("GET %s with a pipe in the place of %s: %v, want it refused at once", p.url, p.path, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("GET %s with a pipe in the place of %s: 200, want it refused", p.url, p.path)
		}
	}

	for _, url := range []string{srv.URL + "/work/..%2f..%2f/storage-manifest", srv.URL + "/work/jid1x/storage-manifest", srv.URL + "/work/jid0000099999/storage-manifest"} {
		if code, body := get(t, url+keyed); code != http.StatusNotFound {
			t.Errorf("GET %s: %d %q, want 404", url, code, body)
		}
	}
	resp, err := http.Post(j.Store.ManifestURL, "text/plain", strings.NewReader("x"))
	if err == nil {
		resp.Body.Close()
	}
	if err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST %s: %v %v, want 405: the handoff is read-only", j.Store.ManifestURL, resp, err)
	}
}
