// Package freeport finds loopback TCP ports for the servers a test or the
// demo starts (ZooKeeper, NATS, PostgreSQL, versitygw, a daemon's
// listeners). A port
// the kernel hands out for listening on port 0 comes from its ephemeral
// range, which outgoing connections draw from too: between the test picking
// it and the server binding it, any connection of the busy test machine
// (a client of another test's server) could take it, and the server then
// fails with "address already in use". These ports come from below that
// range instead, where only listeners that ask for one by number go, and a
// port is not handed out twice by one process, nor by two at once: each
// port handed out stays reserved to its process (reserve) while the
// process runs, so another (a second package's tests) cannot take it in
// a moment it is not bound, before its server starts or while a test has
// stopped the server to start it again.
package freeport

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// floor is the lowest port handed out: above the well-known and the
// commonly configured ports (a developer's own services on 8080, 9000 …).
const floor = 15000

// tries bounds the ports tried before giving up.
const tries = 200

var (
	mu    sync.Mutex
	given = map[int]bool{}
	// The locks of the ports given, held until the process ends (an
	// unreferenced os.File would be closed by the garbage collector).
	reserved []io.Closer
)

// Port returns a loopback port free now, below the ephemeral range, that
// this process has not handed out before.
func Port() (int, error) {
	top := ephemeralLow()
	mu.Lock()
	defer mu.Unlock()
	for range tries {
		p := floor + rand.IntN(top-floor)
		if given[p] {
			continue
		}
		// Reserved before the check: the check's own bind must not touch a
		// port whose server, another process's, is about to bind it again.
		lock, ok := reserve(p)
		if !ok {
			continue // another process's
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			lock.Close()
			continue // taken
		}
		l.Close()
		given[p] = true
		reserved = append(reserved, lock)
		return p, nil
	}
	return 0, fmt.Errorf("freeport: no free port in %d tries between %d and %d", tries, floor, top)
}

// reserve takes the lock (a file's, in this user's directory under the
// temporary directory, which all of the user's test processes share) that
// reserves port p to this process while it runs; ok is false when another
// process holds it. Where no lock can be had (no directory of this user's
// alone, no flock), the lock does nothing and the port is only checked
// free, as before. The directory is the user's own, not one shared by all:
// in a shared one, another user could hold every port's lock, or plant a
// link that the open follows (O_CREATE would make the file it names).
func reserve(p int) (lock io.Closer, ok bool) {
	dir, ok := lockDir()
	if !ok {
		return noLock{}, true
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(p)), os.O_RDONLY|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return noLock{}, true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return noLock{}, !errors.Is(err, syscall.EWOULDBLOCK)
	}
	return f, true
}

// lockDir is the directory of the port locks, made if need be: this user's,
// a directory (not a link to one) that nobody else may write in.
func lockDir() (string, bool) {
	uid := os.Getuid()
	dir := filepath.Join(os.TempDir(), "ingestq-freeport-"+strconv.Itoa(uid))
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", false
	}
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm()&0o022 != 0 {
		return "", false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return dir, ok && int(st.Uid) == uid
}

type noLock struct{}

func (noLock) Close() error { return nil }

// Addr is Port as "127.0.0.1:port".
func Addr() (string, error) {
	p, err := Port()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}

// Ports returns n distinct ports, as Port.
func Ports(n int) ([]int, error) {
	out := make([]int, n)
	for i := range out {
		var err error
		if out[i], err = Port(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ephemeralLow is the start of the kernel's ephemeral port range (Linux's
// ip_local_port_range; 32768, its default, where it cannot be read).
func ephemeralLow() int {
	const linuxDefault = 32768
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return linuxDefault
	}
	low, err := strconv.Atoi(strings.Fields(string(data) + " x")[0])
	if err != nil || low <= floor+1000 {
		return linuxDefault // a range reaching down here leaves no room: use the usual one
	}
	return low
}
