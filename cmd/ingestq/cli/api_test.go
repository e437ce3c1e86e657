package cli_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingestq/ingestq/cmd/ingestq/cli"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/internal/tlstest"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// serve runs the daemon with its HTTP API on HTTPS (--tls-cert, --api-tokens):
// a depositor's tool submits a pass-through batch with its token and
// follows it to Completed; a request without a token is refused; an
// event stream open when the daemon stops ends, and the daemon exits 0.
func TestServeAPIOverTLS(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cert, key, pool := tlstest.SelfSigned(t)
	tokens := filepath.Join(t.TempDir(), "tokens")
	e.ok(os.WriteFile(tokens, []byte("operate depositor-token-0123456789 deposit-tool\n"), 0o600))
	addr := closedAddr(t)
	log := logtest.NewT(t)
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan int, 1)
	go func() {
		served <- cli.Run(ctx, []string{"--zk", zktest.Shared(t).Addr, "--zk-root", e.root, "serve", "--pipeline", "passthrough",
			"--data-dir", t.TempDir(), "--nats-listen", closedAddr(t), "--http", addr, "--tls-cert", cert, "--tls-key", key,
			"--api-tokens", tokens}, log, log, func(string) string { return "" })
	}()
	stopDaemon := sync.OnceValue(func() int { stop(); return <-served })
	t.Cleanup(func() { stopDaemon() })
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	base := "https://" + addr + "/api/v1/"
	call := func(method, path, token, body string) (int, []byte) {
		req, err := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(body))
		e.ok(err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, []byte(err.Error())
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, data
	}
	deadline := time.Now().Add(30 * time.Second)
	for code, _ := call("GET", "openapi.json", "", ""); code != http.StatusOK; code, _ = call("GET", "openapi.json", "", "") {
		if time.Now().After(deadline) {
			t.Fatal("the API did not answer over HTTPS within 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, body := call("GET", "batches", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("without a token: %d %s", code, body)
	}
	code, body := call("POST", "batches", "depositor-token-0123456789", `{"payload_url": "passthrough:3", "profile": "demo"}`)
	var got struct{ BID string }
	if code != http.StatusCreated || json.Unmarshal(body, &got) != nil {
		t.Fatalf("submit: %d %s", code, body)
	}
	stream := openEvents(t, client, base, "depositor-token-0123456789")
	for {
		var st struct {
			State string
			Jobs  struct{ Total, Finished int }
		}
		code, body := call("GET", "batches/"+got.BID, "depositor-token-0123456789", "")
		if code != http.StatusOK || json.Unmarshal(body, &st) != nil {
			t.Fatalf("status: %d %s", code, body)
		}
		if st.State == "Completed" && st.Jobs.Total == 3 && st.Jobs.Finished == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the batch is %s after 30 s", st.State)
		}
		time.Sleep(50 * time.Millisecond)
	}
	live := checkDashboard(t, client, "https://"+addr, "depositor-token-0123456789", got.BID)
	if code := stopDaemon(); code != 0 {
		t.Fatalf("serve exited %d", code)
	}
	for what, ended := range map[string]<-chan struct{}{"the event stream": stream, "the dashboard's live stream": live} {
		select {
		case <-ended:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not end when the daemon stopped", what)
		}
	}
}

// checkDashboard checks that the daemon's server has the dashboard, with
// the API's tokens, and opens its live stream: the channel closes when the
// stream ends.
func checkDashboard(t *testing.T, client *http.Client, site, token, bid string) <-chan struct{} {
	t.Helper()
	get := func(path string, withToken bool) *http.Response {
		req, err := http.NewRequestWithContext(t.Context(), "GET", site+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if withToken {
			req.AddCookie(&http.Cookie{Name: "ingestq_token", Value: base64.RawURLEncoding.EncodeToString([]byte(token))})
		}
		resp, err := client.Transport.RoundTrip(req) // no redirect followed
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	read := func(resp *http.Response) string {
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return string(data)
	}
	if resp := get("/", false); resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("/: %d to %q, want the dashboard at /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp := get("/ui/batches", false); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the dashboard without a token: %d %s", resp.StatusCode, read(resp))
	}
	if resp := get("/ui/batches", true); resp.StatusCode != http.StatusOK {
		t.Errorf("the dashboard's batches with a token: %d", resp.StatusCode)
	} else if body := read(resp); !strings.Contains(body, bid) {
		t.Errorf("the dashboard's batches do not list %s", bid)
	}
	resp := get("/ui/live", true)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the dashboard's live stream: %d %s", resp.StatusCode, read(resp))
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}()
	return ended
}

// openEvents opens the event stream and returns a channel closed when it
// ends.
func openEvents(t *testing.T, client *http.Client, base, token string) <-chan struct{} {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", base+"events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("events: %v %v", resp, err)
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
		}
	}()
	return ended
}

// A daemon whose HTTPS certificate this machine does not accept: object,
// access request and audit say it is the certificate, and why (a private
// CA's, another host's name, expired), and what to do; not that the API
// "does not answer" (it said so of a private CA's certificate).
func TestCommandsSayTheAPIsCertificateIsNotAccepted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	private := tlstest.Mutual(t) // the server's certificate is the CA's, for 127.0.0.1
	expiredCert, expiredKey := tlstest.Expired(t)
	privateURL := serve(t, zktest.Shared(t).Addr, e.root, "--pipeline", "passthrough",
		"--tls-cert", private.ServerCert, "--tls-key", private.ServerKey).url + "/api/v1"
	// serve refuses an expired certificate at start; one expires under a
	// running daemon, which a server of the test's stands for.
	expiredPair, err := tls.LoadX509KeyPair(expiredCert, expiredKey)
	if err != nil {
		t.Fatal(err)
	}
	expired := httptest.NewUnstartedServer(http.NotFoundHandler())
	expired.TLS = &tls.Config{Certificates: []tls.Certificate{expiredPair}}
	expired.StartTLS()
	t.Cleanup(expired.Close)
	expiredURL := expired.URL + "/api/v1"
	for _, c := range []struct {
		api  string
		want []string
	}{
		{privateURL, []string{"signed by an authority this machine does not trust", "SSL_CERT_FILE=CA.pem", "unknown authority"}},
		{strings.Replace(privateURL, "127.0.0.1", "localhost", 1), []string{"not for the host --api names", "give --api a name the certificate has"}},
		{expiredURL, []string{"it has expired, or is not valid yet", "renews it (serve --tls-cert)"}},
	} {
		for _, args := range [][]string{
			{"object", "ark:/99999/fk4t1"},
			{"access", "request", "ark:/99999/fk4t1"},
			{"audit"},
		} {
			_, stderr, code := e.run(append(args, "--api", c.api)...)
			wantCode(t, code, 1)
			wantErrLine(t, stderr, append([]string{"the daemon's API at " + c.api + " answers with a certificate this machine does not accept: "}, c.want...)...)
			if strings.Contains(stderr, "does not answer") {
				t.Errorf("%v --api %s: says the API does not answer", args, c.api)
			}
		}
	}
}
