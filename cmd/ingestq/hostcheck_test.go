//go:build linux

package main_test

import (
	"net"
	"net/http"
	neturl "net/url"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/internal/natstest"
	"github.com/ingestq/ingestq/internal/promtest"
	"github.com/ingestq/ingestq/reactor/queue"
)

// A real `ingestq serve` answers only a Host it is reached by (DNS
// rebinding: a page on an attacker's name pointed at the daemon is refused).
// The daemon works every state but Storing, so a job waits there with its
// hand-off served: a rebinding Host gets 421 on it, on /metrics, the API,
// the dashboard and pprof, each naming the setting; the advertised name,
// the loopback address, localhost, a name and a wildcard of --http-hosts
// get the file. Refusals count in the metrics; one Host is logged once.
func TestServeAnswersOnlyItsHosts(t *testing.T) {
	t.Parallel()
	nats, zkAddr, root, q, _ := sharedQueue(t)
	content := newFiles(t)
	addr := natstest.FreeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	d := startDaemon(t, daemonConfig{Host: "d", ZK: zkAddr, Root: root, NATS: nats, Ingest: true, Extra: []string{
		"--http", addr, "--advertise", "http://d.advertised.test:" + port, "--http-hosts", "proxy.example.org, *.alias.example.org",
		"--states", "intake,pending,estimating,provisioning,downloading,processing"}})
	deposited := "a depositor's notes\n"
	if _, err := q.CreateBatch(t.Context(), queue.SubmissionOf(map[string]any{"profile_name": "demo", "submitter": "test",
		"payload_url": content.put("/notes.txt", []byte(deposited)), "type": "file"})); err != nil {
		t.Fatal(err)
	}
	var manifest string
	poll(t, time.Minute, "the job to wait in Storing", func() (bool, string, error) {
		jobs, _, err := q.ListJobs(t.Context(), queue.Storing)
		if err != nil || len(jobs) != 1 {
			return false, "", err
		}
		manifest = jobs[0].Store.ManifestURL
		return manifest != "", manifest, nil
	})
	u, err := neturl.Parse(manifest)
	if err != nil || u.Host != "d.advertised.test:"+port {
		t.Fatalf("the job's manifest URL %q (%v): want the advertised host", manifest, err)
	}
	get := func(host, path string) (int, string) {
		t.Helper()
		return getURL(t, "http://"+addr+path, "Host", host)
	}
	// The deposited file, as the storage manifest names it (with the
	// hand-off's key), beside the manifest.
	file := strings.TrimSuffix(u.Path, "storage-manifest") + "files/producer/notes.txt?" + u.RawQuery
	if code, text := get("127.0.0.1:"+port, u.RequestURI()); code != http.StatusOK || !strings.Contains(text, "\nhttp://d.advertised.test:"+port+file+" |") {
		t.Fatalf("the storage manifest: %d %q, want it to list %s at the advertised host", code, text, file)
	}
	const rebind = "rebind.attacker.example"
	paths := []string{file, u.RequestURI(), "/metrics", "/api/v1/batches", "/ui/", "/debug/pprof/"}
	for _, path := range paths {
		code, body := get(rebind+":"+port, path)
		if code != http.StatusMisdirectedRequest || !strings.Contains(body, `Host "`+rebind+":"+port+`"`) ||
			!strings.Contains(body, "--http-hosts (INGESTQ_HTTP_HOSTS)") || strings.Contains(body, deposited) {
			t.Errorf("GET %s, Host %s: %d %q; want 421 naming the Host and --http-hosts", path, rebind, code, body)
		}
	}
	for _, host := range []string{"d.advertised.test:" + port, "127.0.0.1:" + port, "localhost:" + port, "proxy.example.org",
		"ingest.alias.example.org:443"} {
		if code, body := get(host, file); code != http.StatusOK || body != deposited {
			t.Errorf("GET the deposited file, Host %s: %d %q; want 200 and the file", host, code, body)
		}
		if code, _ := get(host, "/api/v1/batches"); code != http.StatusOK {
			t.Errorf("GET /api/v1/batches, Host %s: %d, want 200", host, code)
		}
	}
	refused := promtest.Scrape(t, "http://"+addr+"/metrics").Values("ingestq_http_requests_total", "route", "code")["route=unmatched,code=421"]
	if refused != float64(len(paths)) {
		t.Errorf("ingestq_http_requests_total{route=unmatched,code=421} = %v, want the %d refusals", refused, len(paths))
	}
	if lines := d.logLines("refused a request for a Host"); len(lines) != 1 || !strings.Contains(lines[0], rebind) {
		t.Errorf("the refusals of one Host logged as %q; want one line naming it", lines)
	}
}
