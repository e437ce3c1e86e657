package tlsfiles_test

import (
	"bytes"
	"crypto/x509"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/internal/tlsfiles"
	"github.com/ingestq/ingestq/internal/tlstest"
)

// A CA file is refused when it is missing, holds no certificate, holds a
// block cut short, or holds no CA valid now (its one CA expired or not
// valid yet, or all of a bundle's): a *FileError ("ca") naming the file
// and what is wrong. A reload refused leaves the pool in force; one taken
// replaces it.
func TestCAReloadKeepsThePoolInForceOnARefusal(t *testing.T) {
	t.Parallel()
	first, second := tlstest.NewAuthority(t), tlstest.NewAuthority(t)
	expired, _ := tlstest.Expired(t)
	future, _ := tlstest.NotYetValid(t)
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
	tlstest.Concat(t, file, first.CAFile)
	ca, err := tlsfiles.LoadCA(file)
	if err != nil {
		t.Fatal(err)
	}
	tlstest.Concat(t, file, first.CAFile, second.CAFile)
	if err := ca.Reload(); err != nil || len(ca.Certificates()) != 2 || !trusts(ca, first) || !trusts(ca, second) {
		t.Fatalf("a bundle of two CAs: %v, %d certificates; want both trusted", err, len(ca.Certificates()))
	}
	firstPEM := readFile(t, first.CAFile)
	for _, c := range []struct {
		what string
		data [][]byte
		want string
	}{
		{"no certificate", [][]byte{[]byte("not a certificate\n")}, "holds no PEM certificate"},
		{"a block cut short", [][]byte{firstPEM, firstPEM[:len(firstPEM)/2]}, "a PEM block in it is cut short"},
		{"an expired CA alone", [][]byte{readFile(t, expired)}, `its CA certificate "CN=ingestq test expired" expired on `},
		{"a CA not valid yet alone", [][]byte{readFile(t, future)}, `its CA certificate "CN=ingestq test future" not valid before `},
		{"a bundle of CAs none valid now", [][]byte{readFile(t, expired), readFile(t, future)}, `none of its 2 CA certificates is valid now ("CN=ingestq test expired" expired on `},
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
	tlstest.Concat(t, file, second.CAFile)
	if err := ca.Reload(); err != nil || trusts(ca, first) || !trusts(ca, second) {
		t.Errorf("the first CA removed: %v; want only the second trusted", err)
	}
}

// The certificate that expires first, which serve warns of and measures,
// is of a served chain the intermediate when it ends before the leaf, and
// of a CA bundle the CA that ends first, wherever it is in the file.
func TestExpiresFirstIsOfTheWholeChainAndBundle(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	root := tlstest.NewAuthorityWith(t, "root", tlstest.ValidFor(5*time.Hour))
	mid := root.Intermediate(t, "mid") // an hour
	for _, c := range []struct {
		leaf string
		left time.Duration
		want string
	}{{"long-lived", 3 * time.Hour, "CN=ingestq test mid"}, {"short-lived", time.Minute, "CN=ingestq test short-lived"}} {
		cert, key := mid.PeerWith(t, c.leaf, tlstest.ValidFor(c.left), "127.0.0.1")
		p, err := tlsfiles.Load(tlstest.Concat(t, filepath.Join(dir, c.leaf+"-chain.pem"), cert, mid.CAFile), key, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.ExpiresFirst().Subject.String(); got != c.want || p.Leaf().Subject.String() != "CN=ingestq test "+c.leaf {
			t.Errorf("a leaf of %v followed by its intermediate of an hour: expires first %s, leaf %s; want %s", c.left, got, p.Leaf().Subject, c.want)
		}
	}

	short := tlstest.NewAuthorityWith(t, "short", tlstest.ValidFor(2*time.Hour))
	for _, bundle := range [][]*tlstest.Authority{{root, short}, {short, root}} {
		ca, err := tlsfiles.LoadCA(tlstest.Concat(t, filepath.Join(dir, "ca.pem"), bundle[0].CAFile, bundle[1].CAFile))
		if err != nil {
			t.Fatal(err)
		}
		if got := ca.ExpiresFirst().Subject.String(); got != "CN=ingestq test short" {
			t.Errorf("a bundle of %s then %s: expires first %s, want CN=ingestq test short", bundle[0].Certificate().Subject, bundle[1].Certificate().Subject, got)
		}
	}
}

// A CA file whose only CA has expired is refused saying what to do: a
// rotation's old CA left alone in the file is mended by removing it (and
// giving the file the CA in use), else by re-issuing it.
func TestAnExpiredCASaysToRemoveItOrReissueIt(t *testing.T) {
	t.Parallel()
	expired, _ := tlstest.Expired(t)
	const want = "remove it from the file if no peer's certificate is signed by it any more (a rotation's old CA, a system bundle's), else re-issue it"
	if _, err := tlsfiles.LoadCA(expired); err == nil || !strings.Contains(err.Error(), `its CA certificate "CN=ingestq test expired" expired on `) || !strings.Contains(err.Error(), want) {
		t.Errorf("a CA file of an expired CA alone: %v; want it named and %q", err, want)
	}
}

// A bundle that holds a CA valid now is taken, its CAs out of their dates
// left out of the pool (Ignored, named) and of the expiry: a system or
// corporate bundle keeps expired CAs. crypto/x509 verifies nothing through
// an expired CA (measured here: a peer whose certificate is good, signed
// by a CA that has expired, is refused against a pool of that CA), so
// leaving it out changes no verification. The machine's own system bundle
// (Debian's held 5 expired CAs of 144, decision 1059) is loaded too when
// it is there; the bundle built here holds expired CAs wherever it runs.
func TestABundleWithCAsOutOfTheirDatesIsTakenWithoutThem(t *testing.T) {
	t.Parallel()
	old := tlstest.NewAuthorityWith(t, "old", func(c *x509.Certificate) {
		c.NotBefore, c.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)
	})
	current := tlstest.NewAuthority(t)
	expired, _ := tlstest.Expired(t)
	future, _ := tlstest.NotYetValid(t)
	peerOf := func(a *tlstest.Authority) *x509.Certificate {
		cert, key := a.PeerWith(t, "peer", tlstest.ValidFor(time.Hour), "127.0.0.1")
		return tlstest.Install(t, filepath.Join(t.TempDir(), "cert.pem"), filepath.Join(t.TempDir(), "key.pem"), cert, key)
	}
	oldPeer, currentPeer := peerOf(old), peerOf(current)
	var invalid x509.CertificateInvalidError
	if _, err := oldPeer.Verify(x509.VerifyOptions{Roots: old.Pool()}); !errors.As(err, &invalid) || invalid.Reason != x509.Expired {
		t.Fatalf("a good peer of an expired CA against a pool of that CA: %v; want x509.Expired (crypto/x509 verifies nothing through an expired CA)", err)
	}

	ca, err := tlsfiles.LoadCA(tlstest.Concat(t, filepath.Join(t.TempDir(), "bundle.pem"), expired, old.CAFile, current.CAFile, future))
	if err != nil {
		t.Fatalf("a bundle of a CA valid now beside CAs expired and not valid yet: %v; want it taken", err)
	}
	if got := ca.Certificates(); len(got) != 1 || !got[0].Equal(current.Certificate()) || !ca.ExpiresFirst().Equal(current.Certificate()) {
		t.Errorf("the CAs in force: %d, expiring first %s; want the one valid now alone", len(got), ca.ExpiresFirst().Subject)
	}
	ignored := tlsfiles.JoinOutOfDates(ca.Ignored())
	for _, want := range []string{`"CN=ingestq test expired" expired on `, `"CN=ingestq test old" expired on `, `"CN=ingestq test future" not valid before `} {
		if len(ca.Ignored()) != 3 || !strings.Contains(ignored, want) {
			t.Errorf("ignored: %q; want three, %q among them", ignored, want)
		}
	}
	if _, err := currentPeer.Verify(x509.VerifyOptions{Roots: ca.Pool()}); err != nil {
		t.Errorf("a peer of the CA valid now: %v", err)
	}
	if _, err := oldPeer.Verify(x509.VerifyOptions{Roots: ca.Pool()}); err == nil {
		t.Error("a peer of the expired CA verified")
	}

	const system = "/etc/ssl/certs/ca-certificates.crt" // Debian's, Ubuntu's
	data, err := os.ReadFile(system)
	if errors.Is(err, fs.ErrNotExist) {
		t.Logf("%s: not on this machine; the bundle built above stands for it", system)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	held := bytes.Count(data, []byte("-----BEGIN CERTIFICATE-----"))
	ca, err = tlsfiles.LoadCA(system)
	if err != nil {
		t.Fatalf("the system bundle: %v; want it taken", err)
	}
	if n := len(ca.Certificates()) + len(ca.Ignored()); n != held || len(ca.Certificates()) == 0 || time.Now().After(ca.ExpiresFirst().NotAfter) {
		t.Errorf("the system bundle: %d CAs in force and %d ignored of %d; want them all, the first to expire in the future", len(ca.Certificates()), len(ca.Ignored()), held)
	}
	t.Logf("%s: %d CAs in force, %d ignored: %s", system, len(ca.Certificates()), len(ca.Ignored()), tlsfiles.JoinOutOfDates(ca.Ignored()))
}

// readFile is file's content.
func readFile(t *testing.T, file string) []byte {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
