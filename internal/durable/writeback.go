package durable

import "os"

// WritebackEvery is how many bytes of a file written in order go by before
// a Writeback asks the kernel to start writing them to disk.
const WritebackEvery = 1 << 20

// Writeback counts the bytes written to a file from an offset on, and
// every WritebackEvery of them asks the kernel to start writing them to
// disk (StartWriteback): the disk then works while the writer goes on
// (hashing, say), where otherwise everything waits for the final fsync.
// Placed after the file in an io.MultiWriter, or given each write's bytes,
// it sees what the file took; it never writes itself.
type Writeback struct {
	f          *os.File
	off, count int64 // the next byte to hand over; bytes after it written
}

// NewWriteback counts f's writes from offset off.
func NewWriteback(f *os.File, off int64) *Writeback { return &Writeback{f: f, off: off} }

// Write counts p as written to the file.
func (w *Writeback) Write(p []byte) (int, error) {
	if w.count += int64(len(p)); w.count >= WritebackEvery {
		StartWriteback(w.f, w.off, w.count)
		w.off, w.count = w.off+w.count, 0
	}
	return len(p), nil
}
