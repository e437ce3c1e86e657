//go:build linux

package main_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
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
	caPEM, err := os.ReadFile(ca.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	dir := t.TempDir()
	apiCert, apiKey := filepath.Join(dir, "api.pem"), filepath.Join(dir, "api-key.pem")
	natsCert, natsKey := filepath.Join(dir, "nats.pem"), filepath.Join(dir, "nats-key.pem")
	// A setting's put replaces its files by a certificate and a key, as
	// an operator's renewal does, and returns the certificate.
	installer := func(certFile, keyFile string) func(cert, key string) *x509.Certificate {
		return func(cert, key string) *x509.Certificate {
			t.Helper()
			tlstest.Install(t, certFile, keyFile, cert, key)
			return readCert(t, certFile)
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
		return serialOf(resp.TLS.PeerCertificates[0])
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
		return serialOf(st.PeerCertificates[0])
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
		if got := httpsSerial(newClient()); got != serialOf(api) {
			t.Errorf("%s: a new HTTPS handshake got serial %s, want %s", when, got, serialOf(api))
		}
		if got := newNATSSerial(); got != serialOf(nats) {
			t.Errorf("%s: a new NATS listener handshake got serial %s, want %s", when, got, serialOf(nats))
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
	d.waitLog(30*time.Second, "serial="+serialOf(api2))
	d.waitLog(30*time.Second, "serial="+serialOf(nats2))
	for _, c := range []struct {
		setting, file string
		cert          *x509.Certificate
	}{{"--tls-cert", apiCert, api2}, {"--nats-listen-tls-cert", natsCert, nats2}} {
		want := fmt.Sprintf("TLS certificate reloaded (SIGHUP) setting=%s file=%s serial=%s", c.setting, c.file, serialOf(c.cert))
		if lines := d.logLines(want); len(lines) != 1 || !strings.Contains(lines[0], " INF ") {
			t.Errorf("reload of %s: %q, want one INF line %q", c.setting, lines, want)
		}
	}
	wantServed("after the reload", api2, nats2)
	if got := httpsSerial(held); got != serialOf(api1) {
		t.Errorf("an HTTPS connection made before the reload: serial %s, want the first's, %s (the connection kept)", got, serialOf(api1))
	}
	if got := natsSerial(heldNATS); got != serialOf(nats1) || heldNATS.Status() != nats.CONNECTED {
		t.Errorf("a NATS connection made before the reload: serial %s, %v; want the first's, %s, connected", got, heldNATS.Status(), serialOf(nats1))
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

// readCert reads a PEM certificate file's first certificate.
func readCert(t *testing.T, file string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatalf("%s: no PEM block", file)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// serialOf is a certificate's serial as the daemon logs it (openssl x509
// -serial's hexadecimal).
func serialOf(c *x509.Certificate) string { return fmt.Sprintf("%X", c.SerialNumber) }
