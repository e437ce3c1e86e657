// Package tlstest makes TLS certificates for tests.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// SelfSigned writes, in a temporary folder, a certificate for 127.0.0.1
// and its key, and returns the pool that trusts it.
func SelfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	c := issue(t, t.TempDir(), "cert", server(), nil)
	pool = x509.NewCertPool()
	pool.AddCert(c.cert)
	return c.certFile, c.keyFile, pool
}

// Files are the PEM files of a CA and of a server and a client certificate
// it signed.
type Files struct{ CA, ServerCert, ServerKey, ClientCert, ClientKey string }

// Mutual writes, in a temporary folder, a CA, a server certificate for
// 127.0.0.1 and a client certificate, both signed by the CA: mutual TLS.
func Mutual(t *testing.T) Files {
	t.Helper()
	a := NewAuthority(t)
	srv := issue(t, a.dir, "server", server(), &a.ca)
	client := issue(t, a.dir, "client", &x509.Certificate{KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, &a.ca)
	return Files{CA: a.CAFile, ServerCert: srv.certFile, ServerKey: srv.keyFile, ClientCert: client.certFile, ClientKey: client.keyFile}
}

// Authority is a CA of a test's own, its certificate in CAFile, that
// signs the certificates of peers (Peer).
type Authority struct {
	CAFile string
	dir    string
	ca     issued
}

// NewAuthority writes, in a temporary folder, a new CA.
func NewAuthority(t *testing.T) *Authority {
	t.Helper()
	return NewAuthorityWith(t, "ca", func(*x509.Certificate) {})
}

// NewAuthorityWith is NewAuthority named name (its subject's CN is
// "ingestq test " + name), its certificate's template changed by set
// first: dates of the test's own.
func NewAuthorityWith(t *testing.T, name string, set func(*x509.Certificate)) *Authority {
	t.Helper()
	dir := t.TempDir()
	tmpl := authority()
	set(tmpl)
	ca := issue(t, dir, name, tmpl, nil)
	return &Authority{CAFile: ca.certFile, dir: dir, ca: ca}
}

// Pool is a pool that trusts the CA: for its peers' and clients'
// RootCAs and ClientCAs.
func (a *Authority) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(a.ca.cert)
	return pool
}

// Certificate is the CA's certificate.
func (a *Authority) Certificate() *x509.Certificate { return a.ca.cert }

// Intermediate is a CA that a signed, its certificate in CAFile: a
// certificate it signs (Peer) chains to a through it.
func (a *Authority) Intermediate(t *testing.T, name string) *Authority {
	t.Helper()
	return a.IntermediateWith(t, name, func(*x509.Certificate) {})
}

// IntermediateWith is Intermediate with its certificate's template
// changed by set first: dates of the test's own.
func (a *Authority) IntermediateWith(t *testing.T, name string, set func(*x509.Certificate)) *Authority {
	t.Helper()
	tmpl := authority()
	set(tmpl)
	c := issue(t, a.dir, name, tmpl, &a.ca)
	return &Authority{CAFile: c.certFile, dir: a.dir, ca: c}
}

// Peer writes a certificate the CA signed for hosts (IP addresses or
// names), good at both ends of a connection (server and client
// authentication) as a NATS route's must be, and its key.
func (a *Authority) Peer(t *testing.T, name string, hosts ...string) (certFile, keyFile string) {
	t.Helper()
	c := issue(t, a.dir, name, peer(hosts), &a.ca)
	return c.certFile, c.keyFile
}

// PeerWith is Peer with its template changed by set first: a serial or
// dates of the test's own.
func (a *Authority) PeerWith(t *testing.T, name string, set func(*x509.Certificate), hosts ...string) (certFile, keyFile string) {
	t.Helper()
	tmpl := peer(hosts)
	set(tmpl)
	c := issue(t, a.dir, name, tmpl, &a.ca)
	return c.certFile, c.keyFile
}

// ExpiredPeer is Peer's certificate expired an hour ago.
func (a *Authority) ExpiredPeer(t *testing.T, name string, hosts ...string) (certFile, keyFile string) {
	t.Helper()
	c := issue(t, a.dir, name, expired(peer(hosts)), &a.ca)
	return c.certFile, c.keyFile
}

// peer is the template of a peer certificate for hosts.
func peer(hosts []string) *x509.Certificate {
	tmpl := &x509.Certificate{KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return tmpl
}

// Expired writes, in a temporary folder, a self-signed certificate for
// 127.0.0.1 that expired an hour ago, and its key.
func Expired(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	c := issue(t, t.TempDir(), "expired", expired(server()), nil)
	return c.certFile, c.keyFile
}

// NotYetValid writes, in a temporary folder, a self-signed certificate for
// 127.0.0.1 valid from an hour from now, and its key.
func NotYetValid(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	tmpl := server()
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(time.Hour), time.Now().Add(2*time.Hour)
	c := issue(t, t.TempDir(), "future", tmpl, nil)
	return c.certFile, c.keyFile
}

// Install copies a certificate file and its key file (as made above) over
// certFile and keyFile, as an operator renewing a certificate in place
// does, and returns the certificate installed: the first in its file.
func Install(t *testing.T, certFile, keyFile, fromCert, fromKey string) *x509.Certificate {
	t.Helper()
	var certPEM []byte
	for _, fromTo := range [][2]string{{fromCert, certFile}, {fromKey, keyFile}} {
		data, err := os.ReadFile(fromTo[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(fromTo[1], data, 0o600); err != nil {
			t.Fatal(err)
		}
		if certPEM == nil {
			certPEM = data
		}
	}
	b, _ := pem.Decode(certPEM)
	if b == nil {
		t.Fatalf("%s: no PEM block", fromCert)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", fromCert, err)
	}
	return c
}

// Concat writes the files from, one after the other, as file (a chain,
// a CA bundle, a key and its certificate), beside it and renamed over it
// as an operator should, and returns file.
func Concat(t *testing.T, file string, from ...string) string {
	t.Helper()
	var all []byte
	for _, f := range from {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, data...)
	}
	if err := os.WriteFile(file+".new", all, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(file+".new", file); err != nil {
		t.Fatal(err)
	}
	return file
}

// ValidFor sets a template's dates (PeerWith, NewAuthorityWith,
// IntermediateWith): valid from an hour ago until d from now.
func ValidFor(d time.Duration) func(*x509.Certificate) {
	return func(c *x509.Certificate) { c.NotBefore, c.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(d) }
}

// authority is the template of a CA's certificate.
func authority() *x509.Certificate {
	return &x509.Certificate{IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
}

// expired is tmpl valid for an hour until an hour ago.
func expired(tmpl *x509.Certificate) *x509.Certificate {
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)
	return tmpl
}

// server is the template of a server certificate for 127.0.0.1.
func server() *x509.Certificate {
	return &x509.Certificate{IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
}

type issued struct {
	cert              *x509.Certificate
	key               *ecdsa.PrivateKey
	certFile, keyFile string
}

// issue makes a certificate from tmpl, named name, valid for an hour either
// side of now unless tmpl says when (NotAfter), of a random serial unless
// tmpl has one, signed by parent (nil: by itself), and writes it and its
// key in dir as name.pem and name-key.pem.
func issue(t *testing.T, dir, name string, tmpl *x509.Certificate, parent *issued) issued {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if tmpl.SerialNumber == nil {
		if tmpl.SerialNumber, err = rand.Int(rand.Reader, big.NewInt(1<<62)); err != nil {
			t.Fatal(err)
		}
	}
	tmpl.Subject = pkix.Name{CommonName: "ingestq test " + name}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	}
	signer, signKey := tmpl, key
	if parent != nil {
		signer, signKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c := issued{key: key, certFile: filepath.Join(dir, name+".pem"), keyFile: filepath.Join(dir, name+"-key.pem")}
	if err := os.WriteFile(c.certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	if c.cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	return c
}
