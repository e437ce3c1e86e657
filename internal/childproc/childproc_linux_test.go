package childproc

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// helperEnv makes the test binary the helper of TestChildDiesWithTheTestBinary.
const helperEnv = "CHILDPROC_TEST_HELPER"

// A program started by Proc dies when the test binary that started it is
// killed, with no chance to clean up: the kernel sends it SIGKILL. Run as
// root, the program runs as another user (as pgtest runs postgres), whose
// change of user must not clear the death signal.
func TestChildDiesWithTheTestBinary(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		helper(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildDiesWithTheTestBinary$")
	cmd.Env = append(os.Environ(), helperEnv+"="+t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the helper printed no pid: %v", err)
	}
	pid, err := strconv.Atoi(line[:len(line)-1])
	if err != nil {
		t.Fatalf("the helper printed %q, not a pid", line)
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("pidfd of the helper's child %d: %v", pid, err)
	}
	defer unix.Close(fd)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// A pidfd turns readable when its process exits.
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, int(time.Minute.Milliseconds()))
	if err != nil || n != 1 {
		t.Fatalf("the child %d outlived the test binary that started it by a minute (poll %d, %v)", pid, n, err)
	}
}

// helper starts a long sleep through Proc (as nobody when root), prints
// its pid and waits to be killed.
func helper(t *testing.T) {
	p := &Proc{Name: "helper: sleep", LogPath: filepath.Join(os.Getenv(helperEnv), "sleep.log")}
	cmd := exec.Command("sleep", "300")
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	if err := p.Start(cmd); err != nil {
		t.Fatal(err)
	}
	fmt.Println(cmd.Process.Pid)
	select {}
}
