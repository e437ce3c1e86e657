//go:build linux

package main_test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/ingestq/ingestq/events"
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
	// Longer than the leaves: the warning of the last step is the leaf's.
	mid := root.IntermediateWith(t, "mid", tlstest.ValidFor(30*24*time.Hour))
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

// A cluster of two daemons with route TLS moves to a new CA without a
// restart, by the README's three steps, each a SIGHUP of every host: (a)
// the new CA added to each host's CA file, (b) each host given a
// certificate of the new CA, (c) the old CA removed. After each step a
// third host (a visitor, stopped after) joins with what that step allows,
// so that routes are handshaken anew both ways with the two hosts' CA
// pool in force; the routes in place go on, and a request published on
// one host is answered on another, at every step. After (c), a visitor
// still holding a certificate of the old CA only is refused by both
// hosts. A CA file refused at a reload (no certificate in it, a CA
// expired) is logged at ERR, naming the setting, the file and the cause,
// and the pool in force is kept.
//
// Before: the CA file was read at start only; the visitor of step (a),
// with a certificate of the new CA, was refused (not signed by this
// host's CA) and never joined.
func TestServeRotatesTheRoutesCAOnHUP(t *testing.T) {
	t.Parallel()
	oldCA, newCA := tlstest.NewAuthority(t), tlstest.NewAuthority(t)
	dir := t.TempDir()
	r := newClusterRig(t)
	type files struct{ cert, key, ca string }
	hostFiles := map[string]files{}
	flags := func(name string) []string {
		f := hostFiles[name]
		return []string{"--nats-cluster-tls-cert", f.cert, "--nats-cluster-tls-key", f.key, "--nats-cluster-tls-ca", f.ca}
	}
	// give puts, as a host's files, a certificate of ca and a CA file of
	// the CAs given, each written beside its file and renamed over it.
	give := func(name string, ca *tlstest.Authority, bundle ...*tlstest.Authority) *x509.Certificate {
		t.Helper()
		f := files{filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem"), filepath.Join(dir, name+"-ca.pem")}
		hostFiles[name] = f
		writeCABundle(t, f.ca, bundle...)
		cert, key := ca.Peer(t, fmt.Sprintf("%s-%d", name, time.Now().UnixNano()), "127.0.0.1")
		return tlstest.Install(t, f.cert, f.key, cert, key)
	}
	walked := []string{"d1", "d2"}
	for _, name := range walked {
		give(name, oldCA, oldCA)
		r.launch(name, daemonConfig{Extra: flags(name)}, natstest.FreeAddr(t), natstest.FreeAddr(t))
	}
	r.waitJoined(walked...)
	// hupAll sends every walked host a SIGHUP and waits until its CA
	// file's reload is said and has reached its NATS server.
	const reloaded, applied = "TLS CA reloaded (SIGHUP) setting=--nats-cluster-tls-ca", "the NATS routes verify the other servers against the CA file in force"
	hupAll := func() {
		t.Helper()
		for _, name := range walked {
			h := r.hosts[name]
			n := len(h.logLines(applied))
			h.signal(syscall.SIGHUP)
			poll(t, 30*time.Second, name+": "+applied, func() (bool, string, error) { return len(h.logLines(applied)) > n, "", nil })
		}
	}
	// routeTaken tells whether each walked host takes, now, a route whose
	// certificate ca signed: no route changes meanwhile, so the pool that
	// decides is the one a reload gave the server.
	routeTaken := func(step string, ca *tlstest.Authority, want bool) {
		t.Helper()
		certFile, keyFile := ca.Peer(t, fmt.Sprintf("route-%d", time.Now().UnixNano()), "127.0.0.1")
		for _, name := range walked {
			err := routeHandshake(t, r.hosts[name].cluster, certFile, keyFile)
			if (err == nil) != want {
				t.Errorf("%s: %s took a route with a certificate of the %s CA: %v, want %v", step, name, map[*tlstest.Authority]string{oldCA: "old", newCA: "new"}[ca], err == nil, want)
			}
		}
	}
	// visit starts the visitor d3 with a certificate of ca and a CA file
	// of bundle (on its data folder of the visits before), and waits until
	// it runs.
	visit := func(ca *tlstest.Authority, bundle ...*tlstest.Authority) {
		t.Helper()
		give("d3", ca, bundle...)
		if h, ok := r.hosts["d3"]; ok {
			r.launch("d3", daemonConfig{DataDir: h.dataDir, Extra: flags("d3")}, strings.TrimPrefix(h.url, "nats://"), h.cluster)
		} else {
			r.launch("d3", daemonConfig{Extra: flags("d3")}, natstest.FreeAddr(t), natstest.FreeAddr(t))
		}
		r.hosts["d3"].waitLog(60*time.Second, "reactor: running")
	}
	// joins has the visitor join, each host answer a request published on
	// another, and the visitor leave.
	joins := func(step string) {
		t.Helper()
		r.waitJoined("d3")
		for _, pair := range [][2]string{{"d1", "d2"}, {"d2", "d1"}, {"d3", "d1"}, {"d3", "d2"}, {"d1", "d3"}} {
			r.answered(step, pair[0], pair[1])
		}
		r.hosts["d3"].stop(30 * time.Second)
	}
	caLine := func(ca *tlstest.Authority) string { return "serial " + tlsfiles.Serial(ca.Certificate()) }

	// (a) The new CA added.
	for _, name := range walked {
		writeCABundle(t, hostFiles[name].ca, oldCA, newCA)
	}
	hupAll()
	routeTaken("(a) new CA added", newCA, true)
	routeTaken("(a) new CA added", oldCA, true)
	for _, name := range walked {
		line := r.hosts[name].logLines(reloaded)[0]
		if !strings.Contains(line, caLine(oldCA)) || !strings.Contains(line, caLine(newCA)) || !strings.Contains(line, " INF ") {
			t.Errorf("%s: %q, want an INF line naming both CAs' serials", name, line)
		}
	}
	visit(newCA, oldCA, newCA)
	joins("(a) new CA added")

	// (b) Each host given a certificate of the new CA.
	for _, name := range walked {
		cert := give(name, newCA, oldCA, newCA)
		h := r.hosts[name]
		h.signal(syscall.SIGHUP)
		h.waitLog(30*time.Second, "serial="+tlsfiles.Serial(cert))
	}
	visit(newCA, newCA) // trusts the new CA only: takes the two hosts' new certificates
	joins("(b) certificates of the new CA")

	// (c) The old CA removed.
	for _, name := range walked {
		writeCABundle(t, hostFiles[name].ca, newCA)
	}
	hupAll()
	routeTaken("(c) old CA removed", oldCA, false)
	routeTaken("(c) old CA removed", newCA, true)
	r.answered("(c) old CA removed", "d1", "d2")
	const refused = "failed its TLS handshake: its certificate is not signed by this host's CA"
	visit(oldCA, oldCA, newCA) // a host left behind at step (b)
	for _, name := range walked {
		r.hosts[name].waitLog(60*time.Second, refused)
	}
	if lines := r.hosts["d3"].logLines("joined the cluster"); len(lines) != 0 {
		t.Errorf("a visitor with a certificate of the removed CA joined: %q", lines)
	}
	r.hosts["d3"].stop(30 * time.Second)

	// CA files refused: the pool in force is kept.
	expired, _ := tlstest.Expired(t)
	notCA := filepath.Join(dir, "not-a-ca.pem")
	if err := os.WriteFile(notCA, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const notReloaded = "TLS CA not reloaded (SIGHUP); the CA in force is kept setting=--nats-cluster-tls-ca file="
	for name, bad := range map[string]struct{ from, why string }{
		"d1": {notCA, `err="holds no PEM certificate"`},
		"d2": {expired, `err="its CA certificate \"CN=ingestq test expired\" expired on `},
	} {
		data, err := os.ReadFile(bad.from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(hostFiles[name].ca, data, 0o644); err != nil {
			t.Fatal(err)
		}
		h := r.hosts[name]
		h.signal(syscall.SIGHUP)
		want := notReloaded + hostFiles[name].ca + " " + bad.why
		h.waitLog(30*time.Second, notReloaded)
		if lines := h.logLines(want); len(lines) != 1 || !strings.Contains(lines[0], " ERR ") {
			t.Errorf("%s, a CA file refused: %q, want one ERR line %q", name, h.logLines(notReloaded), want)
		}
	}
	visit(newCA, newCA)
	joins("CA files refused, the pools in force kept")
}

// A SIGHUP that leaves the routes' CA file as it was (one sent to reload
// the API's tokens, or a certificate) gives nats-server no options anew:
// their reload checks every client again (decision 1039). Here a token's
// client subscribed on c1 sees the first event of a batch taken in by c1
// after the SIGHUP (c1's publisher does a reload asked for before the
// events queued after it) and was never disconnected; c1 says the CA file
// is unchanged and reloads no options. c2 works only the notify step: the
// batch's first events are c1's.
//
// Before (1039): the client was disconnected (nats: connection closed by
// the server) as soon as the SIGHUP reached c1, before the batch's events:
// the reload closed every token's client on the listener, then registered
// under its holder's name (decision 959; since 1070 registered without
// one, and kept).
func TestServeHUPWithTheRoutesCAUnchangedKeepsTheNATSClients(t *testing.T) {
	t.Parallel()
	const readTok = "read-token-0123456789abcdef"
	ca := tlstest.NewAuthority(t)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("read "+readTok+" reader\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := newClusterRig(t)
	for name, states := range map[string][]string{"c1": nil, "c2": {"--states", "notify"}} {
		cert, key := ca.Peer(t, name, "127.0.0.1")
		extra := append([]string{"--nats-cluster-tls-cert", cert, "--nats-cluster-tls-key", key, "--nats-cluster-tls-ca", ca.CAFile,
			"--api-tokens", tokens}, states...)
		r.launch(name, daemonConfig{Extra: extra}, natstest.FreeAddr(t), natstest.FreeAddr(t))
	}
	r.waitJoined("c1", "c2")
	rec, disconnects := recordAsToken(t, r.hosts["c1"].url, readTok)

	c1 := r.hosts["c1"]
	const certReloaded = "TLS certificate reloaded (SIGHUP) setting=--nats-cluster-tls-cert"
	c1.signal(syscall.SIGHUP)
	c1.waitLog(30*time.Second, certReloaded) // said after the CA's reload, and whatever it asked of the bus
	bid := createBatch(t, r.q, 1)
	poll(t, 60*time.Second, "an event of batch "+bid+" or a disconnection", func() (bool, string, error) {
		return disconnects.Load() > 0 || slices.ContainsFunc(rec.snapshot(), func(e events.Event) bool { return e.BatchID == bid }), "", nil
	})
	if n := disconnects.Load(); n != 0 {
		t.Errorf("a SIGHUP with the routes' CA file unchanged disconnected the token's client %d times, want none", n)
	}
	if lines := c1.logLines("TLS CA reloaded (SIGHUP) setting=--nats-cluster-tls-ca"); len(lines) != 1 || !strings.Contains(lines[0], " changed=false") {
		t.Errorf("the CA file's reload: %q, want one line saying changed=false", lines)
	}
	if lines := c1.logLines("the NATS routes verify the other servers against the CA file in force"); len(lines) != 0 {
		t.Errorf("the NATS server's options reloaded for a CA file unchanged: %q", lines)
	}
}

// A daemon that joins another NATS over TLS (--nats tls://…, --nats-tls-ca)
// follows that server to a certificate of a new CA without a restart: the
// new CA added to its CA file and a SIGHUP; a CA file refused meanwhile
// (no certificate in it) logged at ERR, the pool in force kept; then the
// NATS server restarted with a certificate of the new CA: the daemon
// connects to it again, verifying it against the pool in force, and the
// events of a batch submitted then reach it. The CA file holds besides an
// expired CA, as a system or corporate bundle does: left out, warned of
// at start and at the reload, neither measured nor a refusal.
//
// Before: a SIGHUP did not read the file; nats.go read it at each
// reconnection itself, and the file refused there failed every one. And
// the expired CA refused the file: serve exited 2 at start.
func TestServeRotatesTheNATSCAOnHUP(t *testing.T) {
	t.Parallel()
	oldCA, newCA := tlstest.NewAuthority(t), tlstest.NewAuthority(t)
	expiredCA := tlstest.NewAuthorityWith(t, "expired", func(c *x509.Certificate) {
		c.NotBefore, c.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)
	})
	_, port, err := net.SplitHostPort(natstest.FreeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	storeDir := t.TempDir()
	// runNATS runs the NATS server on its port and store with a
	// certificate of ca.
	runNATS := func(ca *tlstest.Authority) *server.Server {
		t.Helper()
		cert, key := ca.Peer(t, fmt.Sprintf("nats-%d", time.Now().UnixNano()), "127.0.0.1")
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: cert, KeyFile: key})
		if err != nil {
			t.Fatal(err)
		}
		p, _ := strconv.Atoi(port)
		return natstest.Run(t, &server.Options{ServerName: "ext", Host: "127.0.0.1", Port: p, JetStream: true, StoreDir: storeDir,
			NoSigs: true, NoLog: true, TLS: true, TLSConfig: tc, TLSTimeout: 2})
	}
	ns := runNATS(oldCA)
	caFile := filepath.Join(t.TempDir(), "nats-ca.pem")
	writeCABundle(t, caFile, expiredCA, oldCA)
	zkAddr, root, url := zktest.Shared(t).Addr, zktest.Root(t), "tls://127.0.0.1:"+port
	httpAddr := natstest.FreeAddr(t)
	d := startDaemon(t, daemonConfig{Host: "d", ZK: zkAddr, Root: root, NATS: url, Extra: []string{"--nats-tls-ca", caFile, "--http", httpAddr}})
	// The CA, of an hour, is warned of and measured as the certificates are.
	if lines, want := d.logLines("TLS certificate expires within 14 days"), "setting=--nats-tls-ca file="+caFile+` subject="CN=ingestq test ca" `; len(lines) != 1 || !strings.Contains(lines[0], want) {
		t.Errorf("warnings at start: %q, want one with %q", lines, want)
	}
	const leftOut = "TLS CA file holds CAs expired or not valid yet, left out"
	wantLeftOut := "setting=--nats-tls-ca file=" + caFile + ` ignored=1 in_force=1 cas="\"CN=ingestq test expired\" expired on `
	if lines := d.logLines(leftOut); len(lines) != 1 || !strings.Contains(lines[0], wantLeftOut) || !strings.Contains(lines[0], " WRN ") {
		t.Errorf("the expired CA at start: %q, want one WRN with %q", lines, wantLeftOut)
	}

	writeCABundle(t, caFile, oldCA, expiredCA, newCA)
	d.signal(syscall.SIGHUP)
	d.waitLog(30*time.Second, "TLS CA reloaded (SIGHUP) setting=--nats-tls-ca file="+caFile)
	if lines := d.logLines(leftOut); len(lines) != 2 || !strings.Contains(lines[1], strings.Replace(wantLeftOut, "in_force=1", "in_force=2", 1)) {
		t.Errorf("the expired CA at the reload: %q, want a second WRN naming it", lines)
	}
	first := min(oldCA.Certificate().NotAfter.Unix(), newCA.Certificate().NotAfter.Unix())
	if got := promtest.Scrape(t, "http://"+httpAddr+"/metrics").Values("ingestq_tls_cert_expiry_timestamp_seconds", "setting"); !promtest.Equal(got, map[string]float64{"setting=nats-tls-ca": float64(first)}) {
		t.Errorf("a CA file of two: ingestq_tls_cert_expiry_timestamp_seconds %v, want the first to expire's, %d", got, first)
	}
	if err := os.WriteFile(caFile, []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d.signal(syscall.SIGHUP)
	const refused = "TLS CA not reloaded (SIGHUP); the CA in force is kept setting=--nats-tls-ca file="
	d.waitLog(30*time.Second, refused)
	if lines := d.logLines(refused + caFile + ` err="holds no PEM certificate"`); len(lines) != 1 || !strings.Contains(lines[0], " ERR ") {
		t.Errorf("a CA file refused: %q, want one ERR line naming the setting, the file and the cause", d.logLines(refused))
	}

	ns.Shutdown()
	ns.WaitForShutdown()
	runNATS(newCA)
	d.waitLog(60*time.Second, "events: NATS reconnected")
	rec := record(t, url, nats.RootCAs(newCA.CAFile))
	bid := createBatch(t, openQueue(t, zkAddr, root), 3)
	rec.waitFor(60*time.Second, "the events of a batch submitted after the reconnection", func(evs []events.Event) bool { return batchReported(evs, bid) })
}

// routeHandshake dials a NATS server's route port as a member does, with
// the certificate given, and reads what the server says first: an error
// if it refused the certificate (TLS 1.3 says so after the handshake).
func routeHandshake(t *testing.T, addr, certFile, keyFile string) error {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr,
		&tls.Config{Certificates: []tls.Certificate{pair}, InsecureSkipVerify: true}) // the server's certificate is not what is tested
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	first := make([]byte, 4)
	if _, err := io.ReadFull(conn, first); err != nil {
		return err
	}
	if string(first) != "INFO" {
		t.Fatalf("a route's first words: %q, want INFO", first)
	}
	return nil
}

// writeCABundle writes the certificates of the CAs given, one after the
// other, as file (tlstest.Concat: renamed over it, as an operator should).
func writeCABundle(t *testing.T, file string, cas ...*tlstest.Authority) {
	t.Helper()
	files := make([]string, len(cas))
	for i, ca := range cas {
		files[i] = ca.CAFile
	}
	tlstest.Concat(t, file, files...)
}

// answered publishes a request on from's NATS listener, answered on to's,
// until it is answered: the two servers route to each other (the answer's
// interest reaches from a moment after the subscription).
func (r *clusterRig) answered(step, from, to string) {
	r.t.Helper()
	connect := func(name string) *nats.Conn {
		nc, err := nats.Connect(r.hosts[name].url, r.clientOpts...)
		if err != nil {
			r.t.Fatalf("%s: %s's listener: %v", step, name, err)
		}
		return nc
	}
	answerer, asker := connect(to), connect(from)
	defer answerer.Close()
	defer asker.Close()
	subject := "test.answered." + to
	if _, err := answerer.Subscribe(subject, func(m *nats.Msg) { _ = m.Respond([]byte(to)) }); err != nil {
		r.t.Fatal(err)
	}
	if err := answerer.Flush(); err != nil {
		r.t.Fatal(err)
	}
	poll(r.t, 30*time.Second, fmt.Sprintf("%s: a request published on %s answered on %s", step, from, to), func() (bool, string, error) {
		m, err := asker.Request(subject, []byte(from), time.Second)
		if err != nil {
			return false, err.Error(), nil
		}
		return string(m.Data) == to, string(m.Data), nil
	})
}

// The expiry serve warns of and measures counts the CA file it verifies
// routes with and each served certificate's chain, not its leaf alone: on
// a real daemon with route TLS, its certificate a leaf of 30 days signed
// by an intermediate of an hour (the intermediate after it in the file),
// its CA file two CAs (one of 60 days, one of an hour),
// ingestq_tls_cert_expiry_timestamp_seconds gives the intermediate's
// expiry for nats-cluster-tls-cert and the short CA's for
// nats-cluster-tls-ca, and the start warns of both, naming the
// certificate. After a SIGHUP with the long CA alone and a leaf of it, the
// series follow and nothing is warned of; a CA added that enters its last
// 14 days while the daemon runs is warned of then.
//
// Before: no nats-cluster-tls-ca series, the leaf's expiry for the
// certificate, and no warning at start.
func TestServeWarnsOfExpiringCAsAndChains(t *testing.T) {
	t.Parallel()
	days := func(n int) func(*x509.Certificate) { return tlstest.ValidFor(time.Duration(n) * 24 * time.Hour) }
	longCA, shortCA := tlstest.NewAuthorityWith(t, "long", days(60)), tlstest.NewAuthorityWith(t, "short", func(*x509.Certificate) {})
	mid := longCA.Intermediate(t, "mid") // an hour
	dir := t.TempDir()
	certFile, keyFile, caFile := filepath.Join(dir, "route.pem"), filepath.Join(dir, "route-key.pem"), filepath.Join(dir, "ca.pem")
	leafFile, leafKey := mid.PeerWith(t, "leaf", days(30), "127.0.0.1")
	chainFile := tlstest.Concat(t, filepath.Join(t.TempDir(), "chain.pem"), leafFile, mid.CAFile)
	leaf := tlstest.Install(t, certFile, keyFile, chainFile, leafKey)
	writeCABundle(t, caFile, longCA, shortCA)
	httpAddr := natstest.FreeAddr(t)
	d := startDaemon(t, daemonConfig{Host: "d", ZK: zktest.Shared(t).Addr, Root: zktest.Root(t), Extra: []string{
		"--http", httpAddr, "--nats-listen", natstest.FreeAddr(t), "--nats-cluster", natstest.FreeAddr(t),
		"--nats-cluster-tls-cert", certFile, "--nats-cluster-tls-key", keyFile, "--nats-cluster-tls-ca", caFile}})
	wantExpiry := func(when string, cert, ca *x509.Certificate) {
		t.Helper()
		got := promtest.Scrape(t, "http://"+httpAddr+"/metrics").Values("ingestq_tls_cert_expiry_timestamp_seconds", "setting")
		want := map[string]float64{"setting=nats-cluster-tls-cert": float64(cert.NotAfter.Unix()), "setting=nats-cluster-tls-ca": float64(ca.NotAfter.Unix())}
		if !promtest.Equal(got, want) {
			t.Errorf("%s: ingestq_tls_cert_expiry_timestamp_seconds %v, want %v (the leaf's: %d)", when, got, want, leaf.NotAfter.Unix())
		}
	}
	const expiring = "TLS certificate expires within 14 days"

	wantExpiry("at start", mid.Certificate(), shortCA.Certificate())
	lines := d.logLines(expiring)
	for _, want := range []string{
		"setting=--nats-cluster-tls-cert file=" + certFile + " subject=\"CN=ingestq test mid\" not_after=",
		"setting=--nats-cluster-tls-ca file=" + caFile + " subject=\"CN=ingestq test short\" not_after=",
	} {
		if len(lines) != 2 || !strings.Contains(strings.Join(lines, "\n"), want) {
			t.Errorf("warnings at start: %q, want two, one with %q", lines, want)
		}
	}

	writeCABundle(t, caFile, longCA)
	renewedFile, renewedKey := longCA.PeerWith(t, "renewed", days(30), "127.0.0.1")
	renewed := tlstest.Install(t, certFile, keyFile, renewedFile, renewedKey)
	d.signal(syscall.SIGHUP)
	d.waitLog(30*time.Second, "serial="+tlsfiles.Serial(renewed))
	wantExpiry("after a SIGHUP with the long CA alone and a leaf of it", renewed, longCA.Certificate())
	if got := d.logLines(expiring); len(got) != len(lines) {
		t.Errorf("after a SIGHUP with nothing expiring within 14 days: %q, want the warnings of the start only", got[len(lines):])
	}

	soon := tlstest.NewAuthorityWith(t, "soon", tlstest.ValidFor(14*24*time.Hour+5*time.Second))
	writeCABundle(t, caFile, longCA, soon)
	d.signal(syscall.SIGHUP)
	poll(t, 30*time.Second, "the second CA reload", func() (bool, string, error) {
		return len(d.logLines("TLS CA reloaded (SIGHUP)")) == 2, "", nil
	})
	if got := d.logLines(expiring); len(got) != len(lines) {
		t.Errorf("a CA more than 14 days from its expiry was warned of at its reload: %q", got[len(lines):])
	}
	poll(t, 30*time.Second, "the warning once the CA has 14 days left", func() (bool, string, error) {
		return len(d.logLines(expiring)) > len(lines), "", nil
	})
	want := "setting=--nats-cluster-tls-ca file=" + caFile + " subject=\"CN=ingestq test soon\" not_after="
	if line := d.logLines(expiring)[len(lines)]; !strings.Contains(line, want) {
		t.Errorf("the warning of the CA entering its last 14 days: %q, want %q", line, want)
	}
	wantExpiry("with a CA of 14 days", renewed, soon.Certificate())
}
