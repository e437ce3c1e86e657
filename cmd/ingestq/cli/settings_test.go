package cli_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/internal/natstest"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// A setting the daemon's parts refuse is a usage error (exit 2) naming it,
// checked by the part itself (reactor.New, handlers.New), not by the CLI.
func TestServeRefusesBadSettings(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--state-workers", "downloading=0"}, "Downloading workers 0"},
		{[]string{"--max-fill", "1.5"}, "max fill 1.5"},
		{[]string{"--states", "storing,Storage"}, `--states: unknown state "Storage" (known: pending, estimating, provisioning, downloading, processing, storing, recording, notify, intake, reporting)`},
		{[]string{"--states", " , "}, "--states: no state named"},
		{[]string{"--advertise", "ingest1:8080"}, `--advertise "ingest1:8080": want an http(s) URL of a host`},
		{[]string{"--http", "off", "--advertise", "http://ingest1:8080"}, "--advertise http://ingest1:8080: the HTTP server is off"},
		{[]string{"--fetch-allow", "127.0.0.0/8,localhost"}, `--fetch-allow: "localhost" is neither a range (CIDR, as 10.0.0.0/8) nor an address`},
	} {
		args := append([]string{"serve", "--data-dir", t.TempDir(), "--nats-listen", closedAddr(t), "--http", "127.0.0.1:0"}, c.args...)
		_, stderr, code := e.run(args...)
		wantCode(t, code, 2)
		if !strings.Contains(stderr, c.want) {
			t.Errorf("serve %v: stderr %q does not name %q", c.args, stderr, c.want)
		}
	}
}

// --nats-cluster clusters the embedded server: with --nats, or without a
// port the other daemons can be told, it is a usage error naming it.
func TestServeRefusesBadNATSCluster(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--nats-cluster", "127.0.0.1:6222", "--nats", "nats://127.0.0.1:4222"}, "--nats-cluster clusters the embedded NATS server"},
		{[]string{"--nats-cluster", "127.0.0.1:0"}, `--nats-cluster: events: cluster address "127.0.0.1:0": want a port`},
		{[]string{"--nats-cluster", "somehost"}, `--nats-cluster: events: cluster address "somehost"`},
	} {
		args := append([]string{"serve", "--data-dir", t.TempDir(), "--http", "off", "--nats-listen", closedAddr(t)}, c.args...)
		_, stderr, code := e.run(args...)
		wantCode(t, code, 2)
		if !strings.Contains(stderr, c.want) {
			t.Errorf("serve %v: stderr %q does not name %q", c.args, stderr, c.want)
		}
	}
}

// A --nats-cluster name that resolves here to loopback only (Debian maps
// the machine's own name to 127.0.1.1) is where the embedded server
// listens, out of the other hosts' reach: serve warns, naming it.
func TestServeWarnsOfAClusterNameOnLoopback(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, port, _ := net.SplitHostPort(natstest.FreeAddr(t))
	d := serve(t, zktest.Shared(t).Addr, e.root, "--pipeline", "passthrough", "--nats-cluster", "localhost:"+port)
	line := d.log.WaitFor(t, "--nats-cluster names a host that resolves here to loopback only")
	if !strings.Contains(line, "localhost:"+port) || !strings.Contains(line, "127.0.0.1") {
		t.Errorf("the warning %q names neither the setting nor its address", line)
	}
}

// The HTTP API's settings are checked before anything starts: a
// certificate without its key, a weak token, an unknown role.
func TestServeRefusesBadAPISettings(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tokens := filepath.Join(t.TempDir(), "tokens")
	e.ok(os.WriteFile(tokens, []byte("admin short\n"), 0o600))
	roles := filepath.Join(t.TempDir(), "roles")
	e.ok(os.WriteFile(roles, []byte("root 0123456789abcdef0123\n"), 0o600))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", "cert.pem"}, "--tls-cert and --tls-key go together"},
		{[]string{"--http", "off", "--tls-cert", "cert.pem"}, "--tls-cert cert.pem: the HTTP server is off"},
		{[]string{"--api-tokens", tokens}, tokens + ", line 1: token of 5 characters: want at least 16"},
		{[]string{"--api-tokens", roles}, `role "root": want read, operate or admin`},
		{[]string{"--api-tokens", filepath.Join(t.TempDir(), "none")}, "--api-tokens: API tokens: open"},
	} {
		args := append([]string{"serve", "--data-dir", t.TempDir(), "--nats-listen", closedAddr(t), "--http", "127.0.0.1:0"}, c.args...)
		_, stderr, code := e.run(args...)
		wantCode(t, code, 2)
		if !strings.Contains(stderr, c.want) {
			t.Errorf("serve %v: stderr %q does not name %q", c.args, stderr, c.want)
		}
	}
}
