package cli_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/ingestq/ingestq/internal/natstest"
	"github.com/ingestq/ingestq/internal/tlstest"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// Route TLS files that are missing, a key of another certificate, a
// certificate another CA signed, one an intermediate CA signed without the
// intermediate's certificate after it, one expired, one for servers only or
// naming another host than --nats-cluster's are refused at once (exit 2),
// naming the setting, the file and what is wrong; so are the files given
// in part, or without --nats-cluster. The client listener's alike: in
// part, expired, for clients only, or with --nats-listen off.
func TestServeNATSTLSFilesRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ca := tlstest.NewAuthority(t)
	cert, key := ca.Peer(t, "d1", "127.0.0.1")
	_, otherKey := ca.Peer(t, "d2", "127.0.0.1")
	elsewhere, elsewhereKey := ca.Peer(t, "elsewhere", "10.0.0.12", "ingest2.example.org")
	expired, expiredKey := ca.ExpiredPeer(t, "expired", "127.0.0.1")
	foreign, foreignKey := tlstest.NewAuthority(t).Peer(t, "foreign", "127.0.0.1")
	unchained, unchainedKey := ca.Intermediate(t, "intermediate").Peer(t, "unchained", "127.0.0.1") // the intermediate's certificate not after it
	serverOnly := tlstest.Mutual(t)                                                                 // a server certificate for 127.0.0.1, no client authentication
	missing := filepath.Join(t.TempDir(), "missing.pem")
	cluster := func(cert, key, ca string) []string {
		args := []string{"--nats-cluster", closedAddr(t), "--nats-cluster-tls-cert", cert, "--nats-cluster-tls-key", key}
		if ca != "" {
			args = append(args, "--nats-cluster-tls-ca", ca)
		}
		return args
	}
	for _, c := range []struct {
		what string
		args []string
		want []string
	}{
		{"a missing file", cluster(missing, key, ca.CAFile), []string{"--nats-cluster-tls-cert " + missing + ": no such file or directory"}},
		{"a key of another certificate", cluster(cert, otherKey, ca.CAFile),
			[]string{"--nats-cluster-tls-key " + otherKey + ": not the key of the certificate in " + cert}},
		{"another CA's certificate", cluster(foreign, foreignKey, ca.CAFile),
			[]string{"--nats-cluster-tls-cert " + foreign + ": not signed by the CA in " + ca.CAFile}},
		{"an intermediate CA's certificate without the intermediate's", cluster(unchained, unchainedKey, ca.CAFile),
			[]string{"--nats-cluster-tls-cert " + unchained + ": not signed by the CA in " + ca.CAFile +
				", nor by an intermediate CA whose certificate follows it in this file (its issuer: CN=ingestq test intermediate)"}},
		{"an expired certificate", cluster(expired, expiredKey, ca.CAFile), []string{"--nats-cluster-tls-cert " + expired + ": expired on "}},
		{"a certificate for servers only", cluster(serverOnly.ServerCert, serverOnly.ServerKey, serverOnly.CA),
			[]string{"--nats-cluster-tls-cert " + serverOnly.ServerCert + ": its extended key usage", "want serverAuth and clientAuth"}},
		{"a certificate of another host", cluster(elsewhere, elsewhereKey, ca.CAFile),
			[]string{"--nats-cluster-tls-cert " + elsewhere + ": names ingest2.example.org, 10.0.0.12, not 127.0.0.1, the host this member's route announces"}},
		{"no CA", cluster(cert, key, ""), []string{"--nats-cluster-tls-cert, -key, -ca go together: --nats-cluster-tls-ca not given"}},
		{"no --nats-cluster", cluster(cert, key, ca.CAFile)[2:],
			[]string{"--nats-cluster-tls-cert " + cert + ": it secures the routes of --nats-cluster, which is not given"}},
		{"a listener's key alone", []string{"--nats-listen", "127.0.0.1:0", "--nats-listen-tls-key", key},
			[]string{"--nats-listen-tls-cert, -key go together: --nats-listen-tls-cert not given"}},
		{"a listener's expired certificate", []string{"--nats-listen", "127.0.0.1:0", "--nats-listen-tls-cert", expired, "--nats-listen-tls-key", expiredKey},
			[]string{"--nats-listen-tls-cert " + expired + ": expired on "}},
		{"a listener's certificate for clients only", []string{"--nats-listen", "127.0.0.1:0", "--nats-listen-tls-cert", serverOnly.ClientCert, "--nats-listen-tls-key", serverOnly.ClientKey},
			[]string{"--nats-listen-tls-cert " + serverOnly.ClientCert + ": its extended key usage does not allow a server: want serverAuth"}},
		{"a listener off", []string{"--nats-listen-tls-cert", cert, "--nats-listen-tls-key", key},
			[]string{"--nats-listen-tls-cert " + cert + ": it secures --nats-listen, which is off"}},
	} {
		args := append([]string{"--zk", zktest.Shared(t).Addr, "--zk-root", e.root, "serve", "--data-dir", t.TempDir(), "--pipeline", "passthrough",
			"--nats-listen", "off", "--http", "off"}, c.args...)
		t.Run(c.what, func(t *testing.T) {
			stderr, code := serveRefused(t, nil, args...)
			wantCode(t, code, 2)
			wantErrLine(t, stderr, c.want...)
		})
	}
}

// With --nats-listen-tls-cert and -key the embedded server's client
// listener takes TLS only: the CLI connects with --nats-tls-ca (or
// INGESTQ_NATS_TLS_CA), with or without a client certificate, and one
// without says the handshake failed, naming --nats-tls-ca; the daemon's
// own clients, in-process, are not concerned.
func TestServeNATSListenerTLS(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pki := tlstest.Mutual(t) // a server certificate for 127.0.0.1
	listen := natstest.FreeAddr(t)
	serve(t, zktest.Shared(t).Addr, e.root, "--pipeline", "passthrough", "--nats-listen", listen,
		"--nats-listen-tls-cert", pki.ServerCert, "--nats-listen-tls-key", pki.ServerKey)
	url := "nats://" + listen
	cli := []string{"--zk", zktest.Shared(t).Addr, "--zk-root", e.root, "--nats", url}

	out, stderr, code := runEnv(t, nil, append(cli, "--nats-tls-ca", pki.CA, "submit", "--profile", "demo", "--wait", "passthrough:3")...)
	wantCode(t, code, 0)
	bid := strings.SplitN(out, "\n", 2)[0]
	for what, run := range map[string][]string{
		"--nats-tls-ca":            append(cli, "--nats-tls-ca", pki.CA, "events", "replay", "--batch", bid),
		"a client certificate too": append(cli, "--nats-tls-ca", pki.CA, "--nats-tls-cert", pki.ClientCert, "--nats-tls-key", pki.ClientKey, "events", "replay", "--batch", bid),
	} {
		out, stderr, code = runEnv(t, nil, run...)
		if code != 0 || strings.Count(out, "Completed") < 4 {
			t.Errorf("replay with %s: exit %d, %d Completed lines, want the 3 jobs and the batch:\n%s%s", what, code, strings.Count(out, "Completed"), out, stderr)
		}
	}
	out, _, code = runEnv(t, map[string]string{"INGESTQ_NATS_TLS_CA": pki.CA}, append(cli, "events", "replay", "--batch", bid)...)
	if code != 0 || strings.Count(out, "Completed") < 4 {
		t.Errorf("replay with INGESTQ_NATS_TLS_CA: exit %d:\n%s", code, out)
	}
	_, stderr, code = runEnv(t, nil, append(cli, "events", "replay", "--batch", bid)...)
	wantCode(t, code, 1)
	if !strings.Contains(stderr, "the TLS handshake with NATS at "+url+" failed (--nats-tls-ca names the CA of its certificate") {
		t.Errorf("replay without --nats-tls-ca: stderr %q, want it to say the TLS handshake failed, naming --nats-tls-ca", stderr)
	}
}

// The client listener's TLS files are refused (exit 2) when serve joins
// another NATS, by --nats or by INGESTQ_NATS (no --nats-listen or
// --nats-cluster given): it then opens no listener, and the files would
// secure nothing.
func TestServeNATSListenerTLSWithAnotherNATS(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ns := startNATSServer(t, &server.Options{JetStream: true, StoreDir: t.TempDir()})
	pki := tlstest.Mutual(t)
	url := ns.ClientURL()
	want := "--nats-listen-tls-cert " + pki.ServerCert + ": it secures the embedded server's --nats-listen, and serve joins the NATS at " + url +
		" instead (--nats or INGESTQ_NATS)"
	base := []string{"--zk", zktest.Shared(t).Addr, "--zk-root", e.root, "serve", "--data-dir", t.TempDir(), "--pipeline", "passthrough", "--http", "off"}
	t.Run("--nats", func(t *testing.T) {
		stderr, code := serveRefused(t, nil, append([]string{"--nats", url}, append(base, "--nats-listen-tls-cert", pki.ServerCert, "--nats-listen-tls-key", pki.ServerKey)...)...)
		wantCode(t, code, 2)
		wantErrLine(t, stderr, want)
	})
	t.Run("INGESTQ_NATS", func(t *testing.T) {
		stderr, code := serveRefused(t, map[string]string{"INGESTQ_NATS": url, "INGESTQ_NATS_LISTEN_TLS_CERT": pki.ServerCert,
			"INGESTQ_NATS_LISTEN_TLS_KEY": pki.ServerKey}, base...)
		wantCode(t, code, 2)
		wantErrLine(t, stderr, want)
	})
}

// The HTTP server's --tls-cert and --tls-key are checked at start as the
// NATS listener's are: a certificate expired or not valid yet, a key of
// another certificate, a certificate for clients only or a file missing is
// refused at once (exit 2), naming the setting, the file and the cause; so
// are the two in part, or with --http off. Before, serve took the first
// three and served them, every client's handshake failing.
func TestServeAPITLSFilesRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pki := tlstest.Mutual(t)
	expired, expiredKey := tlstest.Expired(t)
	future, futureKey := tlstest.NotYetValid(t)
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, c := range []struct {
		what string
		args []string
		want []string
	}{
		{"an expired certificate", []string{"--tls-cert", expired, "--tls-key", expiredKey}, []string{"--tls-cert " + expired + ": expired on "}},
		{"a certificate not valid yet", []string{"--tls-cert", future, "--tls-key", futureKey}, []string{"--tls-cert " + future + ": not valid before "}},
		{"a key of another certificate", []string{"--tls-cert", pki.ServerCert, "--tls-key", pki.ClientKey},
			[]string{"--tls-key " + pki.ClientKey + ": not the key of the certificate in " + pki.ServerCert}},
		{"a certificate for clients only", []string{"--tls-cert", pki.ClientCert, "--tls-key", pki.ClientKey},
			[]string{"--tls-cert " + pki.ClientCert + ": its extended key usage does not allow a server: want serverAuth"}},
		{"a missing file", []string{"--tls-cert", missing, "--tls-key", pki.ServerKey}, []string{"--tls-cert " + missing + ": no such file or directory"}},
		{"a key alone", []string{"--tls-key", pki.ServerKey}, []string{"--tls-cert and --tls-key go together: give both, or neither"}},
		{"--http off", []string{"--tls-cert", pki.ServerCert, "--tls-key", pki.ServerKey, "--http", "off"},
			[]string{"--tls-cert " + pki.ServerCert + ": the HTTP server is off (--http off)"}},
	} {
		args := append([]string{"--zk", zktest.Shared(t).Addr, "--zk-root", e.root, "serve", "--data-dir", t.TempDir(), "--pipeline", "passthrough",
			"--nats-listen", "off", "--http", "127.0.0.1:0"}, c.args...)
		t.Run(c.what, func(t *testing.T) {
			stderr, code := serveRefused(t, nil, args...)
			wantCode(t, code, 2)
			wantErrLine(t, stderr, c.want...)
		})
	}
}
