package cli_test

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/cmd/ingestq/cli"
)

// On a disk with less free than the daemon keeps free (--space-margin), the
// demo's jobs would wait in Provisioning and the demo would follow them
// without end: it refuses before it starts anything, saying what is free
// and what it needs, and leaves no folder behind.
func TestDemoRefusesADiskWithoutRoom(t *testing.T) {
	// Not parallel: it replaces the demo's view of the disk.
	cli.SetDiskSpace(t, func(string) (free, total uint64, err error) { return 10 << 20, 1000 << 20, nil })
	dir := filepath.Join(t.TempDir(), "demo")
	stdout, stderr, code := runEnv(t, nil, "demo", "--dir", dir, "--content", demoContent)
	wantCode(t, code, 1)
	wantErrLine(t, stderr, "the demo folder "+dir+" is on a file system with 10 MiB free", "the demo needs 80 MiB",
		"--space-margin, 64 MiB", "give --dir on another file system")
	if strings.Contains(stdout, "ZooKeeper") {
		t.Errorf("the demo started ZooKeeper on a disk without room:\n%s", stdout)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the demo left its folder %s (%v)", dir, err)
	}
}

// The demo picks its daemon's ports free, then starts the daemon, which
// binds them: another process may take one between. Here a real listener
// holds one the demo picks (the HTTP server's, the first picked, or the
// NATS listener's, the second; or, with --hosts 2, the second host's HTTP
// server's, the third), as such a process would: the daemon says the
// address is in use, and the demo starts it again on other ports, says
// so, and runs to its end. Before, it ended there: "the daemon did not
// start (it exited 1)", exit 1; a second host was not waited for at all
// (its readiness was the first host's), and the demo never ended.
func TestDemoWhosePortIsTakenMeanwhile(t *testing.T) {
	// Not parallel: it replaces the demo's choice of ports.
	for _, c := range []struct {
		port  string
		pick  int
		hosts string
	}{{"HTTP", 1, "1"}, {"NATS", 2, "1"}, {"second host's HTTP", 3, "2"}} {
		t.Run(c.port, func(t *testing.T) {
			taker, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer taker.Close()
			taken, picks := taker.Addr().String(), 0
			cli.SetFreeAddr(t, func(free func() (string, error)) (string, error) {
				if picks++; picks == c.pick {
					return taken, nil
				}
				return free()
			})
			stdout, stderr, code := runEnv(t, nil, "demo", "--dir", filepath.Join(t.TempDir(), "demo"), "--content", demoContent, "--hosts", c.hosts)
			if code != 0 {
				t.Fatalf("ingestq demo with its %s port taken: exit %d, want 0\nstdout:\n%s\nstderr:\n%s", c.port, code, stdout, stderr)
			}
			for _, want := range []string{
				"  " + taken + " was taken by another process before the daemon bound it: starting the daemon again on other ports",
				"== Storage: 3 OCFL 1.1 objects", "Done.",
			} {
				if !strings.Contains(stdout, want) {
					t.Errorf("the demo's output lacks %q:\n%s\nstderr:\n%s", want, stdout, stderr)
				}
			}
			if picks != 4 {
				t.Errorf("the demo picked %d ports, want 4: the ports up to the one taken, then the daemon's anew", picks)
			}
		})
	}
}
