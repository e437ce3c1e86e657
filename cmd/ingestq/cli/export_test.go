package cli

import "testing"

// LockDataDir is lockDataDir, for the tests of package cli_test; release
// gives the folder up.
func LockDataDir(dir, about string) (release func(), err error) {
	l, err := lockDataDir(dir, about)
	if err != nil {
		return nil, err
	}
	return l.release, nil
}

// SetDiskSpace makes the demo's check and the daemons serve starts from
// now on read file systems with space, until t ends. Not for parallel tests.
func SetDiskSpace(t testing.TB, space func(dir string) (free, total uint64, err error)) {
	old := diskSpace
	diskSpace = space
	t.Cleanup(func() { diskSpace = old })
}

// SetFreeAddr makes the demo pick its daemons' ports with free from now
// on, until t ends; free gets the picker it replaces. Not for parallel
// tests.
func SetFreeAddr(t testing.TB, free func(picker func() (string, error)) (string, error)) {
	old := freeAddr
	freeAddr = func() (string, error) { return free(old) }
	t.Cleanup(func() { freeAddr = old })
}
