package tlsfiles

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
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

// caBundle is a CA file's certificates and the pool of them.
type caBundle struct {
	certs []*x509.Certificate
	pool  *x509.CertPool
}

// LoadCA reads and checks a CA file. A file that cannot be read, holds no
// certificate, holds a block cut short or one that does not parse, or a
// certificate expired or not yet valid is a *FileError ("ca").
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

// Certificates are the CA certificates in force, in their file's order.
func (c *CA) Certificates() []*x509.Certificate { return c.inForce.Load().certs }

// readCA reads and checks a CA file. Every certificate in it must be
// valid now: an expired CA verifies nothing, and a bundle is a rotation's
// (old and new CA), where one left too long is better named than ignored.
func readCA(file string) (*caBundle, error) {
	data, err := ReadFile("ca", file)
	if err != nil {
		return nil, err
	}
	if cutShort(data) {
		return nil, &FileError{"ca", file, errors.New("a PEM block in it is cut short (the file read while it was written?)")}
	}
	b := &caBundle{pool: x509.NewCertPool()}
	for {
		var block *pem.Block
		if block, data = pem.Decode(data); block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, &FileError{"ca", file, fmt.Errorf("its certificate %d does not parse: %w", len(b.certs)+1, err)}
		}
		if err := checkValidity(cert); err != nil {
			if time.Now().After(cert.NotAfter) { // a CA left in a bundle (a system one keeps expired CAs) is mended by removing it
				err = fmt.Errorf("%w: remove it from the file if no peer's certificate is signed by it any more (a rotation's old CA, a system bundle's), else re-issue it", err)
			}
			return nil, &FileError{"ca", file, fmt.Errorf("its CA certificate %q %w", cert.Subject.String(), err)}
		}
		b.certs = append(b.certs, cert)
		b.pool.AddCert(cert)
	}
	if len(b.certs) == 0 {
		return nil, &FileError{"ca", file, errors.New("holds no PEM certificate")}
	}
	return b, nil
}
