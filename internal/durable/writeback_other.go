//go:build !linux

package durable

import "os"

// StartWriteback does nothing where sync_file_range is missing: the fsync
// writes everything then.
func StartWriteback(f *os.File, off, n int64) {}
