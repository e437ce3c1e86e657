package events

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// tlsTimeout bounds a route's or a client's TLS handshake: nats-server's
// 2 s is short for hosts across a network under load, and a route that
// failed is dialed again a second later anyway.
const tlsTimeout = 5 * time.Second

// TLSFileError is a TLS file refused: Which is "cert", "key" or "ca",
// File the file, Err what is wrong with it.
type TLSFileError struct {
	Which, File string
	Err         error
}

func (e *TLSFileError) Error() string { return e.Which + " " + e.File + ": " + e.Err.Error() }

func (e *TLSFileError) Unwrap() error { return e.Err }

// LoadClusterTLS reads the files of a cluster member's route TLS: its
// certificate (chain, PEM) and key, and the CA (PEM) that signed every
// member's, for Config.ClusterTLS. cluster is the member's cluster
// address (Config.Cluster): its certificate must name the host the route
// URL announces (RouteURL), which the other members dial and check. A file
// that cannot be read, a key of another certificate, a certificate the CA
// did not sign, one expired or not yet valid, one not for both ends of a
// connection or naming another host is a *TLSFileError.
func LoadClusterTLS(certFile, keyFile, caFile, cluster string) (*tls.Config, error) {
	pair, err := loadKeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	caPEM, err := readTLSFile("ca", caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, &TLSFileError{"ca", caFile, errors.New("holds no PEM certificate")}
	}
	leaf := pair.Leaf
	if err := checkValidity(leaf); err != nil {
		return nil, &TLSFileError{"cert", certFile, err}
	}
	inter := x509.NewCertPool()
	for _, der := range pair.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	// A member is the server of the routes it takes and the client of those
	// it dials: its certificate must do for both.
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}})
		var unknown x509.UnknownAuthorityError
		var invalid x509.CertificateInvalidError
		switch {
		case err == nil:
		case errors.As(err, &unknown):
			return nil, &TLSFileError{"cert", certFile, fmt.Errorf("not signed by the CA in %s, nor by an intermediate CA whose certificate follows it in this file (its issuer: %s)",
				caFile, leaf.Issuer)}
		case errors.As(err, &invalid) && invalid.Reason == x509.IncompatibleUsage:
			return nil, &TLSFileError{"cert", certFile, errors.New("its extended key usage does not allow both ends of a route: want serverAuth and clientAuth")}
		default:
			return nil, &TLSFileError{"cert", certFile, fmt.Errorf("not valid under the CA in %s: %w", caFile, err)}
		}
	}
	route, err := RouteURL(cluster)
	if err != nil {
		return nil, err
	}
	u, _ := url.Parse(route)
	if err := leaf.VerifyHostname(u.Hostname()); err != nil {
		return nil, &TLSFileError{"cert", certFile, fmt.Errorf("names %s, not %s, the host this member's route announces (the other members dial that name and check it)",
			certNames(leaf), u.Hostname())}
	}
	return &tls.Config{
		Certificates: []tls.Certificate{pair},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		RootCAs:      pool,
		MinVersion:   tls.VersionTLS13, // every member is ingestq
	}, nil
}

// LoadListenTLS reads the certificate (chain, PEM) and key of the embedded
// server's client listener, for Config.ListenTLS. A file that cannot be
// read, a key of another certificate, a certificate expired, not yet
// valid or not for servers is a *TLSFileError. Which names it must carry
// is the clients' affair (the CLI on the host dials 127.0.0.1): not
// checked.
func LoadListenTLS(certFile, keyFile string) (*tls.Config, error) {
	pair, err := loadKeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	if err := checkValidity(pair.Leaf); err != nil {
		return nil, &TLSFileError{"cert", certFile, err}
	}
	if !serverUsage(pair.Leaf) {
		return nil, &TLSFileError{"cert", certFile, errors.New("its extended key usage does not allow a server: want serverAuth")}
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

// serverUsage tells whether c may serve TLS as crypto/tls's clients check
// it: no extended key usage at all, any, or serverAuth among them.
func serverUsage(c *x509.Certificate) bool {
	if len(c.ExtKeyUsage) == 0 && len(c.UnknownExtKeyUsage) == 0 {
		return true
	}
	return slices.ContainsFunc(c.ExtKeyUsage, func(u x509.ExtKeyUsage) bool {
		return u == x509.ExtKeyUsageServerAuth || u == x509.ExtKeyUsageAny
	})
}

// withListenTLS has the client listener take TLS only, when Config.ListenTLS
// is given; in-process clients (the daemon's own) are not concerned.
func withListenTLS(opts *server.Options, cfg Config) {
	if cfg.ListenTLS == nil || opts.DontListen {
		return
	}
	opts.TLSConfig, opts.TLS = cfg.ListenTLS.Clone(), true
	opts.TLSTimeout = tlsTimeout.Seconds()
}

// loadKeyPair reads a certificate and its key.
func loadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := readTLSFile("cert", certFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	if !holdsCertificate(certPEM) {
		return tls.Certificate{}, &TLSFileError{"cert", certFile, errors.New("holds no PEM certificate")}
	}
	keyPEM, err := readTLSFile("key", keyFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	switch {
	case err != nil && strings.Contains(err.Error(), "does not match"):
		return tls.Certificate{}, &TLSFileError{"key", keyFile, fmt.Errorf("not the key of the certificate in %s", certFile)}
	case err != nil:
		return tls.Certificate{}, &TLSFileError{"key", keyFile, fmt.Errorf("not a PEM private key of the certificate: %w", err)}
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

// readTLSFile reads file, an error naming it and saying why.
func readTLSFile(which, file string) ([]byte, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // "no such file or directory", without the name again
		}
		return nil, &TLSFileError{which, file, err}
	}
	return data, nil
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

// certNames lists the host names and addresses c is for.
func certNames(c *x509.Certificate) string {
	names := append([]string(nil), c.DNSNames...)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	if len(names) == 0 {
		return "no host"
	}
	return strings.Join(names, ", ")
}

// withTLS makes a cluster member's routes mutual TLS when it has
// Config.ClusterTLS: nats-server then does the handshake before anything
// else on every route, presents the certificate both ways, takes only a
// route whose certificate the CA signed, and checks that the server it
// dials is named in its certificate by the route URL's host.
func withTLS(opts *server.Options, cfg Config) {
	if cfg.ClusterTLS == nil {
		return
	}
	opts.Cluster.TLSConfig = cfg.ClusterTLS.Clone()
	opts.Cluster.TLSTimeout = tlsTimeout.Seconds()
}

// routeTLSFailed is how nats-server logs a route whose TLS handshake
// failed, either side, after the connection's "ip:port - rid:N - ".
const routeTLSFailed = "TLS route handshake error: "

// tlsRefusedLine says, once per host and reason, that a route failed its
// TLS handshake, in ingestq's words naming the setting; ok tells whether
// line is such a failure (said or not: its retries, every second, go to
// debug).
func (l serverLogger) tlsRefusedLine(line string) (msg string, attrs []any, ok bool) {
	conn, rest, found := strings.Cut(line, " - rid:")
	_, cause, _ := strings.Cut(rest, " - ")
	cause, isTLS := strings.CutPrefix(cause, routeTLSFailed)
	if !found || !isTLS {
		return "", nil, false
	}
	host := hostOnly(conn)
	why := tlsWhy(cause)
	if !l.said.first("tls " + host + " " + why) {
		return "", nil, true
	}
	return "events: a NATS route to or from another server failed its TLS handshake: " + why +
			"; every host of the cluster needs TLS, with a certificate of the same CA naming the host its route announces (said once per host and reason)",
		[]any{"host", host, "setting", l.tlsSetting, "err", cause}, true
}

// tlsWhy is the reason, in ingestq's words, of a failed TLS handshake
// as crypto/tls words it.
func tlsWhy(cause string) string {
	switch {
	case strings.Contains(cause, "first record does not look like a TLS handshake"):
		return "the other server has no TLS on its routes"
	case strings.Contains(cause, "signed by unknown authority"):
		return "its certificate is not signed by this host's CA"
	case strings.Contains(cause, "certificate is valid for"), strings.Contains(cause, "certificate is not valid for any names"):
		return "its certificate does not name the host it was dialed at"
	case strings.Contains(cause, "has expired or is not yet valid"):
		return "its certificate has expired or is not yet valid"
	case strings.Contains(cause, "didn't provide a certificate"):
		return "it presented no certificate"
	case strings.Contains(cause, "remote error"):
		return "the other server refused this host's certificate (another CA, or it names another host, or it expired)"
	}
	return "the handshake failed"
}
