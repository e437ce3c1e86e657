package cli

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/internal/tlsfiles"
)

// clusterTLS reads --nats-cluster-tls-cert, -key and -ca: the three
// together, with --nats-cluster, checked at start (events.LoadClusterTLS)
// so that a file wrong is named before the daemon joins anything; nil
// when none is given.
func (a *app) clusterTLS(f serveFlags) (*tls.Config, *tlsfiles.Pair, *tlsfiles.CA, error) {
	files := f.clusterTLS
	if given, err := together("--nats-cluster-tls-", files, "cert", "key", "ca"); !given || err != nil {
		return nil, nil, nil, err
	}
	if f.natsCluster == "" {
		return nil, nil, nil, usagef("--nats-cluster-tls-cert %s: it secures the routes of --nats-cluster, which is not given", files.cert)
	}
	tc, pair, ca, err := events.LoadClusterTLS(files.cert, files.key, files.ca, f.natsCluster)
	if err != nil {
		return nil, nil, nil, tlsFileRefused("--nats-cluster-tls-", err)
	}
	a.warnOpenFile("--nats-cluster-tls-key: the key's file", files.key)
	a.warnIgnoredCAs("--nats-cluster-tls-ca", ca)
	return tc, pair, ca, nil
}

// natsCA reads --nats-tls-ca when serve joins another NATS (--nats),
// checked at start as the routes' CA is: its pool in force verifies the
// server at each connection and reconnection, and a SIGHUP renews it
// (reloadCAs). nil when not given, or when serve embeds NATS: the CLI's
// variable (INGESTQ_NATS_TLS_CA) may be set on the host for the CLI.
func (a *app) natsCA() (*tlsfiles.CA, error) {
	if a.natsJoined() == "" || a.natsAuth.TLSCA == "" {
		return nil, nil
	}
	ca, err := tlsfiles.LoadCA(a.natsAuth.TLSCA)
	if err != nil {
		return nil, tlsFileRefused("--nats-tls-", err)
	}
	a.warnIgnoredCAs("--nats-tls-ca", ca)
	return ca, nil
}

// warnIgnoredCAs says, at each read of a CA file taken (start, SIGHUP),
// its CAs left out for being out of their dates: a system or corporate
// bundle keeps expired CAs, which verify nothing, and the file is the
// operator's to mend, so once per read rather than daily.
func (a *app) warnIgnoredCAs(setting string, ca *tlsfiles.CA) {
	if ignored := ca.Ignored(); len(ignored) > 0 {
		a.log.Warn("TLS CA file holds CAs expired or not valid yet, left out (they verify no peer): remove them from the file if it is yours; "+
			"one not valid yet is taken at the first reload (SIGHUP) after its date",
			"setting", setting, "file", ca.File, "ignored", len(ignored), "in_force", len(ca.Certificates()), "cas", tlsfiles.JoinOutOfDates(ignored))
	}
}

// listenTLS reads --nats-listen-tls-cert and -key: both, with a client
// listener (--nats-listen not off), checked at start; nil when neither is
// given.
func (a *app) listenTLS(f serveFlags) (*tls.Config, *tlsfiles.Pair, error) {
	files := f.listenTLS
	if given, err := together("--nats-listen-tls-", files, "cert", "key"); !given || err != nil {
		return nil, nil, err
	}
	if f.natsListen == "off" {
		return nil, nil, usagef("--nats-listen-tls-cert %s: it secures --nats-listen, which is off", files.cert)
	}
	tc, pair, err := events.LoadListenTLS(files.cert, files.key)
	if err != nil {
		return nil, nil, tlsFileRefused("--nats-listen-tls-", err)
	}
	a.warnOpenFile("--nats-listen-tls-key: the key's file", files.key)
	return tc, pair, nil
}

// apiTLS reads --tls-cert and --tls-key: both, with the HTTP server (--http
// not off), checked at start as the NATS listener's are (a server's
// certificate: tlsfiles.ServerUsage); nil when neither is given.
func (a *app) apiTLS(f serveFlags) (*tlsfiles.Pair, error) {
	files := f.apiTLS
	switch {
	case files.cert != "" && f.http == "off":
		return nil, usagef("--tls-cert %s: the HTTP server is off (--http off)", files.cert)
	case (files.cert == "") != (files.key == ""):
		return nil, usagef("--tls-cert and --tls-key go together: give both, or neither")
	case files.cert == "":
		return nil, nil
	}
	pair, err := tlsfiles.Load(files.cert, files.key, tlsfiles.ServerUsage)
	if err != nil {
		return nil, tlsFileRefused("--tls-", err)
	}
	a.warnOpenFile("--tls-key: the key's file", files.key)
	return pair, nil
}

// servedCert is a certificate serve presents, re-read at each SIGHUP
// (reloadCerts), its expiry in the metrics: prefix begins its setting's
// flags (--tls-, --nats-listen-tls-, --nats-cluster-tls-).
type servedCert struct {
	prefix string
	pair   *tlsfiles.Pair
}

// servedCA is a CA file serve verifies peers against, re-read at each
// SIGHUP (reloadCAs) before the certificates, which may be checked against
// it: prefix begins its setting's flags (--nats-cluster-tls-, --nats-tls-);
// reloaded, if not nil, runs when a file taken holds other CAs.
type servedCA struct {
	prefix   string
	ca       *tlsfiles.CA
	reloaded func()
}

// servedCAs are the CA files of given whose setting is given (a CA not
// nil), in the order given.
func servedCAs(given ...servedCA) []servedCA {
	return slices.DeleteFunc(given, func(c servedCA) bool { return c.ca == nil })
}

// servedCerts are the certificates of given whose setting is given (a
// pair not nil), in the order given.
func servedCerts(given ...servedCert) []servedCert {
	return slices.DeleteFunc(given, func(c servedCert) bool { return c.pair == nil })
}

// expiring is a TLS file serve warns of and measures as it nears its end
// (the same warning, metric and alert for each): a served certificate
// with its chain, or a CA file. first is, of the certificates in force,
// the one that expires first: an intermediate may end before its leaf, a
// bundle's old CA before the new, and each ends the handshakes it is in.
type expiring struct {
	flag, file string // --tls-cert, --nats-cluster-tls-ca, …
	first      func() *x509.Certificate
	remedy     string // what the warning says to do before the SIGHUP
}

// expiringFiles are the certificates' and the CA files' expiring.
func expiringFiles(certs []servedCert, cas []servedCA) []expiring {
	var all []expiring
	for _, c := range certs {
		all = append(all, c.expiring())
	}
	for _, c := range cas {
		all = append(all, c.expiring())
	}
	return all
}

// expiring is the certificate's chain in force, as warned of and measured.
// A cross-signed certificate old clients needed may end first, or have
// ended: it is removed rather than renewed.
func (c servedCert) expiring() expiring {
	return expiring{c.prefix + "cert", c.pair.CertFile, c.pair.ExpiresFirst, "renew it, or remove from the file a cross-signed certificate of its chain " +
		"no client needs any more (taken, even expired: new clients verify without it), then SIGHUP the daemon (systemctl reload ingestq)"}
}

// expiring is the CA file's CAs in force, as warned of and measured: those
// valid when it was read (a CA out of its dates then is left out). A CA no
// peer's certificate is signed by any more (a rotation's old one, a system
// bundle's) is not renewed but removed: else it is warned of daily, until
// the first read of the file after its expiry leaves it out (or refuses
// the file, if it was the file's last CA valid).
func (c servedCA) expiring() expiring {
	return expiring{c.prefix + "ca", c.ca.File, c.ca.ExpiresFirst, "re-issue it with the same key and name, or remove it from the file if no peer's certificate " +
		"is signed by it any more (a rotation's old CA, a system bundle's), then SIGHUP the daemon (systemctl reload ingestq) on every host"}
}

// expiryWarning is how long before a certificate's expiry serve warns, at
// start, at each reload, and as the certificate in force enters it
// (expiryWarningDue): time to renew it, and to SIGHUP.
const expiryWarning = 14 * 24 * time.Hour

// warnExpiring warns when the certificate of e in force that expires
// first does so within expiryWarning, naming it: a chain's intermediate
// or one CA of a bundle is not the file's first certificate.
func (a *app) warnExpiring(e expiring) {
	first := e.first()
	if left := time.Until(first.NotAfter); left <= expiryWarning { // <=: expiryWarningDue's timer may end with 14 days left exactly
		a.log.Warn("TLS certificate expires within 14 days: "+e.remedy+": it is re-read without a restart",
			"setting", e.flag, "file", e.file, "subject", first.Subject.String(), "not_after", first.NotAfter.UTC().Format(time.RFC3339), "left", left.Round(time.Minute).String())
	}
}

// expiryWarningDue is when warnExpiring has something to say between
// reloads: when the first certificate in force enters its last
// expiryWarning, or a day from now while one is in it; never (nil)
// without a certificate.
func expiryWarningDue(files []expiring) <-chan time.Time {
	next := time.Duration(-1)
	for _, e := range files {
		d := time.Until(e.first().NotAfter) - expiryWarning
		if d <= 0 {
			d = 24 * time.Hour
		}
		if next < 0 || d < next {
			next = d
		}
	}
	if next < 0 {
		return nil
	}
	return time.After(next)
}

// reloadCerts re-reads every served certificate and its key (SIGHUP): a
// pair taken is served to the next handshakes, and said with its serial
// (as openssl x509 -serial shows it); one refused is logged naming the
// setting, the file and the cause, and the pair in force is kept. Either
// way the connections made are not concerned. A key file open to group or
// others is warned of, as at start: a renewal writes a new file.
func (a *app) reloadCerts(certs []servedCert) {
	for _, c := range certs {
		a.warnOpenFile(c.prefix+"key: the key's file", c.pair.KeyFile)
		if err := c.pair.Reload(); err != nil {
			setting, file, err := refusedFile(c.prefix, "cert", c.pair.CertFile, err)
			a.log.Error("TLS certificate not reloaded (SIGHUP); the certificate in force is kept", "setting", setting, "file", file, "err", err)
		} else {
			leaf := c.pair.Leaf()
			a.log.Info("TLS certificate reloaded (SIGHUP)", "setting", c.prefix+"cert", "file", c.pair.CertFile,
				"serial", tlsfiles.Serial(leaf), "not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
		}
		a.warnExpiring(c.expiring())
	}
}

// reloadCAs re-reads every CA file (SIGHUP): a pool taken verifies the
// peers of the next handshakes, and the CAs it holds are said (an
// operator adding or removing a CA checks them), those it left out
// warned of (warnIgnoredCAs); a file refused is logged naming the
// setting, the file and the cause, and the pool in force is kept.
// reloaded runs only when the CAs changed: the routes' reload of
// nats-server's options checks every client again, closing one that
// presents a user name and refusing one still connecting (decisions 1072,
// 1083), and a SIGHUP for a token or a certificate needs none.
func (a *app) reloadCAs(cas []servedCA) {
	for _, c := range cas {
		before := c.ca.Certificates()
		if err := c.ca.Reload(); err != nil {
			setting, file, err := refusedFile(c.prefix, "ca", c.ca.File, err)
			a.log.Error("TLS CA not reloaded (SIGHUP); the CA in force is kept", "setting", setting, "file", file, "err", err)
			a.warnExpiring(c.expiring())
			continue
		}
		var held []string
		for _, cert := range c.ca.Certificates() {
			held = append(held, fmt.Sprintf("%s (serial %s, not_after %s)", cert.Subject, tlsfiles.Serial(cert), cert.NotAfter.UTC().Format(time.RFC3339)))
		}
		changed := !slices.EqualFunc(before, c.ca.Certificates(), (*x509.Certificate).Equal)
		a.log.Info("TLS CA reloaded (SIGHUP)", "setting", c.prefix+"ca", "file", c.ca.File, "cas", strings.Join(held, "; "), "changed", changed)
		a.warnIgnoredCAs(c.prefix+"ca", c.ca)
		if changed && c.reloaded != nil {
			c.reloaded()
		}
		a.warnExpiring(c.expiring())
	}
}

// refusedFile is the setting (prefix and which file), the file and the
// cause a refused reload says: the *tlsfiles.FileError's, or those given.
func refusedFile(prefix, which, file string, err error) (string, string, error) {
	var bad *tlsfiles.FileError
	if errors.As(err, &bad) {
		return prefix + bad.Which, bad.File, bad.Err
	}
	return prefix + which, file, err
}

// certExpiry is, for the metrics, when the first certificate of each
// file in force expires, by setting: its flag without its dashes.
func certExpiry(files []expiring) map[string]func() time.Time {
	m := map[string]func() time.Time{}
	for _, e := range files {
		m[strings.TrimPrefix(e.flag, "--")] = func() time.Time { return e.first().NotAfter }
	}
	return m
}

// listenTLSEmbedded refuses --nats-listen-tls-cert and -key when serve
// joins another NATS (--nats, or INGESTQ_NATS that settleNATS kept): no
// embedded listener is then opened, and the files would secure nothing.
func (a *app) listenTLSEmbedded(f serveFlags) error {
	if a.nats == "" || f.listenTLS.cert == "" {
		return nil
	}
	return usagef("--nats-listen-tls-cert %s: it secures the embedded server's --nats-listen, and serve joins the NATS at %s instead (--nats or %s)",
		f.listenTLS.cert, a.natsShown(), EnvNATS)
}

// together tells whether the TLS files named by which (cert, key, ca) are
// given, an error naming those missing when only some are.
func together(prefix string, files tlsFiles, which ...string) (bool, error) {
	byName := map[string]string{"cert": files.cert, "key": files.key, "ca": files.ca}
	var missing []string
	for _, w := range which {
		if byName[w] == "" {
			missing = append(missing, prefix+w)
		}
	}
	switch len(missing) {
	case 0:
		return true, nil
	case len(which):
		return false, nil
	}
	return false, usagef("%s go together: %s not given", prefix+strings.Join(which, ", -"), strings.Join(missing, " and "))
}

// tlsFileRefused is a usage error naming the setting (prefix + cert, key
// or ca), the file and what is wrong with it.
func tlsFileRefused(prefix string, err error) error {
	var bad *tlsfiles.FileError
	if errors.As(err, &bad) {
		return usagef("%s%s %s: %v", prefix, bad.Which, bad.File, bad.Err)
	}
	return usagef("%scert: %v", prefix, err)
}
