package main_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/internal/childproc"
)

// `make demo-cluster 2>&1 | head -20`: the demo's reader goes while it
// runs. The demo stops, as SIGPIPE stopped it before, but after its
// clean-up: its temporary folder is gone, its children (ZooKeeper) are
// stopped, and it exits 141, the code of a process a cut pipe ended.
func TestDemoCutByItsReaderCleansUp(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir() // the demo's temporary folder is made here
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(ingestqBin, "demo", "--content", filepath.Join("..", "..", "testdata", "demo"), "--hosts", "3")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	cmd.Stdout, cmd.Stderr = w, w // 2>&1 |
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close() // the demo's end of the pipe is its own now
	var read []string
	for lines := bufio.NewScanner(r); lines.Scan(); {
		read = append(read, lines.Text())
		if strings.HasPrefix(lines.Text(), "== Daemon host2") { // ZooKeeper and host1 run
			break
		}
	}
	children := childproc.Descendants(cmd.Process.Pid)
	folders, _ := filepath.Glob(filepath.Join(tmp, "ingestq-demo-*"))
	if len(children) == 0 || len(folders) != 1 {
		_ = cmd.Process.Kill()
		t.Fatalf("the demo runs with children %v and folders %v; want its ZooKeeper and one folder; it said:\n%s",
			children, folders, strings.Join(read, "\n"))
	}
	r.Close() // head -20 has what it wanted
	err = cmd.Wait()
	if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 141 {
		t.Errorf("the demo whose reader went: %v, want exit 141", err)
	}
	if left, _ := os.ReadDir(folders[0]); left != nil || fileExists(folders[0]) {
		t.Errorf("the demo's folder %s is left, holding %d entries", folders[0], len(left))
	}
	for _, pid := range children {
		if fileExists(fmt.Sprintf("/proc/%d", pid)) {
			t.Errorf("the demo's child process %d runs on", pid)
		}
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
