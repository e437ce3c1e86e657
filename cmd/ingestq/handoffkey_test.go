//go:build linux

package main_test

import (
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/internal/promtest"
	"github.com/ingestq/ingestq/reactor/queue"
)

// A job's hand-off is served only at the URLs its nodes give (the
// hand-off's key in their query), on a real `ingestq serve` that holds two
// jobs at Storing: a URL without the key, with another job's, or with a
// wrong one, answers exactly as a job that does not exist does, and counts
// among its route's 404s; the node's URL and the file URLs it lists answer.
// A token below admin is shown the URL with its key masked, an admin token
// whole, and the daemon's log never holds it. A folder handed on by the
// release before keys (no key in it) is still served at its old URLs.
func TestHandOffIsServedOnlyAtItsURLs(t *testing.T) {
	t.Parallel()
	nats, zkAddr, root, q, _ := sharedQueue(t)
	content := newFiles(t)
	const readToken, adminToken = "read-token-for-the-hand-off", "admin-token-for-the-hand-off"
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("read "+readToken+" reader\nadmin "+adminToken+" operator\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, daemonConfig{Host: "d", ZK: zkAddr, Root: root, NATS: nats, Ingest: true, Extra: []string{
		"--api-tokens", tokens, "--states", "intake,pending,estimating,provisioning,downloading,processing"}})
	deposited := map[string]string{}
	for _, name := range []string{"keyed", "before-keys"} {
		deposited[name] = "the notes of " + name + "\n"
		if _, err := q.CreateBatch(t.Context(), queue.SubmissionOf(map[string]any{"profile_name": "demo", "submitter": "test",
			"payload_url": content.put("/"+name+".txt", []byte(deposited[name])), "type": "file"})); err != nil {
			t.Fatal(err)
		}
	}
	held := map[string]*queue.Job{} // by the file it holds
	poll(t, time.Minute, "both jobs to wait in Storing", func() (bool, string, error) {
		jobs, _, err := q.ListJobs(t.Context(), queue.Storing)
		if err != nil {
			return false, "", err
		}
		for _, j := range jobs {
			if j.Store != nil && j.Store.ManifestURL != "" {
				held[strings.TrimSuffix(filepath.Base(j.Config.PayloadURL), ".txt")] = j
			}
		}
		return len(held) == 2, "", nil
	})
	j := held["keyed"]
	u, err := neturl.Parse(j.Store.ManifestURL)
	if err != nil {
		t.Fatal(err)
	}
	key, base := u.Query().Get("key"), strings.TrimSuffix(j.Store.ManifestURL, "?"+u.RawQuery)
	if len(key) < 26 || u.RawQuery != "key="+key {
		t.Errorf("job %s's storage manifest URL %s: want it to carry a key of 26 characters or more", j.ID, j.Store.ManifestURL)
	}
	file := strings.TrimSuffix(base, "storage-manifest") + "files/producer/keyed.txt"
	inventory := strings.TrimSuffix(base, "storage-manifest") + "inventory-manifest"
	if code, text := getURL(t, j.Store.ManifestURL); code != http.StatusOK || !strings.Contains(text, "\n"+file+"?key="+key+" |") {
		t.Errorf("GET %s: %d %q, want the storage manifest listing %s with the key", j.Store.ManifestURL, code, text, file)
	}
	if code, text := getURL(t, file+"?key="+key); code != http.StatusOK || text != deposited["keyed"] {
		t.Errorf("GET the listed file: %d %q, want the deposited %q", code, text, deposited["keyed"])
	}

	const nowhere = "jid9999999999"
	code, missing := getURL(t, strings.Replace(base, j.ID, nowhere, 1))
	if code != http.StatusNotFound || !strings.Contains(missing, nowhere) {
		t.Fatalf("a job that does not exist: %d %q, want 404 naming it", code, missing)
	}
	other := strings.SplitN(held["before-keys"].Store.ManifestURL, "?", 2) // the other job's key
	refused := []string{base, base + "?key=", base + "?key=" + rand.Text(), base + "?key=" + key[:len(key)/2], base + "?" + other[len(other)-1],
		base + "?Key=" + key, file, file + "?key=" + rand.Text(), inventory, inventory + "?key=" + rand.Text()}
	for _, url := range refused {
		if code, body := getURL(t, url); code != http.StatusNotFound || body != strings.ReplaceAll(missing, nowhere, j.ID) {
			t.Errorf("GET %s: %d %q, want what a job that does not exist answers", url, code, body)
		}
	}
	var counted float64
	for series, n := range promtest.Scrape(t, u.Scheme+"://"+u.Host+"/metrics").Values("ingestq_http_requests_total", "route", "code") {
		if strings.HasPrefix(series, "route=GET /work/") && strings.HasSuffix(series, ",code=404") {
			counted += n
		}
	}
	if want := float64(len(refused) + 1); counted != want {
		t.Errorf("ingestq_http_requests_total of the hand-off's routes with code 404: %v, want %v (the refusals and the job that does not exist)", counted, want)
	}

	masked := base + "?key=xxxxx"
	for token, want := range map[string]string{readToken: masked, adminToken: j.Store.ManifestURL} {
		var detail struct{ Store queue.StepManifest }
		code, body := getURL(t, u.Scheme+"://"+u.Host+"/api/v1/jobs/"+j.ID, "Authorization", "Bearer "+token)
		if err := json.Unmarshal([]byte(body), &detail); err != nil || code != http.StatusOK || detail.Store.ManifestURL != want {
			t.Errorf("GET /api/v1/jobs/%s as %s: %d %v, manifest_url %q; want %q", j.ID, token, code, err, detail.Store.ManifestURL, want)
		}
	}
	if lines := d.logLines(key); key != "" && len(lines) > 0 {
		t.Errorf("the daemon's log holds the hand-off's key: %s", lines[0])
	}

	// The job handed on before keys: no key in its folder, and its URLs
	// without one. No request for it came before.
	if err := os.Remove(filepath.Join(held["before-keys"].Config.WorkingDir, "handoff.key")); err != nil {
		t.Fatal(err)
	}
	old := other[0]
	oldFile := strings.TrimSuffix(old, "storage-manifest") + "files/producer/before-keys.txt"
	if code, text := getURL(t, old); code != http.StatusOK || !strings.Contains(text, "\n"+oldFile+" |") {
		t.Errorf("GET %s (a folder without a key): %d %q, want its storage manifest listing %s", old, code, text, oldFile)
	}
	if code, text := getURL(t, oldFile); code != http.StatusOK || text != deposited["before-keys"] {
		t.Errorf("GET %s (a folder without a key): %d %q, want the deposited %q", oldFile, code, text, deposited["before-keys"])
	}
}

// getURL fetches url with the headers given (name, value, …; a Host one
// is the request's Host), following no redirect.
func getURL(t *testing.T, url string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	req.Host = req.Header.Get("Host") // the client sends req.Host, not the header; empty: the URL's
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}
