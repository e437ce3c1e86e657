package cli_test

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/cmd/ingestq/cli"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// The README's ZooKeeper paths of ingestq's own nodes are where serve puts
// them. Under the root it suggests (INGESTQ_ZK_ROOT), it gives each in
// full, as ZooKeeper has it (its root example doubled up with ingestq's
// folder, /ingestq/ingestq/…, where it said /ingestq/routes/<host> and
// /ingestq/profiles/<name> only); and each path it gives under the root
// is that node below the root. serve runs here under that very root, below
// the test's own.
func TestREADMESaysWhereTheNodesAre(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	m := regexp.MustCompile(`(?m)^export INGESTQ_ZK_ROOT=(/\S+)`).FindStringSubmatch(readme)
	if m == nil {
		t.Fatal("the README suggests no INGESTQ_ZK_ROOT")
	}
	root := m[1]
	// The paths it gives of ingestq's own nodes, with a placeholder for the
	// host or the profile.
	var full, under []string
	for _, p := range regexp.MustCompile("`(/[a-z/]*/ingestq/(?:hosts|routes|profiles)/<[a-z]+>)`").FindAllStringSubmatch(readme, -1) {
		path := p[1]
		if rest, ok := strings.CutPrefix(path, root+"/ingestq/"); ok && strings.Count(rest, "/") == 1 {
			full = append(full, path)
		} else {
			under = append(under, path)
		}
	}
	for _, folder := range []string{"hosts", "routes", "profiles"} {
		if !strings.Contains(strings.Join(full, " "), root+"/ingestq/"+folder+"/") {
			t.Errorf("the README does not say where %s are under --zk-root %s (%s/ingestq/%s/…); it gives %q", folder, root, root, folder, full)
		}
	}

	base := zktest.Root(t) // stands for ZooKeeper's /
	const host = "readme-host"
	log := &logtest.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan int, 1)
	go func() {
		exited <- cli.Run(ctx, []string{"--zk", zktest.Shared(t).Addr, "--zk-root", base + root, "serve", "--host", host,
			"--data-dir", t.TempDir(), "--http", "off",
			"--nats-listen", closedAddr(t), "--nats-cluster", closedAddr(t)}, log, log, func(string) string { return "" })
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-exited; code != 0 {
			t.Errorf("serve exited %d; its log:\n%s", code, log.String())
		}
	})
	log.WaitFor(t, "reactor: running")
	conn := zktest.Connect(t)
	node := func(path string) string {
		return strings.NewReplacer("<host>", host, "<name>", "demo").Replace(path)
	}
	for _, p := range full {
		waitForNode(t, conn, base+node(p))
	}
	for _, p := range under {
		waitForNode(t, conn, base+root+node(p))
	}
}

// waitForNode fails the test unless path is a node, or becomes one soon.
func waitForNode(t *testing.T, conn *zk.Conn, path string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		ok, _, ch, err := conn.ExistsW(path)
		if err != nil {
			t.Fatalf("exists %s: %v", path, err)
		}
		if ok {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Errorf("no node %s", path)
			return
		}
	}
}
