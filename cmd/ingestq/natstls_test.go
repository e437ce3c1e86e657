//go:build linux

package main_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/internal/tlstest"
)

// A cluster of daemons without route TLS is given it as the README says:
// the queue held, every host restarted with --nats-cluster-tls-* one after
// another (SIGTERM, then serve again on the same data folder and
// addresses), the queue released once every host has joined. A host with
// TLS and one without cannot route, so the hosts given TLS first and those
// given it last are apart meanwhile; held, no step publishes an event
// then. A batch submitted before the hold and one after the release
// complete, every timeline is whole in the one stream through every
// listener, no event is lost, and each host that refused a plain route
// said so once.
func TestNATSClusterGivenTLSHostByHost(t *testing.T) {
	t.Parallel()
	start := time.Now()
	ca := tlstest.NewAuthority(t)
	r := newClusterRig(t)
	all := []string{"d1", "d2", "d3"}
	r.start(all...)
	r.waitStream("d1", 3, "")
	bids := []string{createBatch(t, r.q, clusterJobs)}
	if out, err := r.cli("hold", "queue"); err != nil {
		t.Fatalf("hold queue: %v: %s", err, out)
	}
	poll(t, 60*time.Second, "no job in any host's hands", func() (bool, string, error) {
		var inHand []string
		for _, h := range r.hostInfos() {
			if h.JobsInHand > 0 {
				inHand = append(inHand, fmt.Sprintf("%s: %d", h.Name, h.JobsInHand))
			}
		}
		return len(inHand) == 0, strings.Join(inHand, ", "), nil
	})
	for _, name := range all {
		cert, key := ca.Peer(t, name, "127.0.0.1")
		r.relaunch(name, "--nats-cluster-tls-cert", cert, "--nats-cluster-tls-key", key, "--nats-cluster-tls-ca", ca.CAFile)
		t.Logf("%s restarted with TLS after %v", name, time.Since(start).Round(time.Millisecond))
	}
	r.waitJoined(all...)
	t.Logf("every host joined after %v", time.Since(start).Round(time.Millisecond))
	if out, err := r.cli("release", "queue"); err != nil {
		t.Fatalf("release queue: %v: %s", err, out)
	}
	bids = append(bids, createBatch(t, r.q, clusterJobs))
	batches := r.finish(bids, clusterJobs)
	r.waitEventsTaken(all...)
	r.assertEveryTimeline(batches, r.listeners(all...))
	const plain = "failed its TLS handshake: the other server has no TLS on its routes"
	for name, want := range map[string]int{"d1": 1, "d2": 1, "d3": 0} { // d3 came last, among hosts with TLS
		if lines := r.hosts[name].logLines(plain); len(lines) != want || want > 0 && !strings.Contains(lines[0], "WRN") {
			t.Errorf("%s said %d times %q: %q; want %d warning", name, len(lines), plain, lines, want)
		}
	}
	for _, name := range all {
		r.hosts[name].stop(30 * time.Second)
		r.hosts[name].assertNoLoss()
	}
	t.Logf("TLS given host by host in %v", time.Since(start).Round(time.Millisecond))
}
