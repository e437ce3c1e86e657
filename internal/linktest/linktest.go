// Package linktest helps tests of files taken by hard links: whether two
// paths are one file, and a folder on another file system.
package linktest

import (
	"os"
	"syscall"
	"testing"
)

// SameFile tells whether a and b name one file (a hard link), failing t
// when either is missing.
func SameFile(t testing.TB, a, b string) bool {
	t.Helper()
	fa, err := os.Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := os.Stat(b)
	if err != nil {
		t.Fatal(err)
	}
	return os.SameFile(fa, fb)
}

// OtherFileSystem is a fresh folder, removed when the test ends, on a file
// system other than dir's (/dev/shm); it skips the test when there is none.
func OtherFileSystem(t testing.TB, dir string) string {
	t.Helper()
	other, err := os.MkdirTemp("/dev/shm", "linktest-")
	if err != nil {
		t.Skipf("no second file system to link across: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(other) })
	var a, b syscall.Stat_t
	if syscall.Stat(dir, &a) != nil || syscall.Stat(other, &b) != nil || a.Dev == b.Dev {
		t.Skipf("/dev/shm is on the same file system as %s", dir)
	}
	return other
}
