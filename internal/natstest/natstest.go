// Package natstest runs real nats-servers for tests, in the test's
// process: one with the options a test gives (Run), or a NATS cluster of
// JetStream servers, as an existing NATS deployment that daemons join
// with --nats would be (Cluster).
package natstest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ingestq/ingestq/internal/freeport"
)

// FreeAddr is a 127.0.0.1 address whose port was free a moment ago, for a
// listener whose address must be known before it starts.
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// Cluster runs n JetStream servers routed to each other, named ext-0 … and
// stopped when the test ends, and returns their client URLs.
func Cluster(t testing.TB, n int) []string {
	t.Helper()
	urls := make([]string, n)
	for i, opts := range ClusterOptions(t, n) {
		urls[i] = Run(t, opts).ClientURL()
	}
	waitJetStream(t, urls[0])
	return urls
}

// ClusterOptions are the options of Cluster's n servers, for a test that
// stops some and runs them again (Run, with the same options: the same
// name, routes and store).
func ClusterOptions(t testing.TB, n int) []*server.Options {
	t.Helper()
	addrs := make([]string, n)
	routes := make([]string, n)
	for i := range n {
		addrs[i] = FreeAddr(t)
		routes[i] = "nats://" + addrs[i]
	}
	opts := make([]*server.Options, n)
	for i, addr := range addrs {
		host, p, _ := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(p)
		opts[i] = &server.Options{ServerName: fmt.Sprintf("ext-%d", i), Host: "127.0.0.1",
			Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true,
			Cluster: server.ClusterOpts{Name: "ext", Host: host, Port: port},
			Routes:  server.RoutesFromStr(strings.Join(routes, ","))}
	}
	return opts
}

// Run runs a nats-server with opts, stopped when the test ends.
func Run(t testing.TB, opts *server.Options) *server.Server {
	t.Helper()
	what := strings.TrimSpace("nats-server " + opts.ServerName)
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(readyTimeout) {
		ns.Shutdown()
		t.Fatalf("%s not ready after %v", what, readyTimeout)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns
}

// readyTimeout bounds a server's start (a few milliseconds; more under
// -race and a loaded machine).
const readyTimeout = 30 * time.Second

// waitJetStream waits until the cluster's JetStream answers (it has elected
// a meta leader: 0.1 s to 9 s), so that a daemon joining it can make its
// stream at once.
func waitJetStream(t testing.TB, url string) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := js.AccountInfo(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("natstest: the cluster's JetStream did not answer within 60s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Requests signals on the channel it returns each message that a client of
// the NATS at url sends to subject (a JetStream API request, say), so that
// a test waits for the request rather than for a time. Signals past 8
// unread are dropped.
func Requests(t testing.TB, url, subject string) <-chan struct{} {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	seen := make(chan struct{}, 8)
	if _, err := nc.Subscribe(subject, func(*nats.Msg) {
		select {
		case seen <- struct{}{}:
		default:
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil { // the server has the subscription
		t.Fatal(err)
	}
	return seen
}
