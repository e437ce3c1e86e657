package tlsfiles_test

import (
	"bytes"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/internal/tlsfiles"
	"github.com/ingestq/ingestq/internal/tlstest"
)

// A CA file is refused when it is missing, holds no certificate, holds a
// block cut short, or holds a certificate expired or not valid yet (one of
// a bundle too): a *FileError ("ca") naming the file and what is wrong. A
// reload refused leaves the pool in force; one taken replaces it.
func TestCAReloadKeepsThePoolInForceOnARefusal(t *testing.T) {
	t.Parallel()
	first, second := tlstest.NewAuthority(t), tlstest.NewAuthority(t)
	expired, _ := tlstest.Expired(t)
	future, _ := tlstest.NotYetValid(t)
	read := func(file string) []byte {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	file := filepath.Join(t.TempDir(), "ca.pem")
	put := func(data ...[]byte) {
		t.Helper()
		if err := os.WriteFile(file, bytes.Join(data, nil), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// trusts tells whether the pool in force verifies a peer of the CA of.
	peers := map[*tlstest.Authority]*x509.Certificate{}
	for _, of := range []*tlstest.Authority{first, second} {
		cert, key := of.Peer(t, "peer", "127.0.0.1")
		peers[of] = tlstest.Install(t, filepath.Join(t.TempDir(), "cert.pem"), filepath.Join(t.TempDir(), "key.pem"), cert, key)
	}
	trusts := func(ca *tlsfiles.CA, of *tlstest.Authority) bool {
		_, err := peers[of].Verify(x509.VerifyOptions{Roots: ca.Pool()})
		return err == nil
	}

	if _, err := tlsfiles.LoadCA(filepath.Join(t.TempDir(), "missing.pem")); err == nil || !strings.Contains(err.Error(), "no such file or directory") {
		t.Errorf("a missing CA file: %v", err)
	}
	put(read(first.CAFile))
	ca, err := tlsfiles.LoadCA(file)
	if err != nil {
		t.Fatal(err)
	}
	put(read(first.CAFile), read(second.CAFile))
	if err := ca.Reload(); err != nil || len(ca.Certificates()) != 2 || !trusts(ca, first) || !trusts(ca, second) {
		t.Fatalf("a bundle of two CAs: %v, %d certificates; want both trusted", err, len(ca.Certificates()))
	}
	firstPEM := read(first.CAFile)
	for _, c := range []struct {
		what string
		data [][]byte
		want string
	}{
		{"no certificate", [][]byte{[]byte("not a certificate\n")}, "holds no PEM certificate"},
		{"a block cut short", [][]byte{firstPEM, firstPEM[:len(firstPEM)/2]}, "a PEM block in it is cut short"},
		{"an expired CA in a bundle", [][]byte{firstPEM, read(expired)}, `its CA certificate "CN=ingestq test expired" expired on `},
		{"a CA not valid yet", [][]byte{read(future)}, `its CA certificate "CN=ingestq test future" not valid before `},
	} {
		put(c.data...)
		var bad *tlsfiles.FileError
		if err := ca.Reload(); !errors.As(err, &bad) || bad.Which != "ca" || bad.File != file || !strings.Contains(bad.Err.Error(), c.want) {
			t.Errorf("%s: %v; want a ca error on %s saying %q", c.what, err, file, c.want)
		}
		if !trusts(ca, first) || !trusts(ca, second) {
			t.Errorf("%s: the pool in force changed", c.what)
		}
	}
	put(read(second.CAFile))
	if err := ca.Reload(); err != nil || trusts(ca, first) || !trusts(ca, second) {
		t.Errorf("the first CA removed: %v; want only the second trusted", err)
	}
}

// The certificate that expires first, which serve warns of and measures,
// is of a served chain the intermediate when it ends before the leaf, and
// of a CA bundle the CA that ends first, wherever it is in the file.
func TestExpiresFirstIsOfTheWholeChainAndBundle(t *testing.T) {
	t.Parallel()
	until := func(d time.Duration) func(*x509.Certificate) {
		return func(c *x509.Certificate) { c.NotBefore, c.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(d) }
	}
	read := func(file string) []byte {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	dir := t.TempDir()
	write := func(name string, data ...[]byte) string {
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, bytes.Join(data, nil), 0o600); err != nil {
			t.Fatal(err)
		}
		return file
	}
	root := tlstest.NewAuthorityWith(t, "root", until(5*time.Hour))
	mid := root.Intermediate(t, "mid") // an hour
	for _, c := range []struct {
		leaf string
		left time.Duration
		want string
	}{{"long-lived", 3 * time.Hour, "CN=ingestq test mid"}, {"short-lived", time.Minute, "CN=ingestq test short-lived"}} {
		cert, key := mid.PeerWith(t, c.leaf, until(c.left), "127.0.0.1")
		p, err := tlsfiles.Load(write(c.leaf+"-chain.pem", read(cert), read(mid.CAFile)), key, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.ExpiresFirst().Subject.String(); got != c.want || p.Leaf().Subject.String() != "CN=ingestq test "+c.leaf {
			t.Errorf("a leaf of %v followed by its intermediate of an hour: expires first %s, leaf %s; want %s", c.left, got, p.Leaf().Subject, c.want)
		}
	}

	short := tlstest.NewAuthorityWith(t, "short", until(2*time.Hour))
	for _, bundle := range [][]*tlstest.Authority{{root, short}, {short, root}} {
		ca, err := tlsfiles.LoadCA(write("ca.pem", read(bundle[0].CAFile), read(bundle[1].CAFile)))
		if err != nil {
			t.Fatal(err)
		}
		if got := ca.ExpiresFirst().Subject.String(); got != "CN=ingestq test short" {
			t.Errorf("a bundle of %s then %s: expires first %s, want CN=ingestq test short", bundle[0].Certificate().Subject, bundle[1].Certificate().Subject, got)
		}
	}
}

// A CA file refused for an expired CA says what to do: a system bundle
// (Debian's /etc/ssl/certs/ca-certificates.crt held five expired CAs of
// 144 when measured) or a rotation's old CA left in the file is mended by
// removing it, which the error says beside the re-issue.
func TestAnExpiredCASaysToRemoveItOrReissueIt(t *testing.T) {
	t.Parallel()
	expired, _ := tlstest.Expired(t)
	data, err := os.ReadFile(expired)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "bundle.pem")
	valid, err := os.ReadFile(tlstest.NewAuthority(t).CAFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, append(valid, data...), 0o644); err != nil {
		t.Fatal(err)
	}
	const want = "remove it from the file if no peer's certificate is signed by it any more (a rotation's old CA, a system bundle's), else re-issue it"
	if _, err := tlsfiles.LoadCA(file); err == nil || !strings.Contains(err.Error(), `its CA certificate "CN=ingestq test expired" expired on `) || !strings.Contains(err.Error(), want) {
		t.Errorf("a bundle with an expired CA: %v; want it named and %q", err, want)
	}
}
