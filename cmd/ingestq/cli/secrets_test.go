package cli_test

import (
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// A daemon joining a NATS that wants a user's password, given in --nats
// (nats://user:pass@host), logs where its events go with the password
// masked; so does a client command that cannot get its action's events
// through.
func TestNATSPasswordNeverLogged(t *testing.T) {
	t.Parallel()
	ns := startNATSServer(t, &server.Options{JetStream: true, StoreDir: t.TempDir(), Username: "ingest", Password: "s3cret"})
	url := strings.Replace(ns.ClientURL(), "nats://", "nats://ingest:s3cret@", 1)
	shown := strings.Replace(url, "s3cret", "xxxxx", 1)
	e := newEnv(t)
	d := serve(t, zktest.Shared(t).Addr, e.root, "--nats", url)
	if line := d.log.WaitFor(t, "ingestq: serving"); !strings.Contains(line, "nats="+shown) {
		t.Errorf("the daemon's start says %q, want nats=%s", line, shown)
	}
	_, stderr, code := runEnv(t, nil, "--zk", zktest.Shared(t).Addr, "--zk-root", e.root, "--nats", strings.Replace(url, "s3cret", "wrong", 1), "hold", "queue")
	wantCode(t, code, 0)
	for what, text := range map[string]string{"the daemon's log": d.log.String(), "the client's stderr": stderr} {
		if strings.Contains(text, "s3cret") || strings.Contains(text, ":wrong@") {
			t.Errorf("%s shows a password:\n%s", what, text)
		}
	}
	if !strings.Contains(stderr, shown) {
		t.Errorf("the client's stderr %q does not name the NATS it tried, as %s", stderr, shown)
	}
}
