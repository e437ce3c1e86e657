package main_test

import (
	"encoding/json"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/reactor"
)

// Each `ingestq serve` on a queue registers itself in an ephemeral host
// node that `ingestq hosts` lists; a second daemon with a live one's name is
// refused; a killed daemon leaves the list once its session has ended.
func TestHostsListed(t *testing.T) {
	t.Parallel()
	url, zkAddr, root, q, _ := sharedQueue(t)
	extra := []string{"--zk-session-timeout", "4s"}
	// a assembles packages (the ingest pipeline's access queues); b, pass-through, does not.
	startDaemon(t, daemonConfig{Host: "a", ZK: zkAddr, Root: root, NATS: url, Ingest: true,
		Extra: append(extra, "--access-small-workers", "3", "--access-large-workers", "1")})
	b := startDaemon(t, daemonConfig{Host: "b", ZK: zkAddr, Root: root, NATS: url, Extra: extra})
	names := func() ([]string, error) {
		hosts, err := q.Hosts(t.Context())
		var out []string
		for _, h := range hosts {
			out = append(out, h.Name)
		}
		return out, err
	}
	poll(t, 30*time.Second, "hosts a and b", func() (bool, string, error) {
		got, err := names()
		return slices.Equal(got, []string{"a", "b"}), strings.Join(got, ","), err
	})

	out, err := exec.Command(ingestqBin, "--zk", zkAddr, "--zk-root", root, "hosts", "-o", "json").Output()
	if err != nil {
		t.Fatalf("ingestq hosts -o json: %v", err)
	}
	var hosts []reactor.HostInfo
	if err := json.Unmarshal(out, &hosts); err != nil || len(hosts) != 2 {
		t.Fatalf("ingestq hosts -o json: %v\n%s", err, out)
	}
	for _, h := range hosts {
		if h.Version == "" || h.PID == 0 || len(h.States) != len(reactor.AllRoles()) || h.Workers["Downloading"] == 0 ||
			h.Since.IsZero() || time.Since(h.Since) > time.Minute {
			t.Errorf("host %+v lacks a version, pid, its states, workers or since", h)
		}
		if h.Seen.Before(h.Since) || time.Since(h.Seen) > 2*reactor.HostRewrite {
			t.Errorf("host %s: seen %v, since %v; want seen (its node's last write) after since, within %v", h.Name, h.Seen, h.Since, 2*reactor.HostRewrite)
		}
		if !strings.HasPrefix(h.HTTP, "http://127.0.0.1:") || h.NATSRoute != "" {
			t.Errorf("host %s: http %q, nats_route %q; want its HTTP URL, and no route (not clustered)", h.Name, h.HTTP, h.NATSRoute)
		}
		want := map[string]map[string]int{"a": {"small": 3, "large": 1}, "b": nil}[h.Name]
		if !maps.Equal(h.AccessWorkers, want) {
			t.Errorf("host %s: access workers %v, want %v", h.Name, h.AccessWorkers, want)
		}
	}
	text, err := exec.Command(ingestqBin, "--zk", zkAddr, "--zk-root", root, "hosts").Output()
	if err != nil || !strings.Contains(string(text), "SEEN") || !strings.Contains(string(text), "s ago") || !strings.Contains(string(text), "\nb ") ||
		!strings.Contains(string(text), "for batches, access 3 small, 1 large") {
		t.Errorf("ingestq hosts: %v\n%s", err, text)
	}

	// It waits (twice its session timeout) for the name's node to go, as
	// for a daemon killed just now, then refuses the live one's name.
	dup := exec.Command(ingestqBin, "serve", "--zk", zkAddr, "--zk-root", root, "--data-dir", t.TempDir(),
		"--pipeline", "passthrough", "--host", "a", "--nats", url, "--http", "off", "--zk-session-timeout", "2s")
	msg, err := dup.CombinedOutput()
	if code := dup.ProcessState.ExitCode(); code != 1 || !strings.Contains(string(msg), "host name a is in use by another live daemon") ||
		!strings.Contains(string(msg), "still there after 4s") {
		t.Errorf("a second daemon named a: exit %d (%v), want 1 naming the live one:\n%s", code, err, tail(string(msg), 10))
	}

	b.kill()
	poll(t, 30*time.Second, "host b to leave the list after its session", func() (bool, string, error) {
		got, err := names()
		return slices.Equal(got, []string{"a"}), strings.Join(got, ","), err
	})
}
