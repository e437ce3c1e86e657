// Package tlsfiles is the daemon's one loader of TLS certificates: the
// HTTP server's (--tls-cert), the NATS client listener's and the routes'.
// A certificate and its key are checked when read, at start and at each
// reload (SIGHUP): the key is the certificate's, the certificate is valid
// now, and whatever its setting asks besides (its usage, its chain, its
// names). The pair in force is served to each new handshake
// (GetCertificate, GetClientCertificate), so a reload reaches the servers
// without restarting them; a pair refused leaves the one in force. The CA
// files it verifies peers with (the routes', the NATS it joins) are read
// and reloaded alike (CA).
package tlsfiles

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// FileError is a TLS file refused: Which is "cert", "key" or "ca", File
// the file, Err what is wrong with it.
type FileError struct {
	Which, File string
	Err         error
}

func (e *FileError) Error() string { return e.Which + " " + e.File + ": " + e.Err.Error() }

func (e *FileError) Unwrap() error { return e.Err }

// Check is what a setting asks of its certificate (leaf) besides a key that
// matches it and dates that hold now; intermediates are the certificates
// that follow it in its file. An error is the certificate file's.
type Check func(leaf *x509.Certificate, intermediates *x509.CertPool) error

// Pair is a certificate (chain, PEM) and its key, read from their files.
type Pair struct {
	CertFile, KeyFile string
	check             Check
	inForce           atomic.Pointer[servedPair]
}

// servedPair is a pair read, and of its chain the certificate that
// expires first: an intermediate may end before its leaf, and every
// client that verifies through it fails from then on.
type servedPair struct {
	cert         *tls.Certificate
	expiresFirst *x509.Certificate
}

// Load reads and checks a certificate and its key. A file that cannot be
// read, a certificate file without a certificate, a key of another
// certificate, a certificate expired or not yet valid, or one check
// refuses is a *FileError.
func Load(certFile, keyFile string, check Check) (*Pair, error) {
	p := &Pair{CertFile: certFile, KeyFile: keyFile, check: check}
	c, err := p.read()
	if err != nil {
		return nil, err
	}
	p.inForce.Store(c)
	return p, nil
}

// Reload reads the files again, checked as at Load: the pair they hold is
// served to the handshakes from now on. A pair refused (a *FileError)
// leaves the one in force; connections made are not concerned either way.
func (p *Pair) Reload() error {
	c, err := p.read()
	if err != nil {
		return err
	}
	p.inForce.Store(c)
	return nil
}

// Leaf is the certificate in force.
func (p *Pair) Leaf() *x509.Certificate { return p.inForce.Load().cert.Leaf }

// ExpiresFirst is, of the chain in force (the leaf and the certificates
// after it in its file), the certificate that expires first.
func (p *Pair) ExpiresFirst() *x509.Certificate { return p.inForce.Load().expiresFirst }

// GetCertificate serves the pair in force to a client's handshake
// (tls.Config.GetCertificate).
func (p *Pair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return p.inForce.Load().cert, nil
}

// GetClientCertificate presents the pair in force to a server that asks
// for a certificate (tls.Config.GetClientCertificate).
func (p *Pair) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return p.inForce.Load().cert, nil
}

// read reads and checks the files.
func (p *Pair) read() (*servedPair, error) {
	pair, err := loadKeyPair(p.CertFile, p.KeyFile)
	if err != nil {
		return nil, err
	}
	if err := checkValidity(pair.Leaf); err != nil {
		return nil, &FileError{"cert", p.CertFile, err}
	}
	inter := x509.NewCertPool()
	chain := []*x509.Certificate{pair.Leaf}
	for _, der := range pair.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
			chain = append(chain, c)
		}
	}
	if p.check != nil {
		if err := p.check(pair.Leaf, inter); err != nil {
			return nil, &FileError{"cert", p.CertFile, err}
		}
	}
	return &servedPair{&pair, expiresFirst(chain)}, nil
}

// expiresFirst is, of certs (one or more), the certificate that expires
// first; the first of them on a tie.
func expiresFirst(certs []*x509.Certificate) *x509.Certificate {
	return slices.MinFunc(certs, func(a, b *x509.Certificate) int { return a.NotAfter.Compare(b.NotAfter) })
}

// ServerUsage is the Check of a server's certificate: it may serve TLS as
// crypto/tls's clients check a leaf: no extended key usage at all, any,
// or serverAuth among them. Which names it carries is its clients'
// affair: not checked.
func ServerUsage(leaf *x509.Certificate, _ *x509.CertPool) error {
	if len(leaf.ExtKeyUsage) == 0 && len(leaf.UnknownExtKeyUsage) == 0 ||
		slices.ContainsFunc(leaf.ExtKeyUsage, func(u x509.ExtKeyUsage) bool {
			return u == x509.ExtKeyUsageServerAuth || u == x509.ExtKeyUsageAny
		}) {
		return nil
	}
	return errors.New("its extended key usage does not allow a server: want serverAuth")
}

// loadKeyPair reads a certificate and its key.
func loadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := ReadFile("cert", certFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	if !holdsCertificate(certPEM) {
		return tls.Certificate{}, &FileError{"cert", certFile, errors.New("holds no PEM certificate")}
	}
	if cutShort(certPEM) {
		return tls.Certificate{}, &FileError{"cert", certFile, errors.New("a PEM block in it is cut short (the file read while it was written?): " +
			"the certificates before it would be served without the rest of their chain")}
	}
	keyPEM, err := ReadFile("key", keyFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	switch {
	case err != nil && strings.Contains(err.Error(), "does not match"):
		return tls.Certificate{}, &FileError{"key", keyFile, fmt.Errorf("not the key of the certificate in %s", certFile)}
	case err != nil:
		return tls.Certificate{}, &FileError{"key", keyFile, fmt.Errorf("not a PEM private key of the certificate: %w", err)}
	}
	return pair, nil
}

// holdsCertificate tells whether data has a PEM certificate among its
// blocks: crypto/tls takes a file of the key and the certificate together,
// the key first, for both settings, as nats-server's own does.
func holdsCertificate(data []byte) bool {
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			return false
		}
		if b.Type == "CERTIFICATE" {
			return true
		}
	}
}

// cutShort tells whether a PEM block begun in data does not decode, as
// one cut short by a file read while it is written: crypto/tls skips it
// and takes the certificates before it, a chain without its end, which
// only the clients would find out.
func cutShort(data []byte) bool {
	begun := bytes.Count(data, []byte("-----BEGIN "))
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			return begun > 0
		}
		begun--
	}
}

// ReadFile reads file, which (cert, key or ca), a *FileError naming it and
// saying why.
func ReadFile(which, file string) ([]byte, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // "no such file or directory", without the name again
		}
		return nil, &FileError{which, file, err}
	}
	return data, nil
}

// Serial is c's serial as openssl x509 -serial shows it, and serve logs
// it: its bytes in hexadecimal, so 03A1B2 (Let's Encrypt's begin with 03
// or 04), not big.Int's 3A1B2.
func Serial(c *x509.Certificate) string {
	if c.SerialNumber.Sign() == 0 {
		return "00"
	}
	return fmt.Sprintf("%X", c.SerialNumber.Bytes())
}

// checkValidity tells whether c is valid now, saying when it is not.
func checkValidity(c *x509.Certificate) error {
	now := time.Now()
	switch {
	case now.After(c.NotAfter):
		return fmt.Errorf("expired on %s", c.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(c.NotBefore):
		return fmt.Errorf("not valid before %s", c.NotBefore.UTC().Format(time.RFC3339))
	}
	return nil
}
