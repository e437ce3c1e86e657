// Package natstest runs real nats-servers for tests, in the test's
// process: one with the options a test gives (Run), or a NATS cluster of
// JetStream servers, as an existing NATS deployment that daemons join
// with --nats would be (Cluster).
package natstest

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ingestq/ingestq/internal/freeport"
	"github.com/ingestq/ingestq/internal/logtest"
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

// Run runs a nats-server with opts, stopped when the test ends. If it is not
// ready, the test fails saying why: what the server logged while starting
// (a listener's error, say), and where its start is stuck.
func Run(t testing.TB, opts *server.Options) *server.Server {
	t.Helper()
	what := strings.TrimSpace("nats-server " + opts.ServerName)
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	log := newStartLog()
	ns.SetLoggerV2(log, false, false, false)
	go ns.Start()
	if err := waitReady(ns, log); err != nil {
		ns.Shutdown()
		t.Fatalf("%s %v; it logged:\n%s", what, err, log.lines.String())
	}
	ns.SetLoggerV2(nil, false, false, false) // started: the test's own logger, if any, from here
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns
}

// readyTimeout bounds a server's start (a few milliseconds; more under
// -race and a loaded machine).
const readyTimeout = 30 * time.Second

// waitReady waits until ns listens, or it gives up starting (a fatal error:
// a port taken, a store it cannot open), or readyTimeout has passed; then
// it says where Start is stuck.
func waitReady(ns *server.Server, log *startLog) error {
	deadline := time.Now().Add(readyTimeout)
	for !ns.ReadyForConnections(100 * time.Millisecond) {
		select {
		case msg := <-log.fatal:
			return fmt.Errorf("failed to start: %s", msg)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v; its start is at:\n%s", readyTimeout, startStacks())
		}
	}
	return nil
}

// startStacks are the stacks of the goroutines in nats-server's Start.
func startStacks() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "/server.(*Server).Start(") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// startLog keeps what a starting nats-server logs (no debug or trace), each
// line with the time since its start, and hands a fatal error, after which
// it will not become ready, to fatal.
type startLog struct {
	start time.Time
	fatal chan string
	lines logtest.Buffer
}

func newStartLog() *startLog {
	return &startLog{start: time.Now(), fatal: make(chan string, 1)}
}

func (l *startLog) add(level, format string, v []any) string {
	msg := fmt.Sprintf(format, v...)
	fmt.Fprintf(&l.lines, "%8.3fs [%s] %s\n", time.Since(l.start).Seconds(), level, msg)
	return msg
}

func (l *startLog) Noticef(format string, v ...any) { l.add("INF", format, v) }
func (l *startLog) Warnf(format string, v ...any)   { l.add("WRN", format, v) }
func (l *startLog) Errorf(format string, v ...any)  { l.add("ERR", format, v) }
func (l *startLog) Debugf(format string, v ...any)  {}
func (l *startLog) Tracef(format string, v ...any)  {}

func (l *startLog) Fatalf(format string, v ...any) {
	msg := l.add("FTL", format, v)
	select {
	case l.fatal <- msg:
	default:
	}
}

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
