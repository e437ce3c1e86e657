//go:build linux

package main_test

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ingestq/ingestq/internal/natstest"
)

// The sample deploy/ingestq.env, filled in for three hosts and reduced to
// loopback, with serve started as deploy/ingestq.service starts it (every
// setting from the environment): the daemons make one NATS cluster, its
// routes authenticated by the sample's secret file, whose stream each host
// replays whole, and each host's dashboard counts the same finishes. The unit's reload (SIGHUP) leaves a daemon without a token file
// running; its stop (SIGTERM) ends each within the unit's TimeoutStopSec.
func TestDeploySampleMakesOneCluster(t *testing.T) {
	t.Parallel()
	sample := readEnvFile(t, "../../deploy/ingestq.env")
	unit, err := os.ReadFile("../../deploy/ingestq.service")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^TimeoutStopSec=(\d+)$`).FindSubmatch(unit)
	if m == nil {
		t.Fatal("deploy/ingestq.service sets no TimeoutStopSec in seconds")
	}
	stopSec, _ := strconv.Atoi(string(m[1]))

	// The routes' secret, one file for the three hosts as each host has
	// the same.
	if _, ok := sample["INGESTQ_NATS_CLUSTER_SECRET_FILE"]; !ok {
		t.Error("deploy/ingestq.env sets no INGESTQ_NATS_CLUSTER_SECRET_FILE: its cluster's routes are open to whatever reaches the port")
	}
	secret := filepath.Join(t.TempDir(), "cluster-secret")
	if err := os.WriteFile(secret, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := newClusterRig(t)
	names := []string{"d1", "d2", "d3"}
	for _, name := range names {
		env := maps.Clone(sample)
		// Each host's own lines, as an operator fills them in, on loopback.
		env["INGESTQ_ZK"], env["INGESTQ_ZK_ROOT"] = r.zk, r.root
		env["INGESTQ_DATA_DIR"], env["INGESTQ_HTTP"] = t.TempDir(), "127.0.0.1:0"
		delete(env, "INGESTQ_ADVERTISE") // the HTTP port is picked at start
		listen := natstest.FreeAddr(t)
		env["INGESTQ_NATS_LISTEN"] = listen // three hosts on one machine
		if _, ok := env["INGESTQ_NATS_CLUSTER"]; ok {
			env["INGESTQ_NATS_CLUSTER"] = natstest.FreeAddr(t)
		}
		if _, ok := env["INGESTQ_NATS_CLUSTER_SECRET_FILE"]; ok {
			env["INGESTQ_NATS_CLUSTER_SECRET_FILE"] = secret
		}
		// Steps of two hosts or more in every batch (see clusterStates).
		env["INGESTQ_STATES"] = clusterStates[name]
		list := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
		for k, v := range env {
			list = append(list, k+"="+v)
		}
		d := launchDaemon(t, daemonConfig{Host: name, Env: list})
		r.hosts[name] = &clusterHost{daemon: d, url: "nats://" + listen}
	}
	r.waitJoined(names...)
	r.waitStream("d1", 3, "")

	r.hosts["d1"].signal(syscall.SIGHUP)
	r.hosts["d1"].waitLog(10*time.Second, "SIGHUP: nothing reloaded")

	bid, jids := r.batch()
	r.assertEveryTimeline(map[string][]string{bid: jids}, r.listeners(names...))
	r.assertHostAddresses(names...)
	r.waitFinished(fmt.Sprintf("%d completed, 0 failed.", clusterJobs), names...)
	for _, name := range names {
		r.hosts[name].stop(time.Duration(stopSec) * time.Second)
	}
}

// readEnvFile reads an environment file as systemd's EnvironmentFile does:
// KEY=VALUE lines, # comments, no shell expansion, a value's enclosing
// quotes removed.
func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: %q is no KEY=VALUE line", path, line)
		}
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		env[strings.TrimSpace(k)] = v
	}
	return env
}
