package durable

import (
	"os"

	"golang.org/x/sys/unix"
)

// StartWriteback asks the kernel to start writing f's bytes [off, off+n)
// to disk now, without waiting for them (sync_file_range with
// SYNC_FILE_RANGE_WRITE): the disk then works while the caller goes on
// hashing, and the fsync that makes the file durable has less left to
// wait for. It is advice, so an error is ignored: the fsync still decides.
func StartWriteback(f *os.File, off, n int64) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WRITE)
	})
}
