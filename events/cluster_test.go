package events

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ingestq/ingestq/internal/natstest"
)

// member is one daemon's bus in a test's NATS cluster.
type member struct {
	*Bus
	route string // its route URL, as its daemon announces it
}

// openMember opens host's bus with a cluster listener, routed at start to
// the given members (none: alone), and a client listener for the CLI.
func openMember(t testing.TB, host string, peers ...*member) *member {
	t.Helper()
	return openMemberWith(t, host, func(*Config) {}, peers...)
}

// openMemberWith is openMember with set changing its Config.
func openMemberWith(t testing.TB, host string, set func(*Config), peers ...*member) *member {
	t.Helper()
	cluster := natstest.FreeAddr(t)
	route, err := RouteURL(cluster)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cfg := Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Host: host, Logger: memberLogger(t, host),
		Cluster: cluster, Routes: routesOf(peers), ClusterName: "test"}
	set(&cfg)
	bus, err := Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open %s: %v", host, err)
	}
	t.Cleanup(func() { start := time.Now(); _ = bus.Close(); t.Logf("%s closed in %v", host, time.Since(start)) })
	return &member{Bus: bus, route: route}
}

// memberLogger logs to the test's log at info (INGESTQ_TEST_NATS_DEBUG=1:
// debug, with the servers' own lines).
func memberLogger(t testing.TB, host string) *slog.Logger {
	level := slog.LevelInfo
	if os.Getenv("INGESTQ_TEST_NATS_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: level})).With("member", host)
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// openCluster opens members one after the other, each routed to those
// before, which are then told of it, and waits until every one of them has
// settled in the cluster.
func openCluster(t testing.TB, hosts ...string) []*member {
	t.Helper()
	return openClusterWith(t, func(*Config) {}, hosts...)
}

// openClusterWith is openCluster with set changing each member's Config.
func openClusterWith(t testing.TB, set func(*Config), hosts ...string) []*member {
	t.Helper()
	var ms []*member
	for _, host := range hosts {
		m := openMemberWith(t, host, set, ms...)
		for _, before := range ms {
			before.SetRoutes(append(routesOf(others(ms, before)), m.route))
		}
		ms = append(ms, m)
	}
	for _, m := range ms {
		flush(t, m.Bus)
	}
	return ms
}

// others is ms without m.
func others(ms []*member, m *member) []*member {
	var out []*member
	for _, o := range ms {
		if o != m {
			out = append(out, o)
		}
	}
	return out
}

func routesOf(ms []*member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.route)
	}
	return out
}

// publishN publishes n job events of batch bid from m and waits for their
// acknowledgement.
func publishN(t testing.TB, m *member, bid string, n int) {
	t.Helper()
	for i := range n {
		m.Publish(Event{Kind: KindJob, BatchID: bid, JobID: bid + "-" + string(rune('a'+i)), To: "Pending"})
	}
	flush(t, m.Bus)
	if s := m.Stats(); s.Lost != 0 {
		t.Fatalf("%s lost events: %+v", m.cfg.Host, s)
	}
}

// hostsSeen replays the whole stream through a client of m's listener and
// counts the events of each publishing host.
func hostsSeen(t testing.TB, m *member) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for _, e := range replay(t, connect(t, m.ClientURL()), Filter{}) {
		seen[e.Host]++
	}
	return seen
}

// streamInfo reads the stream's state through m's listener, asking again
// while the cluster drops requests (it does during an election).
func streamInfo(t testing.TB, m *member) *jetstream.StreamInfo {
	t.Helper()
	js, err := jetstream.New(connect(t, m.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	var info *jetstream.StreamInfo
	waitFor(t, "stream info via "+m.cfg.Host, func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		s, err := js.Stream(ctx, DefaultStream)
		if err == nil {
			info = s.CachedInfo()
		}
		return err == nil
	})
	return info
}

// waitThreeCurrent waits until the stream has three replicas, each current
// (a replica still catching up cannot take over), asking through m.
func waitThreeCurrent(t testing.TB, m *member) {
	t.Helper()
	waitFor(t, "three current replicas", func() bool {
		info := streamInfo(t, m)
		return info.Config.Replicas == 3 && info.Cluster != nil && len(info.Cluster.Replicas) == 2 &&
			info.Cluster.Replicas[0].Current && info.Cluster.Replicas[1].Current
	})
}

func wantSeen(t testing.TB, m *member, want map[string]int) {
	t.Helper()
	if got := hostsSeen(t, m); !maps.Equal(got, want) {
		t.Errorf("replay through %s's listener: events per host %v, want %v", m.cfg.Host, got, want)
	}
}

// A daemon alone records alone; when a second appears both are one
// cluster, and what the first recorded alone is in the one stream; a third
// joins later and the stream gets three replicas. Every listener replays
// every host's events.
func TestClusterGrowsFromOne(t *testing.T) {
	t.Parallel()
	a := openMember(t, "a")
	publishN(t, a, "bid-1", 5)
	wantSeen(t, a, map[string]int{"a": 5})

	b := openMember(t, "b", a) // a does not listen for routes yet: b waits for it
	a.SetRoutes([]string{b.route})
	flush(t, a.Bus) // after the join and the move of what a recorded alone
	publishN(t, b, "bid-1", 4)
	for _, m := range []*member{a, b} {
		wantSeen(t, m, map[string]int{"a": 5, "b": 4})
	}
	if r := streamInfo(t, b).Config.Replicas; r != 1 {
		t.Errorf("two servers: stream has %d replicas, want 1", r)
	}

	c := openMember(t, "c", a, b)
	a.SetRoutes([]string{b.route, c.route})
	b.SetRoutes([]string{a.route, c.route})
	for _, m := range []*member{a, b} {
		flush(t, m.Bus)
	}
	publishN(t, c, "bid-2", 3)
	for _, m := range []*member{a, b, c} {
		wantSeen(t, m, map[string]int{"a": 5, "b": 4, "c": 3})
	}
	info := streamInfo(t, c)
	if info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Errorf("three servers: stream config %d replicas, cluster %+v; want 3 replicas", info.Config.Replicas, info.Cluster)
	}
}

// Two daemons that start at the same instant each find no other, run
// alone, and each record; told of each other, they end up in one cluster
// with both their events in one stream.
func TestClusterTwoStartAlone(t *testing.T) {
	t.Parallel()
	a, b := openMember(t, "a"), openMember(t, "b")
	publishN(t, a, "bid-a", 3)
	publishN(t, b, "bid-b", 2)

	var wg sync.WaitGroup
	for _, pair := range [][2]*member{{a, b}, {b, a}} {
		wg.Go(func() {
			pair[0].SetRoutes([]string{pair[1].route})
			flush(t, pair[0].Bus)
		})
	}
	wg.Wait()
	for _, m := range []*member{a, b} {
		wantSeen(t, m, map[string]int{"a": 3, "b": 2})
	}
}

// In a cluster of three with three replicas, one daemon's server going
// leaves a stream the other two still write to and replay.
func TestClusterLosesOneOfThree(t *testing.T) {
	t.Parallel()
	ms := openCluster(t, "a", "b", "c")
	a, b, c := ms[0], ms[1], ms[2]
	for _, m := range ms {
		publishN(t, m, "bid-1", 2)
	}
	// A replica still catching up cannot take over: wait, as a daemon's
	// cluster that has run a while would have.
	waitThreeCurrent(t, a)

	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	a.SetRoutes([]string{b.route}) // c's node is gone from ZooKeeper
	b.SetRoutes([]string{a.route})
	// Events published while the stream elects a leader in c's place
	// may be lost (docs/decisions.md): wait for the election.
	waitFor(t, "a stream leader on a or b", func() bool {
		c := streamInfo(t, a).Cluster
		return c != nil && c.Leader != "" && c.Leader != serverName("c")
	})
	publishN(t, a, "bid-2", 2)
	publishN(t, b, "bid-2", 2)
	for _, m := range []*member{a, b} {
		wantSeen(t, m, map[string]int{"a": 4, "b": 4, "c": 2})
	}
	if r := streamInfo(t, b).Config.Replicas; r != 3 {
		t.Errorf("after c left the stream has %d replicas, want 3 kept", r)
	}
}

// A daemon left alone by the others leaves their cluster and records alone
// again; they come back, and what it recorded alone joins the one stream.
func TestClusterLeftAloneAndRejoined(t *testing.T) {
	t.Parallel()
	ms := openCluster(t, "a", "b")
	a, b := ms[0], ms[1]
	publishN(t, a, "bid-1", 1)
	publishN(t, b, "bid-1", 1)

	b.SetRoutes(nil) // a's node went: b runs alone
	publishN(t, b, "bid-2", 3)
	wantSeen(t, b, map[string]int{"b": 3})

	b.SetRoutes([]string{a.route})
	flush(t, b.Bus)
	for _, m := range []*member{a, b} {
		wantSeen(t, m, map[string]int{"a": 1, "b": 4})
	}
}

// A daemon that joins and goes within a moment (one that fails to start
// after its server joined) holds the others' events up no longer than it
// takes them to hear it went: the reconfiguration it started gives way to
// the next. Before, they waited the whole patience (here ten minutes, by
// default 30 s) for a stream that was to have a replica on it.
func TestClusterMemberGoneAtOnceHoldsNothingUp(t *testing.T) {
	t.Parallel()
	patient := func(c *Config) { c.settleWait = 10 * time.Minute }
	a := openMemberWith(t, "a", patient)
	b := openMemberWith(t, "b", patient, a)
	a.SetRoutes([]string{b.route})
	publishN(t, a, "bid-1", 1)
	publishN(t, b, "bid-1", 1)

	c := openMember(t, "c", a, b)
	a.SetRoutes([]string{b.route, c.route})
	b.SetRoutes([]string{a.route, c.route})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	a.SetRoutes([]string{b.route}) // c's node went with its session
	b.SetRoutes([]string{a.route})
	publishN(t, a, "bid-2", 2) // fails on Flush's 45 s deadline if they wait
	publishN(t, b, "bid-2", 2)
	for _, m := range []*member{a, b} {
		wantSeen(t, m, map[string]int{"a": 3, "b": 3})
	}
}

// Events published while the stream cannot take them (two of its three
// servers down, as during the election after its leader's host died) are
// sent again until a leader takes them, within a minute: none is lost, and
// none is recorded twice. Before, each was counted lost after its ack
// timeout and never recorded.
func TestClusterEventsWaitOutAnElection(t *testing.T) {
	t.Parallel()
	quick := func(c *Config) { c.ackTimeout = time.Second }
	a := openMemberWith(t, "a", quick)
	b := openMemberWith(t, "b", quick, a)
	a.SetRoutes([]string{b.route})
	c := openMemberWith(t, "c", quick, a, b)
	a.SetRoutes([]string{b.route, c.route})
	b.SetRoutes([]string{a.route, c.route})
	publishN(t, a, "bid-1", 2)
	waitThreeCurrent(t, a)

	bDir := b.cfg.DataDir
	for _, m := range []*member{b, c} {
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// a is told of nothing (their sessions have not ended yet): the stream
	// has one server of three and no leader, and a's publishes time out.
	for i := range 5 {
		a.Publish(Event{Kind: KindJob, BatchID: "bid-2", JobID: fmt.Sprintf("bid-2-%d", i), To: "Pending"})
	}
	deadline := time.Now().Add(testTimeout)
	for a.Stats().Retried == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no event was sent again in %v: %+v", testTimeout, a.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	b2 := openMemberWith(t, "b", func(cfg *Config) { quick(cfg); cfg.DataDir = bDir }, a, c)
	a.SetRoutes([]string{b2.route, c.route})
	flush(t, a.Bus)
	if s := a.Stats(); s.Lost != 0 || s.Published != 7 || s.Waiting != 0 {
		t.Errorf("a's events after the stream had a leader again: %+v, want 7 published, none lost or waiting", s)
	}
	wantSeen(t, a, map[string]int{"a": 7})
}

// A member whose only peer left for good, joined by a new daemon, is in a
// cluster that cannot elect a meta leader (it waits for the peer it
// remembers): past its patience it records into the stream it holds all
// the same, what it recorded alone first.
func TestClusterMemberRemembersGonePeer(t *testing.T) {
	t.Parallel()
	patient := func(c *Config) { c.settleWait = time.Second }
	a := openMemberWith(t, "a", patient)
	b := openMemberWith(t, "b", patient, a)
	a.SetRoutes([]string{b.route})
	flush(t, a.Bus)
	keeper, gone := a, b // the stream's one replica is on keeper
	if streamInfo(t, a).Cluster.Leader == serverName("b") {
		keeper, gone = b, a
	}
	if err := gone.Close(); err != nil {
		t.Fatal(err)
	}
	keeper.SetRoutes(nil) // gone's node went
	publishN(t, keeper, "bid-1", 2)

	c := openMemberWith(t, "c", patient, keeper)
	keeper.SetRoutes([]string{c.route})
	publishN(t, keeper, "bid-2", 3)
	waitFor(t, "the stream to hold the five events", func() bool { return streamInfo(t, keeper).State.Msgs == 5 })
}

// joinedLine is what a member logs once it has joined the cluster.
const joinedLine = "events: embedded NATS server joined the cluster"

// A member routed to a server that is not up yet says it waits, and that
// it joined the cluster only once it has, and its events are then in the
// one stream. Before, "joined the cluster" was logged as soon as it was
// given routes, before any connected.
func TestClusterMemberSaysJoinedOnceItHas(t *testing.T) {
	t.Parallel()
	later := natstest.FreeAddr(t) // a's cluster address: nothing listens there yet
	route, err := RouteURL(later)
	if err != nil {
		t.Fatal(err)
	}
	rec := &logRecorder{}
	b := openMemberWith(t, "b", func(c *Config) { c.Logger = slog.New(rec); c.Routes = []string{route} })
	const routed = "events: embedded NATS server routed to the cluster; events wait until it has joined"
	if n, j := rec.count(slog.LevelInfo, routed), rec.count(slog.LevelInfo, joinedLine); n != 1 || j != 0 {
		t.Errorf("b started, routed to a server not up: %d lines %q and %d %q, want 1 and none", n, routed, j, joinedLine)
	}
	b.Publish(Event{Kind: KindJob, BatchID: "bid-1", JobID: "bid-1-a", To: "Pending"})

	a := openMemberWith(t, "a", func(c *Config) { c.Cluster = later }, b)
	waitFor(t, "b to say it joined the cluster", func() bool { return rec.count(slog.LevelInfo, joinedLine) == 1 })
	flush(t, b.Bus)
	wantSeen(t, a, map[string]int{"b": 1})
}

// A member whose server cannot send events over its routes yet (denied
// here; a new member's route for them can come up after the one
// JetStream's API crosses) keeps its events until the stream takes them,
// and does not say it joined. Before, it settled on the stream's info and
// sent them: they reached only the core subscriber the API keeps on
// ingestq.job.>, so none answered, and each waited out its ack timeout (15
// s) to be sent again; a host that rejoined had events late past its
// batch's end.
func TestClusterEventsWaitUntilTheStreamTakesThem(t *testing.T) {
	t.Parallel()
	ms := openCluster(t, "a", "b")
	rec := &logRecorder{}
	c := openMemberWith(t, "c", func(cfg *Config) {
		cfg.Logger, cfg.ackTimeout = slog.New(rec), time.Second
		cfg.serverOpts = func(o *server.Options) {
			o.Cluster.Permissions = &server.RoutePermissions{Export: &server.SubjectPermission{Deny: []string{SubjectAll}}}
		}
	}, ms...)
	for _, m := range ms {
		m.SetRoutes(append(routesOf(others(ms, m)), c.route))
	}
	if _, err := c.Subscribe("ingestq.job.>", func(Event) {}); err != nil { // as the API's does
		t.Fatal(err)
	}
	var probes atomic.Int32
	if _, err := connect(t, c.ClientURL()).Subscribe("ingestq.probe.>", func(*nats.Msg) { probes.Add(1) }); err != nil {
		t.Fatal(err)
	}
	c.Publish(Event{Kind: KindJob, BatchID: "bid-1", JobID: "bid-1-a", To: "Processing"})
	const resent = "events: the stream did not acknowledge events in time; sending them again (a NATS cluster electing a stream leader?)"
	waitFor(t, "c to ask the stream twice, or to send its event again", func() bool {
		return probes.Load() >= 2 || rec.count(slog.LevelWarn, resent) > 0
	})
	if s, j := c.Stats(), rec.count(slog.LevelInfo, joinedLine); s.Retried != 0 || s.Published != 0 || j != 0 {
		t.Errorf("c, whose events cannot reach the stream: %+v, %d lines saying it joined; want its event kept, unsent, and no such line", s, j)
	}
}

// Signals are a daemon's own: on one cluster each bus hears its own
// signals once, and never another's.
func TestSignalsStayLocal(t *testing.T) {
	t.Parallel()
	ms := openCluster(t, "a", "b")
	a, b := ms[0], ms[1]

	var mu sync.Mutex
	heard := map[string][]string{} // host → data of the signals its subscription heard
	for _, m := range []*member{a, b} {
		u, err := m.SubscribeSignal("watch.>", func(data []byte) {
			mu.Lock()
			defer mu.Unlock()
			heard[m.cfg.Host] = append(heard[m.cfg.Host], string(data))
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(u)
	}
	heardBy := func(host string) []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(heard[host])
	}
	// A request from a's connection answered on b's follows, on the one
	// route, whatever a sent before it: once answered, a signal of a's that
	// b listened to would be in b's hands. Its first answer also shows that
	// b's subscriptions, made before, are known at a's server.
	probe, err := b.Conn().Subscribe("probe.b", func(m *nats.Msg) { _ = m.Respond(nil) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = probe.Unsubscribe() })
	if err := b.Conn().Flush(); err != nil {
		t.Fatal(err)
	}
	ask := func() error { _, err := a.Conn().Request("probe.b", nil, testTimeout); return err }
	waitFor(t, "b's subscriptions known at a's server", func() bool { return ask() == nil })

	a.Signal("watch.job.pending", []byte("from a"))
	if err := ask(); err != nil {
		t.Fatal(err)
	}
	// b's own signal reaches its subscription after anything of a's.
	b.Signal("watch.job.pending", []byte("from b"))
	waitFor(t, "each bus's own signal", func() bool { return len(heardBy("a")) > 0 && len(heardBy("b")) > 0 })
	if got := heardBy("b"); !slices.Equal(got, []string{"from b"}) {
		t.Errorf("b's subscription heard %q, want only its own signal", got)
	}
	if got := heardBy("a"); !slices.Equal(got, []string{"from a"}) {
		t.Errorf("a's subscription heard %q, want only its own signal", got)
	}
	if got, want := SignalSubject("a", "watch.x"), InternalPrefix+"a.watch.x"; got != want {
		t.Errorf("SignalSubject = %s, want %s", got, want)
	}
}

// Daemons joined to an existing NATS cluster, each through another server,
// share the one stream, and keep the replicas its operator gave it.
func TestExternalClusterKeepsReplicas(t *testing.T) {
	t.Parallel()
	urls := natstest.Cluster(t, 3)
	js, err := jetstream.New(connect(t, urls[0]))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the cluster's JetStream to take an R3 stream", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: DefaultStream, Subjects: []string{SubjectAll}, Replicas: 3})
		return err == nil
	})
	var ms []*member
	for i, host := range []string{"a", "b"} {
		ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
		bus, err := Open(ctx, Config{URL: urls[i], Host: host, Logger: memberLogger(t, host)})
		cancel()
		if err != nil {
			t.Fatalf("Open %s: %v", host, err)
		}
		t.Cleanup(func() { _ = bus.Close() })
		ms = append(ms, &member{Bus: bus})
		publishN(t, ms[i], "bid-1", i+1)
	}
	for _, url := range urls {
		seen := map[string]int{}
		for _, e := range replay(t, connect(t, url), Filter{}) {
			seen[e.Host]++
		}
		if want := map[string]int{"a": 1, "b": 2}; !maps.Equal(seen, want) {
			t.Errorf("replay through %s: events per host %v, want %v", url, seen, want)
		}
	}
	if r := streamInfo(t, ms[1]).Config.Replicas; r != 3 {
		t.Errorf("the daemons left the stream with %d replicas, want the operator's 3", r)
	}
}

// A cluster member's listener lets in a client that presents credentials
// (a CLI with --nats-token, or a user and password, for another NATS), as
// a server running alone does, and it replays the stream; the name of the
// system account's user is refused on the listener, whatever the password
// (the daemon's own connection presents a token, no name). The system
// account still answers ForgetHost.
func TestClusterMemberTakesClientsWithCredentials(t *testing.T) {
	t.Parallel()
	ms := openCluster(t, "a", "b")
	publishN(t, ms[0], "bid-1", 2)
	for what, opt := range map[string]nats.Option{"a token": nats.Token("s3cret"), "a user": nats.UserInfo("alice", "pw")} {
		nc, err := nats.Connect(ms[0].ClientURL(), opt)
		if err != nil {
			t.Errorf("a client with %s: %v, want it let in", what, err)
			continue
		}
		t.Cleanup(nc.Close)
		if got := replay(t, nc, Filter{BatchID: "bid-1"}); len(got) != 2 {
			t.Errorf("a client with %s replays %d events, want 2", what, len(got))
		}
	}
	if nc, err := nats.Connect(ms[0].ClientURL(), nats.UserInfo(systemUser, "guess")); err == nil {
		nc.Close()
		t.Error("the system account's user with a guessed password was let in")
	}
	wantForgetAnswers(t, ms[0])
}

// wantForgetAnswers checks that m's system account answers ForgetHost: of
// a server never in the cluster, nil (not a member).
func wantForgetAnswers(t *testing.T, m *member) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	if err := m.ForgetHost(ctx, "never-here"); err != nil {
		t.Errorf("ForgetHost of a server never in the cluster: %v, want nil (not a member)", err)
	}
}

// Lookups answered by a member while its routes change: nats-server reads
// its options unlocked to fill in a direct get's missing max_bytes, and a
// route change replaces them (ReloadOptions), which -race reported in a
// daemon. Lookups find the event throughout, and the race detector finds
// nothing in this process.
func TestLookupsWhileRoutesChange(t *testing.T) {
	t.Parallel()
	ms := openCluster(t, "a", "b", "c")
	a, b, c := ms[0], ms[1], ms[2]
	lookUpWhile(t, a, ms, func() {
		for i := range 6 {
			// a drops c's route and takes it back; each is a ReloadOptions.
			routes := []string{b.route, c.route}[:1+i%2]
			a.SetRoutes(routes)
			waitFor(t, fmt.Sprintf("a routed to %v", routes), func() bool {
				a.emb.mu.Lock()
				defer a.emb.mu.Unlock()
				return slices.Equal(a.emb.routes, sortedRoutes(routes))
			})
		}
	})
}

// Lookups while the embedded server's options are reloaded, many times: each
// reload rewrites the service imports a JetStream API request reads as it
// enters (nats-server 2.15.2, decision 1121), and Bus.reloading keeps the
// two apart: without it -race reported the crossing in 6 of 6 runs.
func TestLookupsWhileReloading(t *testing.T) {
	t.Parallel()
	ms := openCluster(t, "a", "b", "c")
	a := ms[0]
	routes := sortedRoutes(routesOf(others(ms, a)))
	lookUpWhile(t, a, slices.Repeat([]*member{a}, 8), func() {
		for range 1000 {
			if err := a.reload(routes); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// lookUpWhile publishes an event by a, has each of lookers look it up
// (Recorded) over and over while change runs, and waits until they have
// found it 30 times.
func lookUpWhile(t *testing.T, a *member, lookers []*member, change func()) {
	t.Helper()
	e := Event{ID: "jid1.pending.1.0", Kind: KindJob, BatchID: "bid1", JobID: "jid1", To: "Pending"}
	a.Publish(e)
	flush(t, a.Bus)
	done := make(chan struct{})
	var looked atomic.Int64
	var wg sync.WaitGroup
	defer wg.Wait() // before the members close, also after a Fatal
	defer close(done)
	for _, m := range lookers {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				// A replica behind the leader may answer "not recorded"
				// (direct gets are answered by any replica): the daemon
				// then publishes a copy, which the stream drops.
				if ok, err := m.Recorded(t.Context(), e); ok && err == nil {
					looked.Add(1)
				}
			}
		})
	}
	change()
	waitFor(t, "lookups answered", func() bool { return looked.Load() >= 30 })
}
