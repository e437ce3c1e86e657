//go:build linux

package main_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/ingestq/ingestq/internal/natstest"
)

// A cluster of daemons without a secret is given one by a rolling restart,
// one host at a time (SIGTERM, then serve again on the same data folder
// and addresses, with --nats-cluster-secret-file), a batch submitted just
// before each restart and one after: every batch completes, every
// timeline is whole in the one stream, no event is lost. A restarted host
// dials the others, which ask no secret, and they take its route; it
// refuses theirs, and NATS needs only one route a pair. The secret is in
// no log, and a nats-server routed at a member with a wrong one is refused
// and said so.
func TestNATSClusterGivenASecretHostByHost(t *testing.T) {
	t.Parallel()
	start := time.Now()
	secret := filepath.Join(t.TempDir(), "cluster-secret")
	const value = "0123456789abcdef-the-rig-s-cluster-secret"
	if err := os.WriteFile(secret, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := newClusterRig(t)
	all := []string{"d1", "d2", "d3"}
	r.start(all...)
	r.waitStream("d1", 3, "")
	var bids []string
	for _, name := range all {
		r.waitEventsTaken(all...)
		bids = append(bids, createBatch(t, r.q, clusterJobs)) // runs while name restarts
		r.restart(name, "--nats-cluster-secret-file", secret)
		t.Logf("%s has the secret after %v", name, time.Since(start).Round(time.Millisecond))
	}
	bids = append(bids, createBatch(t, r.q, clusterJobs))
	batches := r.finish(bids, clusterJobs)
	r.waitEventsTaken(all...)
	r.assertEveryTimeline(batches, r.listeners(all...))

	rogue := natstest.Run(t, &server.Options{ServerName: "rogue", Host: "127.0.0.1", Port: server.RANDOM_PORT,
		Cluster: server.ClusterOpts{Name: "rogue", Host: "127.0.0.1", Port: server.RANDOM_PORT},
		Routes:  server.RoutesFromStr("nats://ingestq-route:a-guess-at-the-secret@" + r.hosts["d1"].cluster)})
	r.hosts["d1"].waitLog(30*time.Second, "events: refused a NATS route from another server: it presented another cluster secret")
	if n := rogue.NumRoutes(); n != 0 {
		t.Errorf("a nats-server with a wrong secret has %d routes into the cluster, want none", n)
	}
	for _, name := range all {
		r.hosts[name].stop(30 * time.Second)
		r.hosts[name].assertNoLoss()
		if lines := r.hosts[name].logLines(value); len(lines) > 0 {
			t.Errorf("%s logged the cluster secret: %s", name, lines[0])
		}
	}
	t.Logf("secret given host by host in %v", time.Since(start).Round(time.Millisecond))
}
