package events

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/ingestq/ingestq/internal/natstest"
	"github.com/ingestq/ingestq/internal/tlsfiles"
	"github.com/ingestq/ingestq/internal/tlstest"
)

// withClusterTLS gives a member route TLS, a certificate for 127.0.0.1
// that ca signed (its files laid out by layout, when given), and records
// its log.
func (l *memberLogs) withClusterTLS(t *testing.T, ca *tlstest.Authority, layout ...func(t *testing.T, cert, key string) (string, string)) func(*Config) {
	return func(c *Config) {
		l.withSecret("")(c)
		cert, key := ca.Peer(t, c.Host, "127.0.0.1")
		for _, lay := range layout {
			cert, key = lay(t, cert, key)
		}
		tc, _, _, err := LoadClusterTLS(cert, key, ca.CAFile, c.Cluster)
		if err != nil {
			t.Fatal(err)
		}
		c.ClusterTLS, c.TLSSetting = tc, "--test-tls"
	}
}

// keyThenCert writes key and cert into one file, the key first, and
// names it as both.
func keyThenCert(t *testing.T, cert, key string) (string, string) {
	both := tlstest.Concat(t, filepath.Join(t.TempDir(), "key-and-cert.pem"), key, cert)
	return both, both
}

// peerTLS is the route TLS of a server that is no member, with the
// certificate and key given, trusting the CAs of pool.
func peerTLS(t *testing.T, cert, key string, pool *x509.CertPool) *tls.Config {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
}

// tlsRefused is what a member says of a route whose TLS handshake failed.
func tlsRefused(why string) string {
	return "events: a NATS route to or from another server failed its TLS handshake: " + why +
		"; every host of the cluster needs TLS, with a certificate of the same CA naming the host its route announces (said once per host and reason)"
}

// Members with route TLS make one stream: an event published on one is
// replayed on every other. Three servers that are no members try the
// routes and are refused at every try: one with no TLS, one whose
// certificate another CA signed (routed at a), one whose certificate names
// another host (a dials it); none has a route or receives an event, and a
// says so once per reason, naming the setting, though each is tried every
// second.
func TestClusterTLSRoutes(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewAuthority(t)
	logs := &memberLogs{}
	ms := openClusterWith(t, logs.withClusterTLS(t, ca), "a", "b", "c")
	for _, m := range ms {
		publishN(t, m, "bid-1", 1)
	}
	for _, m := range ms {
		wantSeen(t, m, map[string]int{"a": 1, "b": 1, "c": 1})
	}
	a := ms[0]

	ours := a.cfg.ClusterTLS.RootCAs
	otherCert, otherKey := tlstest.NewAuthority(t).Peer(t, "other-ca", "127.0.0.1")
	elsewhereCert, elsewhereKey := ca.Peer(t, "elsewhere", "127.0.0.2")
	rogues := map[string]*server.Options{
		"the other server has no TLS on its routes":               {Routes: server.RoutesFromStr(a.route)},
		"its certificate is not signed by this host's CA":         {Routes: server.RoutesFromStr(a.route), Cluster: server.ClusterOpts{TLSConfig: peerTLS(t, otherCert, otherKey, ours)}},
		"its certificate does not name the host it was dialed at": {Cluster: server.ClusterOpts{TLSConfig: peerTLS(t, elsewhereCert, elsewhereKey, ours)}},
	}
	var subs []*nats.Subscription
	var servers []*server.Server
	for why, opts := range rogues {
		opts.ServerName, opts.Host, opts.Port, opts.NoSigs, opts.NoLog = "rogue-"+strings.Fields(why)[1], "127.0.0.1", server.RANDOM_PORT, true, true
		opts.Cluster.Name, opts.Cluster.Host, opts.Cluster.Port = "test", "127.0.0.1", server.RANDOM_PORT
		ns := natstest.Run(t, opts)
		sub, err := connect(t, ns.ClientURL()).SubscribeSync(SubjectAll)
		if err != nil {
			t.Fatal(err)
		}
		subs, servers = append(subs, sub), append(servers, ns)
		if opts.Routes == nil {
			a.SetRoutes(append(routesOf(ms[1:]), "nats://"+ns.ClusterAddr().String()))
		}
	}
	// What crypto/tls says of each, in the lines of every try.
	causes := map[string]string{"the other server has no TLS on its routes": "first record does not look like a TLS handshake",
		"its certificate is not signed by this host's CA":         "certificate signed by unknown authority",
		"its certificate does not name the host it was dialed at": "certificate is valid for 127.0.0.2, not 127.0.0.1"}
	for why := range rogues {
		waitFor(t, "a to refuse three times: "+why, func() bool { return logs.of("a").containing(causes[why]) >= 3 })
	}
	publishN(t, a, "bid-2", 1)
	for why := range rogues {
		if n := logs.of("a").count(slog.LevelWarn, tlsRefused(why)); n != 1 {
			t.Errorf("a said %q %d times, want once", tlsRefused(why), n)
		}
		if at := logs.of("a").attrs(tlsRefused(why)); at["setting"] != "--test-tls" || at["host"] != "127.0.0.1" {
			t.Errorf("a's line %q: %v, want it to name the setting and the host", tlsRefused(why), at)
		}
	}
	for i, ns := range servers {
		if n := ns.NumRoutes(); n != 0 {
			t.Errorf("rogue %s has %d routes into the cluster, want none", ns.Name(), n)
		}
		if n, _, _ := subs[i].Pending(); n != 0 {
			t.Errorf("rogue %s received %d of the cluster's messages, want none", ns.Name(), n)
		}
	}
	wantSeen(t, ms[2], map[string]int{"a": 2, "b": 1, "c": 1})
	for _, m := range ms[1:] { // members with TLS joining one another: no false alarm
		if said := logs.of(m.cfg.Host).warned("failed its TLS handshake"); said != "" {
			t.Errorf("%s warned %q", m.cfg.Host, said)
		}
	}
}

// Route TLS and the cluster secret together: members with both make one
// stream, and a server whose certificate the CA signed but that presents
// no secret is refused for it, as without TLS.
func TestClusterTLSWithSecret(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewAuthority(t)
	logs := &memberLogs{}
	ms := openClusterWith(t, func(c *Config) {
		logs.withClusterTLS(t, ca)(c)
		c.ClusterSecret = testSecret
	}, "a", "b")
	publishN(t, ms[0], "bid-1", 1)
	publishN(t, ms[1], "bid-1", 2)
	wantSeen(t, ms[0], map[string]int{"a": 1, "b": 2})

	cert, key := ca.Peer(t, "no-secret", "127.0.0.1")
	rogue := natstest.Run(t, &server.Options{ServerName: "rogue", Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true,
		Cluster: server.ClusterOpts{Name: "test", Host: "127.0.0.1", Port: server.RANDOM_PORT, TLSConfig: peerTLS(t, cert, key, ms[0].cfg.ClusterTLS.RootCAs)},
		Routes:  server.RoutesFromStr(ms[0].route)})
	const refused = "events: refused a NATS route from another server: it presented no cluster secret" +
		"; every host of the cluster needs the same secret (said once per host)"
	waitFor(t, "a to refuse the rogue's route for its secret", func() bool { return logs.of("a").count(slog.LevelWarn, refused) > 0 })
	sub, err := connect(t, rogue.ClientURL()).SubscribeSync(SubjectAll)
	if err != nil {
		t.Fatal(err)
	}
	publishN(t, ms[1], "bid-2", 1)
	// Not the rogue's NumRoutes: it counts its route from a's INFO on until
	// a's refusal of its CONNECT closes it.
	rz, err := ms[0].emb.server().Routez(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rz.Routes {
		if r.RemoteName == "rogue" {
			t.Errorf("a took a route from a server with a certificate of the CA but no secret: %+v", r)
		}
	}
	if n, _, _ := sub.Pending(); n != 0 {
		t.Errorf("a server with a certificate of the CA but no secret received %d of the cluster's messages, want none", n)
	}
	if n := logs.of("a").containing("failed its TLS handshake"); n != 0 {
		t.Errorf("a said %d times a TLS handshake failed: the rogue's certificate is good", n)
	}
	logs.noSecretLogged(t)
}

// A file holding the key and the certificate together, the key first (as
// some tools write them), given as both the certificate and the key, is
// taken, as crypto/tls takes it: members with such files make one stream.
func TestClusterTLSKeyAndCertInOneFile(t *testing.T) {
	t.Parallel()
	logs := &memberLogs{}
	ms := openClusterWith(t, logs.withClusterTLS(t, tlstest.NewAuthority(t), keyThenCert), "a", "b")
	publishN(t, ms[0], "bid-1", 1)
	publishN(t, ms[1], "bid-1", 2)
	for _, m := range ms {
		wantSeen(t, m, map[string]int{"a": 1, "b": 2})
	}
}

// A certificate an intermediate CA signed, followed in its file by the
// intermediate's, routes with a CA file holding the root alone: members
// with such chains make one stream.
func TestClusterTLSIntermediateCA(t *testing.T) {
	t.Parallel()
	root := tlstest.NewAuthority(t)
	mid := root.Intermediate(t, "intermediate")
	logs := &memberLogs{}
	ms := openClusterWith(t, func(c *Config) {
		logs.withSecret("")(c)
		cert, key := mid.Peer(t, c.Host, "127.0.0.1")
		tc, _, _, err := LoadClusterTLS(tlstest.Concat(t, filepath.Join(t.TempDir(), "chain.pem"), cert, mid.CAFile), key, root.CAFile, c.Cluster)
		if err != nil {
			t.Fatal(err)
		}
		c.ClusterTLS = tc
	}, "a", "b")
	publishN(t, ms[0], "bid-1", 1)
	publishN(t, ms[1], "bid-1", 2)
	for _, m := range ms {
		wantSeen(t, m, map[string]int{"a": 1, "b": 2})
	}
}

// A member's route certificate renewed (tlsfiles.Pair.Reload) is the one
// its server presents at the next handshake, both ways, without a
// restart: to a route that dials it (GetCertificate) and to the server it
// dials (GetClientCertificate), nats-server cloning the *tls.Config.
func TestClusterTLSServesTheReloadedCertificate(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewAuthority(t)
	pool := ca.Pool()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	put := installer(t, certFile, keyFile)
	firstSerial := put(ca.Peer(t, "first", "127.0.0.1"))
	// A route of the test's, which the member dials: it takes each
	// handshake and tells the certificate the member presented.
	peer := tlsPeer(t, ca, pool)
	var pair *tlsfiles.Pair
	m := openMemberWith(t, "m", func(c *Config) {
		tc, p, _, err := LoadClusterTLS(certFile, keyFile, ca.CAFile, c.Cluster)
		if err != nil {
			t.Fatal(err)
		}
		pair, c.ClusterTLS, c.TLSSetting, c.Routes = p, tc, "--test-tls", []string{"nats-route://" + peer.addr}
	})
	u, err := url.Parse(m.route)
	if err != nil {
		t.Fatal(err)
	}
	peerCert, peerKey := ca.Peer(t, "dialer", "127.0.0.1")
	dialed := func() string {
		t.Helper()
		conn, err := tls.Dial("tcp", u.Host, peerTLS(t, peerCert, peerKey, pool))
		if err != nil {
			t.Fatalf("a route's handshake with the member: %v", err)
		}
		defer conn.Close()
		return tlsfiles.Serial(conn.ConnectionState().PeerCertificates[0])
	}
	if got, want := dialed(), firstSerial; got != want {
		t.Fatalf("a route dialing the member: serial %s, want %s", got, want)
	}
	peer.waitFor(t, firstSerial)
	secondSerial := put(ca.Peer(t, "second", "127.0.0.1"))
	if err := pair.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := dialed(); got != secondSerial {
		t.Errorf("a route dialing the member after the reload: serial %s, want the second's, %s", got, secondSerial)
	}
	peer.waitFor(t, secondSerial)
}

// installer renews a member's certificate in place: it copies a
// certificate and its key over certFile and keyFile and returns the
// certificate's serial.
func installer(t *testing.T, certFile, keyFile string) func(cert, key string) string {
	return func(cert, key string) string {
		t.Helper()
		return tlsfiles.Serial(tlstest.Install(t, certFile, keyFile, cert, key))
	}
}

// routePeer is a TLS listener standing for a route's other end: it tells
// the serial of each client certificate presented to it.
type routePeer struct {
	addr    string
	serials chan string
}

func tlsPeer(t *testing.T, ca *tlstest.Authority, pool *x509.CertPool) *routePeer {
	t.Helper()
	cert, key := ca.Peer(t, "peer", "127.0.0.1")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", peerTLS(t, cert, key, pool))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := &routePeer{addr: ln.Addr().String(), serials: make(chan string, 100)}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			tc := conn.(*tls.Conn)
			if tc.Handshake() == nil {
				if pc := tc.ConnectionState().PeerCertificates; len(pc) > 0 {
					select {
					case p.serials <- tlsfiles.Serial(pc[0]):
					default:
					}
				}
			}
			conn.Close()
		}
	}()
	return p
}

// waitFor waits until the member dials the peer with the certificate of
// serial (it dials again each second after a route fails).
func (p *routePeer) waitFor(t *testing.T, serial string) {
	t.Helper()
	timeout := time.After(testTimeout)
	var seen []string
	for {
		select {
		case s := <-p.serials:
			if s == serial {
				return
			}
			seen = append(seen, s)
		case <-timeout:
			t.Fatalf("the member did not dial with the certificate of serial %s (it did with %v)", serial, seen)
		}
	}
}

// Two real members with route TLS: a's certificate renewed in place
// (tlsfiles.Pair.Reload, as serve's SIGHUP does) is the one b sees once the
// routes are made again (b restarted), both ways: b dialing a gets it as
// a's server certificate, a dialing b presents it as its client
// certificate; events flow. A renewal that names another host or that
// another CA signed is refused by the reload, checked as at start.
func TestClusterTLSRenewedCertificateReachesTheOtherMember(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewAuthority(t)
	dir := t.TempDir()
	aCert, aKey := filepath.Join(dir, "a.pem"), filepath.Join(dir, "a-key.pem")
	put := installer(t, aCert, aKey)
	first := put(ca.Peer(t, "a1", "127.0.0.1"))
	var aPair *tlsfiles.Pair
	a := openMemberWith(t, "a", func(c *Config) {
		tc, p, _, err := LoadClusterTLS(aCert, aKey, ca.CAFile, c.Cluster)
		if err != nil {
			t.Fatal(err)
		}
		aPair, c.ClusterTLS, c.TLSSetting = p, tc, "--test-tls"
	})
	seen := &peerSerials{}
	bCert, bKey := ca.Peer(t, "b", "127.0.0.1")
	withB := func(c *Config) {
		tc, _, _, err := LoadClusterTLS(bCert, bKey, ca.CAFile, c.Cluster)
		if err != nil {
			t.Fatal(err)
		}
		// b records the certificate a presents: as the server b dialed
		// (VerifyConnection) and, through GetConfigForClient, which only
		// the accepting side calls, as the client that dialed b.
		tc.VerifyConnection = seen.record("b dialed a")
		asServer := tc.Clone()
		asServer.VerifyConnection = seen.record("a dialed b")
		tc.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) { return asServer, nil }
		c.ClusterTLS, c.TLSSetting = tc, "--test-tls"
	}
	b := openMemberWith(t, "b", withB, a)
	a.SetRoutes([]string{b.route})
	for _, way := range []string{"b dialed a", "a dialed b"} {
		waitFor(t, way+" with a's first certificate", func() bool { return seen.has(way, first) })
	}

	second := put(ca.Peer(t, "a2", "127.0.0.1"))
	if err := aPair.Reload(); err != nil {
		t.Fatal(err)
	}
	bData, bCluster := b.cfg.DataDir, b.cfg.Cluster
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openMemberWith(t, "b", func(c *Config) { withB(c); c.DataDir, c.Cluster = bData, bCluster }, a)
	for _, way := range []string{"b dialed a", "a dialed b"} {
		waitFor(t, way+" with a's renewed certificate", func() bool { return seen.has(way, second) })
	}
	publishN(t, a, "bid-1", 1)
	publishN(t, b, "bid-1", 1)
	wantSeen(t, b, map[string]int{"a": 1, "b": 1})

	for _, c := range []struct {
		what, want string
		issue      func() (cert, key string)
	}{
		{"naming another host", "names 127.0.0.2, not 127.0.0.1", func() (string, string) { return ca.Peer(t, "elsewhere", "127.0.0.2") }},
		{"of another CA", "not signed by the CA in " + ca.CAFile, func() (string, string) { return tlstest.NewAuthority(t).Peer(t, "other-ca", "127.0.0.1") }},
	} {
		cert, key := c.issue()
		tlstest.Install(t, aCert, aKey, cert, key)
		if err := aPair.Reload(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("a renewal %s: Reload %v, want it refused saying %q", c.what, err, c.want)
		}
		if got := tlsfiles.Serial(aPair.Leaf()); got != second {
			t.Errorf("after a renewal %s was refused: serial %s in force, want %s", c.what, got, second)
		}
	}
}

// peerSerials records the serials of the certificates a member's peer
// presented, by way of the connection.
type peerSerials struct {
	mu  sync.Mutex
	got map[string][]string
}

func (p *peerSerials) record(way string) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.got == nil {
			p.got = map[string][]string{}
		}
		if len(cs.PeerCertificates) > 0 {
			p.got[way] = append(p.got[way], tlsfiles.Serial(cs.PeerCertificates[0]))
		}
		return nil
	}
}

func (p *peerSerials) has(way, serial string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Contains(p.got[way], serial)
}

// A routes' CA file that holds an expired CA beside the one in use is
// taken without it (tlsfiles.LoadCA); a member's certificate signed by
// the expired CA is refused naming it as left out of the file, not as of
// an issuer the file would seem to hold.
func TestClusterTLSCertificateOfACALeftOut(t *testing.T) {
	t.Parallel()
	old := tlstest.NewAuthorityWith(t, "old", func(c *x509.Certificate) {
		c.NotBefore, c.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)
	})
	current := tlstest.NewAuthority(t)
	caFile := tlstest.Concat(t, filepath.Join(t.TempDir(), "ca.pem"), old.CAFile, current.CAFile)
	cert, key := current.Peer(t, "a", "127.0.0.1")
	if _, _, ca, err := LoadClusterTLS(cert, key, caFile, "127.0.0.1:1"); err != nil || len(ca.Certificates()) != 1 || len(ca.Ignored()) != 1 {
		t.Fatalf("a certificate of the CA in use, its CA file holding an expired CA too: %v; want it taken, the expired CA left out", err)
	}
	cert, key = old.Peer(t, "b", "127.0.0.1")
	want := "signed by a CA in " + caFile + ` left out of it, "CN=ingestq test old" expired on `
	if _, _, _, err := LoadClusterTLS(cert, key, caFile, "127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a certificate of the expired CA: %v; want %q", err, want)
	}
}
