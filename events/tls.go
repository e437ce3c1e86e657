package events

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/ingestq/ingestq/internal/tlsfiles"
)

// tlsTimeout bounds a route's or a client's TLS handshake: nats-server's
// 2 s is short for hosts across a network under load, and a route that
// failed is dialed again a second later anyway.
const tlsTimeout = 5 * time.Second

// LoadClusterTLS reads the files of a cluster member's route TLS: its
// certificate (chain, PEM) and key, and the CA file (PEM, one CA or a
// bundle of them) that signed every member's, for Config.ClusterTLS and
// Config.ClusterCA. cluster is the member's cluster address
// (Config.Cluster): its certificate must name the host the route URL
// announces (RouteURL), which the other members dial and check. A file
// that cannot be read, a key of another certificate, a certificate the CA
// did not sign, one expired or not yet valid, one not for both ends of a
// connection or naming another host, a CA file without a certificate or
// without a CA valid now is a *tlsfiles.FileError. The pair is presented both
// ways from the *tlsfiles.Pair, which its Reload renews; the peers are
// verified against the *tlsfiles.CA's pool, which its Reload renews too
// (then Bus.ClusterCAReloaded), the CA first: the pair is checked
// against the pool in force.
func LoadClusterTLS(certFile, keyFile, caFile, cluster string) (*tls.Config, *tlsfiles.Pair, *tlsfiles.CA, error) {
	route, err := RouteURL(cluster)
	if err != nil {
		return nil, nil, nil, err
	}
	u, _ := url.Parse(route)
	ca, err := tlsfiles.LoadCA(caFile)
	if err != nil {
		return nil, nil, nil, err
	}
	pair, err := tlsfiles.Load(certFile, keyFile, routeCheck(ca, u.Hostname()))
	if err != nil {
		return nil, nil, nil, err
	}
	return &tls.Config{
		GetCertificate:       pair.GetCertificate,
		GetClientCertificate: pair.GetClientCertificate,
		ClientAuth:           tls.RequireAndVerifyClientCert,
		ClientCAs:            ca.Pool(),
		RootCAs:              ca.Pool(),
		MinVersion:           tls.VersionTLS13, // every member is ingestq
	}, pair, ca, nil
}

// routeCheck is what a route's certificate must be: signed by a CA in ca's
// pool in force, good for both ends of a route, and naming host, the host
// its route announces.
func routeCheck(ca *tlsfiles.CA, host string) tlsfiles.Check {
	return func(leaf *x509.Certificate, inter *x509.CertPool) error {
		// A member is the server of the routes it takes and the client of
		// those it dials: its certificate must do for both.
		pool, caFile := ca.Pool(), ca.File
		for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}})
			var unknown x509.UnknownAuthorityError
			var invalid x509.CertificateInvalidError
			switch {
			case err == nil:
			case errors.As(err, &unknown):
				if o, ok := ca.LeftOut(leaf); ok { // else its issuer, named, would seem to be in the file
					return fmt.Errorf("signed by a CA in %s left out of it, %v", caFile, o)
				}
				return fmt.Errorf("not signed by the CA in %s, nor by an intermediate CA whose certificate follows it in this file (its issuer: %s)",
					caFile, leaf.Issuer)
			case errors.As(err, &invalid) && invalid.Reason == x509.IncompatibleUsage:
				return errors.New("its extended key usage does not allow both ends of a route: want serverAuth and clientAuth")
			default:
				return fmt.Errorf("not valid under the CA in %s: %w", caFile, err)
			}
		}
		if err := leaf.VerifyHostname(host); err != nil {
			return fmt.Errorf("names %s, not %s, the host this member's route announces (the other members dial that name and check it)",
				certNames(leaf), host)
		}
		return nil
	}
}

// LoadListenTLS reads the certificate (chain, PEM) and key of the embedded
// server's client listener, for Config.ListenTLS: checked as any server's
// (tlsfiles.ServerUsage), served from the *tlsfiles.Pair, which its Reload
// renews. Which names it must carry is the clients' affair (the CLI on the
// host dials 127.0.0.1): not checked.
func LoadListenTLS(certFile, keyFile string) (*tls.Config, *tlsfiles.Pair, error) {
	pair, err := tlsfiles.Load(certFile, keyFile, tlsfiles.ServerUsage)
	if err != nil {
		return nil, nil, err
	}
	return &tls.Config{GetCertificate: pair.GetCertificate, MinVersion: tls.VersionTLS12}, pair, nil
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
// dials is named in its certificate by the route URL's host. The CA is
// Config.ClusterCA's pool in force, when given: nats-server reads
// ClientCAs and RootCAs from the options in force at each route, taken or
// dialed, and crypto/tls has no hook to renew RootCAs on the side that
// dials, so a new pool reaches it as options do (ClusterCAReloaded).
func withTLS(opts *server.Options, cfg Config) {
	if cfg.ClusterTLS == nil {
		return
	}
	opts.Cluster.TLSConfig = cfg.ClusterTLS.Clone()
	if cfg.ClusterCA != nil {
		pool := cfg.ClusterCA.Pool()
		opts.Cluster.TLSConfig.ClientCAs, opts.Cluster.TLSConfig.RootCAs = pool, pool
	}
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
