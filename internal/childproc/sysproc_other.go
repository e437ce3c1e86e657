//go:build unix && !linux

package childproc

import "syscall"

// ownGroupDyingWithUs puts the program in its own process group so Stop and
// Kill reach the whole group.
func ownGroupDyingWithUs(a *syscall.SysProcAttr) {
	a.Setpgid = true
}
