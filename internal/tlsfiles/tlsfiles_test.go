package tlsfiles_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/internal/tlsfiles"
	"github.com/ingestq/ingestq/internal/tlstest"
)

// A server's certificate is refused when a file is missing or holds no
// certificate, the key is another certificate's, the certificate has
// expired or is not valid yet, or it is not for servers: a *FileError
// naming the file (cert or key) and what is wrong.
func TestLoadRefuses(t *testing.T) {
	t.Parallel()
	pki := tlstest.Mutual(t)
	expired, expiredKey := tlstest.Expired(t)
	future, futureKey := tlstest.NotYetValid(t)
	missing := filepath.Join(t.TempDir(), "missing.pem")
	// A chain read half written: the leaf whole, the next certificate cut.
	leaf, err := os.ReadFile(pki.ServerCert)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.pem")
	if err := os.WriteFile(cut, append(leaf, leaf[:len(leaf)/2]...), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what, cert, key string
		which, file     string
		want            string
	}{
		{"a missing certificate", missing, pki.ServerKey, "cert", missing, "no such file or directory"},
		{"a key for a certificate", pki.ServerKey, pki.ServerKey, "cert", pki.ServerKey, "holds no PEM certificate"},
		{"a chain cut short", cut, pki.ServerKey, "cert", cut, "a PEM block in it is cut short (the file read while it was written?)"},
		{"a key of another certificate", pki.ServerCert, pki.ClientKey, "key", pki.ClientKey, "not the key of the certificate in " + pki.ServerCert},
		{"an expired certificate", expired, expiredKey, "cert", expired, "expired on "},
		{"a certificate not valid yet", future, futureKey, "cert", future, "not valid before "},
		{"a client's certificate", pki.ClientCert, pki.ClientKey, "cert", pki.ClientCert, "its extended key usage does not allow a server: want serverAuth"},
	} {
		_, err := tlsfiles.Load(c.cert, c.key, tlsfiles.ServerUsage)
		var bad *tlsfiles.FileError
		if !errors.As(err, &bad) || bad.Which != c.which || bad.File != c.file || !strings.Contains(bad.Err.Error(), c.want) {
			t.Errorf("%s: %v; want a %s error on %s saying %q", c.what, err, c.which, c.file, c.want)
		}
	}
	if _, err := tlsfiles.Load(pki.ServerCert, pki.ServerKey, tlsfiles.ServerUsage); err != nil {
		t.Errorf("a server's certificate: %v", err)
	}
}

// Reload serves the pair the files hold now, checked as at Load; a pair
// refused leaves the one in force, served to the next handshakes.
func TestReloadKeepsThePairInForceOnARefusal(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewAuthority(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	put := func(cert, key string) { tlstest.Install(t, certFile, keyFile, cert, key) }
	put(ca.Peer(t, "first", "127.0.0.1"))
	p, err := tlsfiles.Load(certFile, keyFile, tlsfiles.ServerUsage)
	if err != nil {
		t.Fatal(err)
	}
	first := p.Leaf().SerialNumber
	put(ca.Peer(t, "second", "127.0.0.1"))
	if err := p.Reload(); err != nil {
		t.Fatal(err)
	}
	second := p.Leaf().SerialNumber
	if second.Cmp(first) == 0 {
		t.Fatal("Reload kept the first certificate")
	}
	put(ca.ExpiredPeer(t, "expired", "127.0.0.1"))
	var bad *tlsfiles.FileError
	if err := p.Reload(); !errors.As(err, &bad) || bad.File != certFile || !strings.Contains(err.Error(), "expired on") {
		t.Fatalf("Reload of an expired certificate: %v, want it refused, naming %s", err, certFile)
	}
	for what, got := range map[string]func() (*tls.Certificate, error){
		"GetCertificate":       func() (*tls.Certificate, error) { return p.GetCertificate(nil) },
		"GetClientCertificate": func() (*tls.Certificate, error) { return p.GetClientCertificate(nil) },
	} {
		c, err := got()
		if err != nil || c.Leaf.SerialNumber.Cmp(second) != 0 {
			t.Errorf("%s after a refused reload: serial %v (%v), want the second's, %v", what, c.Leaf.SerialNumber, err, second)
		}
	}
}

// A serial is logged as openssl x509 -serial shows it: whole bytes in
// hexadecimal, a leading 0 kept (Let's Encrypt's often begin with 03).
func TestSerialAsOpenSSLShowsIt(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{0x03A1B2: "03A1B2", 0xFF: "FF", 0: "00"} {
		if got := tlsfiles.Serial(&x509.Certificate{SerialNumber: big.NewInt(n)}); got != want {
			t.Errorf("serial %#x: %s, want %s", n, got, want)
		}
	}
}
