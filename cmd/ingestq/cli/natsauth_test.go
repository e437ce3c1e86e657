package cli_test

import (
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/internal/natstest"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// Against a NATS that wants a token, the client commands connect with
// --nats-token (or INGESTQ_NATS_TOKEN), and say why when they cannot.
func TestClientNATSToken(t *testing.T) {
	t.Parallel()
	ns := startNATSServer(t, &server.Options{JetStream: true, StoreDir: t.TempDir(), Authorization: "s3cret"})
	url := ns.ClientURL()
	d := newDaemon(t, func(c *events.Config) { c.URL, c.Token, c.Listen = url, "s3cret", "" })
	d.start()

	_, stderr, code := d.run("--nats", url, "submit", "--profile", "demo", "--wait", "passthrough:3")
	wantCode(t, code, 1)
	if !strings.Contains(strings.ToLower(stderr), "authorization") {
		t.Errorf("without a token: stderr %q does not say authorization failed", stderr)
	}
	out, _, code := d.run("--nats", url, "--nats-token", "s3cret", "submit", "--profile", "demo", "--wait", "passthrough:3")
	wantCode(t, code, 0)
	bid := strings.SplitN(out, "\n", 2)[0]
	d.flush()
	out, _, code = runEnv(t, map[string]string{"INGESTQ_NATS_TOKEN": "s3cret"}, "--zk", zktest.Shared(t).Addr,
		"--zk-root", d.root, "--nats", url, "events", "replay", "--batch", bid)
	wantCode(t, code, 0)
	if n := strings.Count(out, "Completed"); n < 4 {
		t.Errorf("replay with the token from the environment: %d Completed lines, want the 3 jobs and the batch:\n%s", n, out)
	}
}

// A NATS that takes the connection but whose event stream does not answer
// (here a subscriber that never replies stands for a stream without a
// leader): the action is made, and the warning says the stream did not
// answer, not that --nats names the wrong server.
func TestActionWhileTheStreamDoesNotAnswer(t *testing.T) {
	t.Parallel()
	ns := startNATSServer(t, &server.Options{})
	silent, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	if _, err := silent.Subscribe("ingestq.>", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	if err := silent.Flush(); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	_, stderr, code := runEnv(t, nil, "--zk", zktest.Shared(t).Addr, "--zk-root", e.root, "--nats", ns.ClientURL(), "hold", "queue")
	wantCode(t, code, 0)
	if !strings.Contains(stderr, "its event stream did not answer") || strings.Contains(stderr, "must name the daemon's NATS") {
		t.Errorf("stderr %q: want a warning that the stream did not answer, not advice to change --nats", stderr)
	}
}

// startNATSServer runs a nats-server with opts on a random loopback port
// for the test, and waits until it takes connections.
func startNATSServer(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	opts.Host, opts.Port, opts.NoSigs, opts.NoLog = "127.0.0.1", server.RANDOM_PORT, true, true
	return natstest.Run(t, opts)
}
