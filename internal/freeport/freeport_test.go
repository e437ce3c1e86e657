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
