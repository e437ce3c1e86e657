package tlsfiles

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
)

// CA is a CA file (PEM, one CA certificate or more: a bundle), the pool
// a setting verifies its peers' certificates against. The pool in force
// is read at each handshake (Pool), so a reload reaches the servers
// without restarting them; a file refused leaves the pool in force.
type CA struct {
	File    string
	inForce atomic.Pointer[caBundle]
}

// caBundle is a CA file's certificates valid when it was read, the pool
// of them, and those it holds out of their dates, left out.
type caBundle struct {
	certs   []*x509.Certificate
	pool    *x509.CertPool
	ignored []OutOfDates
}

// OutOfDates is a CA certificate of a CA file left out of its pool, and
// why: when it expired, or when it begins.
type OutOfDates struct {
	Cert *x509.Certificate
	Why  error
}

// String is the CA's subject and why: `"CN=…" expired on …`.
func (o OutOfDates) String() string { return fmt.Sprintf("%q %v", o.Cert.Subject.String(), o.Why) }

// LeftOut is, of the CAs of the file in force left out of its pool, the
// one that issued cert, if any: said beside a certificate refused as
// signed by no CA of the file.
func (c *CA) LeftOut(cert *x509.Certificate) (OutOfDates, bool) {
	for _, o := range c.Ignored() {
		if bytes.Equal(o.Cert.RawSubject, cert.RawIssuer) && cert.CheckSignatureFrom(o.Cert) == nil {
			return o, true
		}
	}
	return OutOfDates{}, false
}

// LoadCA reads and checks a CA file. A file that cannot be read, holds no
// certificate, holds a block cut short or one that does not parse, or no
// CA certificate valid now is a *FileError ("ca"). A CA expired or not yet
// valid beside one valid is left out (Ignored).
func LoadCA(file string) (*CA, error) {
	c := &CA{File: file}
	b, err := readCA(file)
	if err != nil {
		return nil, err
	}
	c.inForce.Store(b)
	return c, nil
}

// Reload reads the file again, checked as at LoadCA: the pool it holds is
// the one handshakes verify against from now on. A file refused (a
// *FileError) leaves the pool in force.
func (c *CA) Reload() error {
	b, err := readCA(c.File)
	if err != nil {
		return err
	}
	c.inForce.Store(b)
	return nil
}

// Pool is the pool in force.
func (c *CA) Pool() *x509.CertPool { return c.inForce.Load().pool }

// ExpiresFirst is, of the CA certificates in force, the one that expires
// first: once it has, each peer whose certificate it signed is refused.
func (c *CA) ExpiresFirst() *x509.Certificate { return expiresFirst(c.Certificates()) }

// Certificates are the CA certificates in force, those of the file valid
// when it was read, in its order.
func (c *CA) Certificates() []*x509.Certificate { return c.inForce.Load().certs }

// Ignored are the CA certificates of the file in force left out of its
// pool: expired or not yet valid when it was read.
func (c *CA) Ignored() []OutOfDates { return c.inForce.Load().ignored }

// readCA reads and checks a CA file. A CA out of its dates is left out of
// the pool: crypto/x509 verifies nothing through an expired CA, and a
// system or corporate bundle keeps expired ones beside those in use. A
// file left without a CA valid now is refused: it would verify nothing.
func readCA(file string) (*caBundle, error) {
	data, err := ReadFile("ca", file)
	if err != nil {
		return nil, err
	}
	if cutShort(data) {
		return nil, &FileError{"ca", file, errors.New("a PEM block in it is cut short (the file read while it was written?)")}
	}
	b := &caBundle{pool: x509.NewCertPool()}
	for n := 0; ; {
		var block *pem.Block
		if block, data = pem.Decode(data); block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		n++
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, &FileError{"ca", file, fmt.Errorf("its certificate %d does not parse: %w", n, err)}
		}
		if err := checkValidity(cert); err != nil {
			b.ignored = append(b.ignored, OutOfDates{cert, err})
			continue
		}
		b.certs = append(b.certs, cert)
		b.pool.AddCert(cert)
	}
	switch {
	case len(b.certs) > 0:
		return b, nil
	case len(b.ignored) == 1:
		only := b.ignored[0]
		why := only.Why
		if time.Now().After(only.Cert.NotAfter) { // a rotation's old CA left alone in the file
			why = fmt.Errorf("%w: remove it from the file if no peer's certificate is signed by it any more (a rotation's old CA, a system bundle's), else re-issue it", why)
		}
		return nil, &FileError{"ca", file, fmt.Errorf("its CA certificate %q %w", only.Cert.Subject.String(), why)}
	case len(b.ignored) > 1:
		return nil, &FileError{"ca", file, fmt.Errorf("none of its %d CA certificates is valid now (%s): add the CA that signs the peers' certificates, "+
			"or re-issue an expired one with the same key and name", len(b.ignored), JoinOutOfDates(b.ignored))}
	}
	return nil, &FileError{"ca", file, errors.New("holds no PEM certificate")}
}

// JoinOutOfDates is the CAs left out, as said: `"CN=…" expired on …; "CN=…" …`.
func JoinOutOfDates(ignored []OutOfDates) string {
	said := make([]string, len(ignored))
	for i, o := range ignored {
		said[i] = o.String()
	}
	return strings.Join(said, "; ")
}
