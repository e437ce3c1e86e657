package httpd_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/internal/httpd"
	"github.com/ingestq/ingestq/internal/logtest"
)

// setting is what the tests' refusals name to add a Host to.
const setting = "--http-hosts (INGESTQ_HTTP_HOSTS)"

// hostRig is a server with a route, told of its requests, whose log a test
// reads.
type hostRig struct {
	t      *testing.T
	s      *httpd.Server
	log    *logtest.Buffer
	seen   chan string // "pattern code" of each request
	served chan struct{}
}

func newHostRig(t *testing.T, names ...string) *hostRig {
	t.Helper()
	r := &hostRig{t: t, log: &logtest.Buffer{}, seen: make(chan string, 100), served: make(chan struct{}, 100)}
	s, err := httpd.Start("127.0.0.1:0", slog.New(slog.NewTextHandler(r.log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	r.s = s
	s.AnswerTo(names, setting)
	s.Observe(func(pattern string, code int, _ time.Duration) { r.seen <- fmt.Sprintf("%q %d", pattern, code) })
	// As the hand-off route: a depositor's file, without a token.
	s.Handle("GET /work/{jid}/files/{name}", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r.served <- struct{}{}
		_, _ = io.WriteString(w, "deposited")
	}))
	return r
}

// get asks for a hand-off file with host as the Host header, and returns
// the status, the body and the nosniff header.
func (r *hostRig) get(host string) (int, string, string) {
	r.t.Helper()
	req, err := http.NewRequest("GET", r.s.DefaultAdvertise()+"/work/jid0000000042/files/notes.txt", nil)
	if err != nil {
		r.t.Fatal(err)
	}
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header.Get("X-Content-Type-Options")
}

// A request for a Host the server does not answer to (DNS rebinding: an
// attacker's name pointed at the server) is refused with 421 before any
// route, naming the Host and the setting to add it to, still nosniff, and
// counted as an answer no route took. IP literals, localhost and names
// under it, the machine's name and the names given are answered, with any
// port, in any case, with a trailing dot.
func TestRefusesAHostItDoesNotAnswerTo(t *testing.T) {
	t.Parallel()
	r := newHostRig(t, "proxy.example.org", "*.alias.example.org", "ingest1.example.org")
	port := strconv.Itoa(r.s.Addr().Port)
	hostname, _ := os.Hostname()
	for _, host := range []string{"rebind.attacker.example:" + port, "rebind.attacker.example", "localhost.attacker.example",
		"127.0.0.1.nip.io:" + port, "alias.example.org", "xalias.example.org", "proxy.example.org.attacker.example",
		"ingest1.example.org.attacker.example:" + port, hostname + ".attacker.example"} {
		code, body, nosniff := r.get(host)
		if code != http.StatusMisdirectedRequest || nosniff != "nosniff" ||
			body != fmt.Sprintf("misdirected: this server does not answer to Host %q; add the name to %s\n", host, setting) {
			t.Errorf("Host %s: %d %q, X-Content-Type-Options %q; want 421 naming the Host and %s, nosniff", host, code, body, nosniff, setting)
		}
		if seen := <-r.seen; seen != `"" 421` {
			t.Errorf("Host %s: observed %s, want a 421 no route took", host, seen)
		}
	}
	if len(r.served) != 0 {
		t.Errorf("the route ran %d times for Hosts refused", len(r.served))
	}
	for _, host := range []string{"127.0.0.1:" + port, "10.1.2.3", "[::1]:" + port, "[::1]", "[fe80::1%25eth0]:" + port,
		"localhost", "LocalHost:" + port, "localhost.:" + port, "ingest1.localhost:" + port, hostname, hostname + ":" + port,
		"proxy.example.org", "PROXY.Example.org.:443", "a.alias.example.org", "b.c.alias.example.org:" + port,
		"ingest1.example.org:8080"} {
		if code, body, _ := r.get(host); code != http.StatusOK || body != "deposited" {
			t.Errorf("Host %s: %d %q, want 200 and the file", host, code, body)
		}
		if seen := <-r.seen; seen != `"GET /work/{jid}/files/{name}" 200` {
			t.Errorf("Host %s: observed %s, want the route's 200", host, seen)
		}
	}
}

// "*" answers every Host: the check is off.
func TestStarAnswersEveryHost(t *testing.T) {
	t.Parallel()
	r := newHostRig(t)
	if code, _, _ := r.get("rebind.attacker.example"); code != http.StatusMisdirectedRequest {
		t.Errorf("without *: %d, want 421", code)
	}
	r.s.AnswerTo([]string{"*"}, setting)
	if code, body, _ := r.get("rebind.attacker.example"); code != http.StatusOK || body != "deposited" {
		t.Errorf("with *: %d %q, want 200 and the file", code, body)
	}
}

// An HTTP/1.0 request without a Host (no browser sends one) is answered;
// a request whose target is an absolute URL is checked by that URL's host,
// which Go takes as the request's Host.
func TestNoHostAndAnAbsoluteTarget(t *testing.T) {
	t.Parallel()
	r := newHostRig(t)
	for _, c := range []struct {
		request string
		want    int
	}{
		{"GET /work/jid0000000042/files/notes.txt HTTP/1.0\r\n\r\n", http.StatusOK},
		{"GET http://rebind.attacker.example/work/jid0000000042/files/notes.txt HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
			http.StatusMisdirectedRequest},
	} {
		conn := dial(t, r.s)
		if _, err := io.WriteString(conn, c.request); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%q: %d, want %d", c.request, resp.StatusCode, c.want)
		}
	}
}

// A refused Host is logged once an hour, whatever the port, and at most
// 16 Hosts an hour, the last saying so: a scanner cannot flood the log.
func TestRefusalsAreLoggedOncePerHost(t *testing.T) {
	t.Parallel()
	r := newHostRig(t)
	for _, host := range []string{"rebind.attacker.example", "rebind.attacker.example:8080", "REBIND.attacker.example"} {
		if code, _, _ := r.get(host); code != http.StatusMisdirectedRequest {
			t.Fatalf("Host %s: %d, want 421", host, code)
		}
	}
	if lines := r.log.Lines("refused a request for a Host"); len(lines) != 1 || !strings.Contains(lines[0], "host=rebind.attacker.example ") ||
		!strings.Contains(lines[0], "add to "+setting) {
		t.Fatalf("three refusals of one Host logged as %q; want one line naming it and the setting", lines)
	}
	for i := range 30 {
		if code, _, _ := r.get(fmt.Sprintf("scan%d.attacker.example", i)); code != http.StatusMisdirectedRequest {
			t.Fatalf("Host scan%d: %d, want 421", i, code)
		}
	}
	lines := r.log.Lines("refused a request for a Host")
	if len(lines) != 16 || !strings.Contains(lines[15], "host=scan14.attacker.example") || !strings.Contains(lines[15], "nor is any other (16 were)") ||
		slices.ContainsFunc(lines[:15], func(l string) bool { return strings.Contains(l, "nor is any other") }) {
		t.Errorf("31 Hosts refused logged in %d lines, want 16, the last (scan14) saying no other is logged:\n%s", len(lines), strings.Join(lines, "\n"))
	}
}

// The machine's name and its short form, and the listen address's host
// when it is a name, are answered without being given.
func TestOwnNames(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		hostname, listen string
		want             []string
	}{
		{"ingest1.example.org", "0.0.0.0:8080", []string{"ingest1.example.org", "ingest1"}},
		{"vm", "ingest.internal:8080", []string{"vm", "ingest.internal"}},
		{"vm", ":8080", []string{"vm"}},
	} {
		if got := httpd.OwnNames(c.hostname, c.listen); !slices.Equal(got, c.want) {
			t.Errorf("OwnNames(%q, %q) = %q, want %q", c.hostname, c.listen, got, c.want)
		}
	}
}

// The setting takes names, *.suffix wildcards and *; anything else (a URL,
// a port, a bad name) is an error naming it.
func TestParseHosts(t *testing.T) {
	t.Parallel()
	got, err := httpd.ParseHosts(" proxy.example.org, *.alias.example.org,,ingest_1.Example.org.,* ")
	if want := []string{"proxy.example.org", "*.alias.example.org", "ingest_1.Example.org.", "*"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("ParseHosts: %q %v, want %q", got, err, want)
	}
	if got, err := httpd.ParseHosts(""); err != nil || len(got) != 0 {
		t.Errorf("ParseHosts of nothing: %q %v, want none", got, err)
	}
	for _, bad := range []string{"https://proxy.example.org", "proxy.example.org:443", "proxy.example.org/ui", "*example.org",
		"a.*.example.org", "*.", "example..org", "[::1]", "pro xy"} {
		if _, err := httpd.ParseHosts("ok.example.org," + bad); err == nil || !strings.Contains(err.Error(), strconv.Quote(bad)) {
			t.Errorf("ParseHosts(%q): %v, want an error naming it", bad, err)
		}
	}
}
