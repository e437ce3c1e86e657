package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// lockFileName is the file in a data folder that its daemon holds an
// exclusive flock on for as long as it runs (decision 242).
const lockFileName = "serve.lock"

// dataDirLock is a data folder held by this process.
type dataDirLock struct{ f *os.File }

// lockDataDir takes the data folder dir for one daemon: an exclusive,
// non-blocking flock on dir/serve.lock, which then names the holder (its
// pid, --host, start time, and the other facts in about). The kernel drops
// the lock when the process ends, however it ends (SIGKILL too), so a
// stale file never holds a folder. A folder another process holds is
// refused, naming that daemon as its file names it.
func lockDataDir(dir, about string) (*dataDirLock, error) {
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("--data-dir %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("--data-dir %s: lock %s: %w", dir, path, err)
		}
		holder := "another daemon"
		if b, rerr := os.ReadFile(path); rerr == nil && len(strings.TrimSpace(string(b))) > 0 {
			holder += " (" + strings.TrimSpace(string(b)) + ")"
		}
		return nil, fmt.Errorf("--data-dir %s is in use by %s, which holds %s: its embedded NATS store, working folders, "+
			"storage and inventory are one daemon's; give this one another --data-dir", dir, holder, path)
	}
	// Whoever finds the folder taken reads who took it. The lock, not the
	// text, is what counts: a text left by a daemon that died is
	// overwritten here.
	text := fmt.Sprintf("pid %d, %s, since %s\n", os.Getpid(), about, when(time.Now()))
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(text), 0)
	}
	return &dataDirLock{f: f}, nil
}

// release gives the folder up (a process that ends gives it up too).
func (l *dataDirLock) release() { _ = l.f.Close() }
