package childproc

import "syscall"

// ownGroupDyingWithUs puts the program in its own process group (so Stop
// and Kill reach the whole group) and has the kernel kill it if the test
// binary dies. Go sets the death signal after any Credential, whose change
// of user would otherwise clear it.
func ownGroupDyingWithUs(a *syscall.SysProcAttr) {
	a.Setpgid = true
	a.Pdeathsig = syscall.SIGKILL
}
