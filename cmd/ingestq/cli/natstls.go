package cli

import (
	"crypto/tls"
	"errors"
	"strings"

	"github.com/ingestq/ingestq/events"
)

// clusterTLS reads --nats-cluster-tls-cert, -key and -ca: the three
// together, with --nats-cluster, checked at start (events.LoadClusterTLS)
// so that a file wrong is named before the daemon joins anything; nil
// when none is given.
func (a *app) clusterTLS(f serveFlags) (*tls.Config, error) {
	files := f.clusterTLS
	if given, err := together("--nats-cluster-tls-", files, "cert", "key", "ca"); !given || err != nil {
		return nil, err
	}
	if f.natsCluster == "" {
		return nil, usagef("--nats-cluster-tls-cert %s: it secures the routes of --nats-cluster, which is not given", files.cert)
	}
	tc, err := events.LoadClusterTLS(files.cert, files.key, files.ca, f.natsCluster)
	if err != nil {
		return nil, tlsFileRefused("--nats-cluster-tls-", err)
	}
	a.warnOpenFile("--nats-cluster-tls-key: the key's file", files.key)
	return tc, nil
}

// listenTLS reads --nats-listen-tls-cert and -key: both, with a client
// listener (--nats-listen not off), checked at start; nil when neither is
// given.
func (a *app) listenTLS(f serveFlags) (*tls.Config, error) {
	files := f.listenTLS
	if given, err := together("--nats-listen-tls-", files, "cert", "key"); !given || err != nil {
		return nil, err
	}
	if f.natsListen == "off" {
		return nil, usagef("--nats-listen-tls-cert %s: it secures --nats-listen, which is off", files.cert)
	}
	tc, err := events.LoadListenTLS(files.cert, files.key)
	if err != nil {
		return nil, tlsFileRefused("--nats-listen-tls-", err)
	}
	a.warnOpenFile("--nats-listen-tls-key: the key's file", files.key)
	return tc, nil
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
	var bad *events.TLSFileError
	if errors.As(err, &bad) {
		return usagef("%s%s %s: %v", prefix, bad.Which, bad.File, bad.Err)
	}
	return usagef("%scert: %v", prefix, err)
}
