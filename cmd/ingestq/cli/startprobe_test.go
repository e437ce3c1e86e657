package cli_test

import (
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/internal/health"
	"github.com/ingestq/ingestq/internal/promtest"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// A daemon restarted under the --host of one killed just now waits for the
// dead one's host node to go, its HTTP server already up: a Prometheus
// scrape and a readiness probe meanwhile are answered (/readyz 503, its
// nats check saying the daemon is starting; /metrics without the event
// stream's numbers), where both read the bus's connection, none yet, and
// ended the daemon on a nil pointer. Once the name is free it is ready.
func TestProbesWhileServeWaitsForItsHostName(t *testing.T) {
	t.Parallel()
	addr, root := zktest.Shared(t).Addr, zktest.Root(t)
	wantCode(t, serve(t, addr, root, "--host", "vm", "--pipeline", "passthrough").stop(), 0) // the queue made
	held := zktest.Connect(t)
	node := root + "/ingestq/hosts/vm"
	if _, err := held.Create(node, []byte(`{}`), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}

	web := zktest.ClosedAddr(t)
	log, _ := serveWaiting(t, addr, root, "--host", "vm", "--http", web, "--zk-session-timeout", "30s")
	log.WaitFor(t, "the name's node is held by another session")

	base := "http://" + web
	code, rep := readyz(t, base)
	if code != http.StatusServiceUnavailable || rep.Ready {
		t.Errorf("/readyz while serve waits for its name: %d %+v, want 503", code, rep)
	}
	if i := slices.IndexFunc(rep.Checks, func(c health.Result) bool { return c.Name == "nats" }); i < 0 ||
		!strings.Contains(rep.Checks[i].Error, "not started yet") {
		t.Errorf("/readyz's checks while serve waits for its name: %+v, want nats not started yet", rep.Checks)
	}
	m := promtest.Scrape(t, base+"/metrics")
	if m["ingestq_zookeeper_connected"] == nil || m["ingestq_nats_connected"] != nil {
		t.Errorf("/metrics while serve waits for its name: %v, want ZooKeeper's numbers and none of NATS's", slices.Sorted(maps.Keys(m)))
	}

	// The API and the dashboard say the daemon is starting, 503, where the
	// server's 404 had audit say "a daemon older than this ingestq?" and
	// object that the inventory lacks the object.
	for _, args := range [][]string{{"audit"}, {"object", "ark:/99999/fk40000017"}} {
		_, stderr, code := runEnv(t, nil, slices.Concat([]string{"--api", base + "/api/v1"}, args)...)
		if code != 1 || !strings.Contains(stderr, "the daemon is starting") || strings.Contains(stderr, "older than this ingestq") || strings.Contains(stderr, "no object") {
			t.Errorf("ingestq %s while serve waits for its name: exit %d, %q; want 1, saying the daemon is starting", args[0], code, stderr)
		}
	}
	for _, path := range []string{"/ui/", "/"} { // the daemon's address, as a browser is given it, goes to /ui/
		if resp, err := http.Get(base + path); err != nil {
			t.Error(err)
		} else if resp.Body.Close(); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s while serve waits for its name: %s, Retry-After %q; want 503 with Retry-After", path, resp.Status, resp.Header.Get("Retry-After"))
		}
	}

	if err := held.Delete(node, -1); err != nil {
		t.Fatal(err)
	}
	log.WaitFor(t, "reactor: running")
	waitReady(t, base, http.StatusOK)
	if resp, err := http.Get(base + "/api/v1/hosts"); err != nil {
		t.Error(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /api/v1/hosts once serve runs: %s, want 200", resp.Status)
	}
	if up := promtest.Scrape(t, base+"/metrics").Values("ingestq_nats_connected"); up[""] != 1 {
		t.Errorf("ingestq_nats_connected once serve runs: %v, want 1", up)
	}
}
