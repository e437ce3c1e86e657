//go:build linux

package main_test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ingestq/ingestq/internal/natstest"
	"github.com/ingestq/ingestq/internal/promtest"
	"github.com/ingestq/ingestq/internal/tlsfiles"
	"github.com/ingestq/ingestq/internal/tlstest"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// A real `ingestq serve` with HTTPS (--tls-cert) and a TLS client listener
// (--nats-listen-tls-cert) is given new certificates without a restart:
// the files are replaced and a SIGHUP sent; each new handshake, on HTTPS
// and on the NATS listener, gets the new certificate, the connections made
// before keep theirs and go on, the log says what was reloaded, and
// ingestq_tls_cert_expiry_timestamp_seconds follows. A bad replacement (an
// expired certificate, a key of another certificate) is refused with an
// ERR naming the setting, the file and the cause, and the pair in force is
// still served. Certificates that expire within 14 days are warned of.
func TestServeReloadsCertificatesOnHUP(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewAuthority(t)
	pool := ca.Pool()
	dir := t.TempDir()
	apiCert, apiKey := filepath.Join(dir, "api.pem"), filepath.Join(dir, "api-key.pem")
	natsCert, natsKey := filepath.Join(dir, "nats.pem"), filepath.Join(dir, "nats-key.pem")
	// A setting's put replaces its files by a certificate and a key, as
	// an operator's renewal does, and returns the certificate.
	installer := func(certFile, keyFile string) func(cert, key string) *x509.Certificate {
		return func(cert, key string) *x509.Certificate {
			t.Helper()
			return tlstest.Install(t, certFile, keyFile, cert, key)
		}
	}
	putAPI, putNATS := installer(apiCert, apiKey), installer(natsCert, natsKey)
	api1 := putAPI(ca.Peer(t, "api1", "127.0.0.1"))
	nats1 := putNATS(ca.Peer(t, "nats1", "127.0.0.1"))
	httpAddr, listen := natstest.FreeAddr(t), natstest.FreeAddr(t)
	d := startDaemon(t, daemonConfig{Host: "d", ZK: zktest.Shared(t).Addr, Root: zktest.Root(t), Extra: []string{
		"--http", httpAddr, "--tls-cert", apiCert, "--tls-key", apiKey,
		"--nats-listen", listen, "--nats-listen-tls-cert", natsCert, "--nats-listen-tls-key", natsKey}})

	httpsSerial := func(client *http.Client) string {
		t.Helper()
		resp, err := client.Get("https://" + httpAddr + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body) // read to its end: the connection is then kept for the next request
		resp.Body.Close()
		return tlsfiles.Serial(resp.TLS.PeerCertificates[0])
	}
	newClient := func() *http.Client {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	}
	connect := func() *nats.Conn {
		t.Helper()
		nc, err := nats.Connect("tls://"+listen, nats.RootCAs(ca.CAFile))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	natsSerial := func(nc *nats.Conn) string {
		t.Helper()
		if err := nc.Flush(); err != nil {
			t.Fatalf("a NATS connection through the listener: %v", err)
		}
		st, err := nc.TLSConnectionState()
		if err != nil {
			t.Fatal(err)
		}
		return tlsfiles.Serial(st.PeerCertificates[0])
	}
	newNATSSerial := func() string {
		nc := connect()
		defer nc.Close()
		return natsSerial(nc)
	}
	expiry := func() map[string]float64 {
		t.Helper()
		return promtest.ScrapeWith(t, newClient(), "https://"+httpAddr+"/metrics").Values("ingestq_tls_cert_expiry_timestamp_seconds", "setting")
	}
	wantServed := func(when string, api, nats *x509.Certificate) {
		t.Helper()
		if got := httpsSerial(newClient()); got != tlsfiles.Serial(api) {
			t.Errorf("%s: a new HTTPS handshake got serial %s, want %s", when, got, tlsfiles.Serial(api))
		}
		if got := newNATSSerial(); got != tlsfiles.Serial(nats) {
			t.Errorf("%s: a new NATS listener handshake got serial %s, want %s", when, got, tlsfiles.Serial(nats))
		}
		want := map[string]float64{"setting=tls-cert": float64(api.NotAfter.Unix()), "setting=nats-listen-tls-cert": float64(nats.NotAfter.Unix())}
		if got := expiry(); !promtest.Equal(got, want) {
			t.Errorf("%s: ingestq_tls_cert_expiry_timestamp_seconds %v, want %v", when, got, want)
		}
	}

	wantServed("at start", api1, nats1)
	for _, setting := range []string{"--tls-cert", "--nats-listen-tls-cert"} {
		if lines := d.logLines("TLS certificate expires within 14 days"); len(lines) != 2 || !strings.Contains(strings.Join(lines, "\n"), "setting="+setting+" ") {
			t.Errorf("warnings of certificates expiring: %q, want two, one naming %s", lines, setting)
		}
	}
	held := newClient() // keeps its connection, made with the first certificate
	httpsSerial(held)
	heldNATS := connect()
	natsSerial(heldNATS)

	api2 := putAPI(ca.Peer(t, "api2", "127.0.0.1"))
	nats2 := putNATS(ca.Peer(t, "nats2", "127.0.0.1"))
	d.signal(syscall.SIGHUP)
	d.waitLog(30*time.Second, "serial="+tlsfiles.Serial(api2))
	d.waitLog(30*time.Second, "serial="+tlsfiles.Serial(nats2))
	for _, c := range []struct {
		setting, file string
		cert          *x509.Certificate
	}{{"--tls-cert", apiCert, api2}, {"--nats-listen-tls-cert", natsCert, nats2}} {
		want := fmt.Sprintf("TLS certificate reloaded (SIGHUP) setting=%s file=%s serial=%s", c.setting, c.file, tlsfiles.Serial(c.cert))
		if lines := d.logLines(want); len(lines) != 1 || !strings.Contains(lines[0], " INF ") {
			t.Errorf("reload of %s: %q, want one INF line %q", c.setting, lines, want)
		}
	}
	wantServed("after the reload", api2, nats2)
	if got := httpsSerial(held); got != tlsfiles.Serial(api1) {
		t.Errorf("an HTTPS connection made before the reload: serial %s, want the first's, %s (the connection kept)", got, tlsfiles.Serial(api1))
	}
	if got := natsSerial(heldNATS); got != tlsfiles.Serial(nats1) || heldNATS.Status() != nats.CONNECTED {
		t.Errorf("a NATS connection made before the reload: serial %s, %v; want the first's, %s, connected", got, heldNATS.Status(), tlsfiles.Serial(nats1))
	}

	putAPI(ca.ExpiredPeer(t, "expired", "127.0.0.1"))
	nats3, _ := ca.Peer(t, "nats3", "127.0.0.1")
	_, otherKey := ca.Peer(t, "other", "127.0.0.1")
	tlstest.Install(t, natsCert, natsKey, nats3, otherKey) // a key of another certificate
	d.signal(syscall.SIGHUP)
	const refused = "TLS certificate not reloaded (SIGHUP); the certificate in force is kept"
	poll(t, 30*time.Second, "both refusals logged", func() (bool, string, error) {
		lines := d.logLines(refused)
		return len(lines) == 2, strings.Join(lines, "\n"), nil
	})
	for _, want := range []string{
		refused + " setting=--tls-cert file=" + apiCert + " err=\"expired on ",
		refused + " setting=--nats-listen-tls-key file=" + natsKey + " err=\"not the key of the certificate in " + natsCert + "\"",
	} {
		if lines := d.logLines(want); len(lines) != 1 || !strings.Contains(lines[0], " ERR ") {
			t.Errorf("a bad replacement: %q, want one ERR line %q", d.logLines(refused), want)
		}
	}
	wantServed("after a refused reload", api2, nats2)
}

// Renewals that go wrong where the operator does not look, each on a real
// daemon serving HTTPS with a chain (a leaf of an intermediate CA, then
// the intermediate's certificate), its clients trusting the root only:
//   - a serial whose first byte is below 0x10, as Let's Encrypt's often
//     are, is logged as openssl x509 -serial shows it (03A1B2, the
//     operator's grep of step 3), not as 3A1B2;
//   - a renewed key file left open to group or others is warned of at the
//     reload, as at start (and as the token file is);
//   - a certificate file read half written (the leaf whole, the
//     intermediate cut short) is refused, and the pair in force served:
//     crypto/tls would take the leaf alone and every client would fail;
//   - a certificate that enters its last 14 days while the daemon runs is
//     warned of then, not only at the next start or reload.
//
// Before: 3A1B2; no warning of the key; the cut chain reloaded and the
// clients' handshakes failed (unknown authority); no warning (30 s).
func TestServeCertificateRenewalMishaps(t *testing.T) {
	t.Parallel()
	root := tlstest.NewAuthority(t)
	mid := root.Intermediate(t, "mid")
	midPEM, err := os.ReadFile(mid.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := root.Pool()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "api.pem"), filepath.Join(dir, "api-key.pem")
	// put writes a leaf of mid followed by mid's certificate (cut bytes
	// short, when given) and its key over the setting's files.
	put := func(cert, key string, cut ...int) *x509.Certificate {
		t.Helper()
		leaf, err := os.ReadFile(cert)
		if err != nil {
			t.Fatal(err)
		}
		chain := append(leaf, midPEM...)
		chainFile := filepath.Join(t.TempDir(), "chain.pem")
		if len(cut) > 0 {
			chain = chain[:len(chain)-cut[0]]
		}
		if err := os.WriteFile(chainFile, chain, 0o600); err != nil {
			t.Fatal(err)
		}
		return tlstest.Install(t, certFile, keyFile, chainFile, key)
	}
	put(mid.Peer(t, "first", "127.0.0.1"))
	httpAddr := natstest.FreeAddr(t)
	d := startDaemon(t, daemonConfig{Host: "d", ZK: zktest.Shared(t).Addr, Root: zktest.Root(t), Extra: []string{
		"--http", httpAddr, "--tls-cert", certFile, "--tls-key", keyFile, "--nats-listen", "off"}})
	served := func() string {
		t.Helper()
		conn, err := tls.Dial("tcp", httpAddr, &tls.Config{RootCAs: pool})
		if err != nil {
			t.Errorf("a new HTTPS handshake, trusting the root CA: %v", err)
			return ""
		}
		defer conn.Close()
		return tlsfiles.Serial(conn.ConnectionState().PeerCertificates[0])
	}
	// hup sends a SIGHUP and returns the line that says what became of the
	// certificate (one setting given: one line).
	hup := func() string {
		t.Helper()
		n := len(d.logLines("(SIGHUP)"))
		d.signal(syscall.SIGHUP)
		poll(t, 30*time.Second, "the reload's line", func() (bool, string, error) { return len(d.logLines("(SIGHUP)")) > n, "", nil })
		return d.logLines("(SIGHUP)")[n]
	}

	put(mid.PeerWith(t, "low-serial", func(c *x509.Certificate) { c.SerialNumber = big.NewInt(0x03A1B2) }, "127.0.0.1"))
	if line, want := hup(), "TLS certificate reloaded (SIGHUP) setting=--tls-cert file="+certFile+" serial=03A1B2 "; !strings.Contains(line, want) {
		t.Errorf("a serial whose first byte is 03: %q, want %q, as openssl x509 -serial shows it", line, want)
	}

	const openKey = "--tls-key: the key's file is open to group or others; chmod 600 it (or 400) file=" + "%s mode=0644"
	if lines := d.logLines("is open to group or others"); len(lines) != 0 {
		t.Fatalf("at start, a key of mode 600: %q", lines)
	}
	renewed := put(mid.Peer(t, "open-key", "127.0.0.1"))
	if err := os.Chmod(keyFile, 0o644); err != nil {
		t.Fatal(err)
	}
	hup()
	if lines := d.logLines(fmt.Sprintf(openKey, keyFile)); len(lines) != 1 || !strings.Contains(lines[0], " WRN ") {
		t.Errorf("a renewed key of mode 644: %q, want one WRN %q", d.logLines("is open to group or others"), fmt.Sprintf(openKey, keyFile))
	}
	if err := os.Chmod(keyFile, 0o600); err != nil {
		t.Fatal(err)
	}

	halfCert, halfKey := mid.Peer(t, "half-written", "127.0.0.1")
	put(halfCert, halfKey, 100)
	if line, want := hup(), "TLS certificate not reloaded (SIGHUP); the certificate in force is kept setting=--tls-cert file="+certFile+
		" err=\"a PEM block in it is cut short"; !strings.Contains(line, want) {
		t.Errorf("a chain cut short: %q, want %q", line, want)
	}
	if got := served(); got != tlsfiles.Serial(renewed) {
		t.Errorf("after a chain cut short: a new handshake got serial %q, want the pair in force's, %s", got, tlsfiles.Serial(renewed))
	}

	const expiring = "TLS certificate expires within 14 days"
	warned := len(d.logLines(expiring))
	notAfter := time.Now().Add(14*24*time.Hour + 5*time.Second)
	put(mid.PeerWith(t, "two-weeks", func(c *x509.Certificate) { c.NotBefore, c.NotAfter = time.Now().Add(-time.Hour), notAfter }, "127.0.0.1"))
	if line := hup(); !strings.Contains(line, "TLS certificate reloaded (SIGHUP)") {
		t.Fatalf("a certificate 14 days and 5 seconds from its expiry: %q, want it reloaded", line)
	}
	if n := len(d.logLines(expiring)); n != warned {
		t.Errorf("a certificate more than 14 days from its expiry was warned of at its reload: %q", d.logLines(expiring)[warned:])
	}
	poll(t, 30*time.Second, "the warning once the certificate has 14 days left", func() (bool, string, error) {
		return len(d.logLines(expiring)) > warned, "", nil
	})
	if line := d.logLines(expiring)[warned]; !strings.Contains(line, "setting=--tls-cert file="+certFile+" ") {
		t.Errorf("the warning of the certificate entering its last 14 days: %q, want it to name the setting and the file", line)
	}
}
