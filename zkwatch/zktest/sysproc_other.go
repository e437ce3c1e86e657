//go:build unix && !linux

package zktest

import "syscall"

// sysProcAttr puts the server in its own process group so Stop/Kill reach
// the whole group.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
