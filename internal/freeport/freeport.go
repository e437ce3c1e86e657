// Package freeport finds loopback TCP ports for the servers a test or the
// demo starts (ZooKeeper, NATS, PostgreSQL, versitygw, a daemon's
// listeners). A port
// the kernel hands out for listening on port 0 comes from its ephemeral
// range, which outgoing connections draw from too: between the test picking
// it and the server binding it, any connection of the busy test machine
// (a client of another test's server) could take it, and the server then
// fails with "address already in use". These ports come from below that
// range instead, where only listeners that ask for one by number go, and a
// port is not handed out twice by one process.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// floor is the lowest port handed out: above the well-known and the
// commonly configured ports (a developer's own services on 8080, 9000 …).
const floor = 15000

// tries bounds the ports tried before giving up.
const tries = 200

var (
	mu    sync.Mutex
	given = map[int]bool{}
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
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // taken
		}
		l.Close()
		given[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("freeport: no free port in %d tries between %d and %d", tries, floor, top)
}

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
