package childproc

import "syscall"

// sysProcAttr puts the program in its own process group (so Stop and Kill
// reach the whole group) and has the kernel kill it if the test binary dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
