package s3test

import "syscall"

// sysProcAttr has the kernel kill the server if the test binary dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
