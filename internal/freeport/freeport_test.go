package freeport

import (
	"net"
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
