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

// SetDemoSpace makes the demo read its folder's file system with space
// until t ends. Not for parallel tests.
func SetDemoSpace(t testing.TB, space func(dir string) (free, total uint64, err error)) {
	old := demoSpace
	demoSpace = space
	t.Cleanup(func() { demoSpace = old })
}
