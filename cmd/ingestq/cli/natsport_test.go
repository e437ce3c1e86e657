package cli_test

import (
	"net"
	"testing"
)

// serve whose NATS port is taken says which, and how to choose another or
// join a running NATS, and exits.
func TestServeNATSPortTaken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	_, stderr, code := e.run("serve", "--pipeline", "passthrough", "--http", "off", "--nats-listen", l.Addr().String(), "--data-dir", t.TempDir())
	wantCode(t, code, 1)
	wantErrLine(t, stderr, l.Addr().String(), "address already in use", "--nats-listen", "--nats URL")
}
