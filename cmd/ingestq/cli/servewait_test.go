package cli_test

import (
	"context"
	"testing"

	"github.com/ingestq/ingestq/cmd/ingestq/cli"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// serve started before its ZooKeeper (a host booting, a README pasted in
// one go) waits for it, within the connect timeout, and then serves; a
// command run meanwhile says at once that nothing listens.
func TestServeWaitsForZooKeeperToStart(t *testing.T) {
	t.Parallel()
	srv, err := zktest.StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Kill() })
	if err := srv.Stop(); err != nil { // its address is known, and nothing listens there now
		t.Fatal(err)
	}
	log := &logtest.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan int, 1)
	go func() {
		exited <- cli.Run(ctx, []string{"--zk", srv.Addr, "--zk-root", "/ingestq", "--connect-timeout", "2m", "serve",
			"--data-dir", t.TempDir(), "--pipeline", "passthrough", "--nats-listen", "off", "--http", "off"},
			log, log, func(string) string { return "" })
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-exited; code != 0 {
			t.Errorf("serve exited %d; its log:\n%s", code, log.String())
		}
	})
	log.WaitFor(t, "ZooKeeper refuses connections; waiting for it")
	_, stderr, code := runEnv(t, nil, "--zk", srv.Addr, "ls", "batches")
	wantCode(t, code, 1)
	wantErrLine(t, stderr, "connection refused, nothing listens there")
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	log.WaitFor(t, "reactor: running")
}
