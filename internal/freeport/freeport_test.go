package freeport

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// The ports are distinct, below the ephemeral range, and free: a listener
// can take each.
func TestPortsAreDistinctFreeAndBelowTheEphemeralRange(t *testing.T) {
	ports, err := Ports(50)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] || p < floor || p >= ephemeralLow() {
			t.Fatalf("port %d: repeated, or outside [%d, %d)", p, floor, ephemeralLow())
		}
		seen[p] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		l.Close()
	}
}

// A port handed out stays reserved while nothing listens on it (a test's
// server stopped, to be started again on it): a check that it is free
// succeeds, another reservation of it (another process's: the lock is a
// file's, and a second open of the file is refused as another process's
// would be) does not. Before, only a bind checked a port, so two
// processes (two packages' tests) could hand out one port, and a server
// started again on it failed with "address already in use"
// (TestReplayWaitsOutAClusterReforming in CI).
func TestPortsStayReservedWhileNotListenedOn(t *testing.T) {
	ports, err := Ports(20)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ports {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d, handed out and not listened on: %v", p, err)
		}
		l.Close()
		if lock, ok := reserve(p); ok {
			lock.Close()
			t.Errorf("port %d, handed out, reserved again", p)
		}
	}
}

// A link planted where the locks go (the directory, or a port's file in
// it: another user's, in a shared temporary directory) is not followed:
// the port is only checked free, and nothing is made where the link
// points. Before, the locks were in one directory for all users, made and
// opened (O_CREATE) through any link: another user could have a test
// process make a file it names.
func TestReservationsFollowNoLink(t *testing.T) {
	tmp, victim := t.TempDir(), t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dir := filepath.Join(tmp, "ingestq-freeport-"+strconv.Itoa(os.Getuid()))
	const p = floor + 7
	planted := filepath.Join(victim, "made")

	if err := os.Symlink(victim, dir); err != nil {
		t.Fatal(err)
	}
	if lock, ok := reserve(p); !ok {
		t.Error("the lock directory a link: the port refused, want only checked free")
	} else {
		lock.Close()
	}
	if made, _ := os.ReadDir(victim); len(made) != 0 {
		t.Errorf("the lock directory a link: %s made in the folder it points to", made[0].Name())
	}

	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(planted, filepath.Join(dir, strconv.Itoa(p))); err != nil {
		t.Fatal(err)
	}
	if lock, ok := reserve(p); !ok {
		t.Error("a port's lock file a link: the port refused, want only checked free")
	} else {
		lock.Close()
	}
	if _, err := os.Lstat(planted); err == nil {
		t.Error("a port's lock file a link: the file it names made")
	}
}

// A lock directory others may write in is not used (they could plant a
// port's lock file, or hold it).
func TestReservationsNeedADirectoryOfTheUsersAlone(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dir := filepath.Join(tmp, "ingestq-freeport-"+strconv.Itoa(os.Getuid()))
	if got, ok := lockDir(); !ok || got != dir {
		t.Fatalf("lockDir() = %q, %v; want %q, true", got, ok, dir)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the lock directory: %v, %v; want mode 0700", fi, err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, ok := lockDir(); ok {
		t.Error("a lock directory anyone may write in: used")
	}
}
