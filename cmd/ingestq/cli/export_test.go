package cli

// LockDataDir is lockDataDir, for the tests of package cli_test; release
// gives the folder up.
func LockDataDir(dir, about string) (release func(), err error) {
	l, err := lockDataDir(dir, about)
	if err != nil {
		return nil, err
	}
	return l.release, nil
}
