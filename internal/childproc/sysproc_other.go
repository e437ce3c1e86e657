//go:build unix && !linux

package childproc

import "syscall"

// sysProcAttr puts the program in its own process group so Stop and Kill
// reach the whole group.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
