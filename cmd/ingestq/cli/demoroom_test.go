package cli_test

import (
	"errors"
	"io/fs"
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
