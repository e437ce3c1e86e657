//go:build unix

package cli

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// termWidth is the number of columns of the terminal w is; 0 when unknown
// (not a terminal, or one that gives no size, as a new pseudo-terminal).
func termWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	raw, err := f.SyscallConn() // not Fd, which would set the file blocking
	if err != nil {
		return 0
	}
	cols := 0
	_ = raw.Control(func(fd uintptr) {
		if ws, err := unix.IoctlGetWinsize(int(fd), unix.TIOCGWINSZ); err == nil {
			cols = int(ws.Col)
		}
	})
	return cols
}
