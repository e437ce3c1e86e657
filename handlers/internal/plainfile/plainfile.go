// Package plainfile opens a file that a request or a step reads only
// when it is a plain file. The open follows no symbolic link at the path's
// end (but OpenFollowing's) and waits on no pipe (O_NONBLOCK: a FIFO
// without a writer opens at once, and is then refused), and the file
// judged is the one open (fstat): a look at the path first (Lstat), then
// an open, let the file be swapped for a link or a pipe in between, and a
// pipe hung every request that read it.
package plainfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotPlain is a path that names no plain file: a symbolic link, a
// pipe, a socket, a folder, a device.
var ErrNotPlain = errors.New("not a plain file")

// openFlags open for reading, without following a link or waiting on a
// pipe. O_NONBLOCK changes nothing in reading a plain file.
const openFlags = os.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK

// Open opens the plain file at path for reading, and gives what fstat
// says of it.
func Open(path string) (*os.File, fs.FileInfo, error) {
	return judge(os.OpenFile(path, openFlags, 0))
}

// OpenFollowing is Open, but a symbolic link at the path's end is
// followed: a file: payload's path, which a depositor may give as a link.
func OpenFollowing(path string) (*os.File, fs.FileInfo, error) {
	return judge(os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0))
}

// OpenIn is Open of name inside dir: a symbolic link in it is followed
// while it stays inside dir (os.Root), and the file it ends at is judged
// as Open judges one.
func OpenIn(dir, name string) (*os.File, fs.FileInfo, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	return judge(root.OpenFile(name, openFlags, 0))
}

// Read is what the plain file at path holds, if it holds at most max
// bytes (max < 0: any number), however the file grows while it is read.
func Read(path string, max int64) ([]byte, error) {
	f, st, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadOpen(f, st.Size(), max)
}

// ReadOpen is Read of a file open already (Open's, OpenFollowing's), of
// size bytes as fstat said.
func ReadOpen(f io.Reader, size, max int64) ([]byte, error) {
	if max < 0 {
		return io.ReadAll(f)
	}
	if size > max {
		return nil, &TooLongError{Size: size, Max: max}
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(data)) > max {
		err = &TooLongError{Size: -1, Max: max}
	}
	return data, err
}

// TooLongError is a plain file longer than a Read takes. Its text, as
// ErrNotPlain's, does not name the file: the caller does.
type TooLongError struct {
	Size int64 // -1: it grew past Max while it was read
	Max  int64
}

func (e *TooLongError) Error() string {
	if e.Size < 0 {
		return fmt.Sprintf("more than %d bytes", e.Max)
	}
	return fmt.Sprintf("%d bytes, more than %d", e.Size, e.Max)
}

func judge(f *os.File, err error) (*os.File, fs.FileInfo, error) {
	if err != nil {
		switch {
		case errors.Is(err, syscall.ELOOP):
			err = fmt.Errorf("%w: a symbolic link", ErrNotPlain)
		case errors.Is(err, syscall.ENXIO): // open(2) of a socket
			err = fmt.Errorf("%w: a socket, or a device without its driver", ErrNotPlain)
		}
		return nil, nil, err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("%w: mode %v", ErrNotPlain, st.Mode())
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
}
