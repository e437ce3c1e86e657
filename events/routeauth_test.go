package events

import (
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/ingestq/ingestq/internal/natstest"
)

const testSecret = "the-cluster-secret-of-this-test"

// memberLogs records each member's log, from debug, by host.
type memberLogs struct {
	mu   sync.Mutex
	recs map[string]*logRecorder
}

// withSecret sets a member's cluster secret and records its log.
func (l *memberLogs) withSecret(secret string) func(*Config) {
	return func(c *Config) {
		rec := &logRecorder{min: slog.LevelDebug}
		l.mu.Lock()
		if l.recs == nil {
			l.recs = map[string]*logRecorder{}
		}
		l.recs[c.Host] = rec
		l.mu.Unlock()
		c.Logger, c.ClusterSecret, c.SecretSetting = slog.New(rec), secret, "--test-secret"
	}
}

// of is host's log.
func (l *memberLogs) of(host string) *logRecorder {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.recs[host]
}

// noSecretLogged fails the test if a member logged testSecret.
func (l *memberLogs) noSecretLogged(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for host, rec := range l.recs {
		if n := rec.containing(testSecret); n > 0 {
			t.Errorf("%s logged the cluster secret in %d lines", host, n)
		}
	}
}

// Members with the cluster secret make one stream. A rogue nats-server
// routed at a member's cluster port, with no secret or a wrong one, is
// refused at every try: it never has a route, receives none of the
// stream's events, and what it publishes is never recorded; the member
// says so once per reason, naming the setting, though the rogue tries
// every second. Before, routes were not authenticated: the rogue joined
// the cluster and received every event.
func TestClusterSecretKeepsRoguesOut(t *testing.T) {
	t.Parallel()
	logs := &memberLogs{}
	ms := openClusterWith(t, logs.withSecret(testSecret), "a", "b")
	a, b := ms[0], ms[1]
	publishN(t, a, "bid-1", 2)
	publishN(t, b, "bid-1", 1)

	withPassword := strings.Replace(a.route, "nats://", "nats://"+routeUser+":not-the-secret@", 1)
	type rogue struct {
		ns  *server.Server
		rec *logRecorder
		sub *nats.Subscription
		nc  *nats.Conn
	}
	rogues := map[string]*rogue{}
	for name, route := range map[string]string{"none": a.route, "wrong": withPassword} {
		ns := natstest.Run(t, &server.Options{ServerName: "rogue-" + name, Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true,
			Cluster: server.ClusterOpts{Name: "test", Host: "127.0.0.1", Port: server.RANDOM_PORT}, Routes: server.RoutesFromStr(route)})
		rec := &logRecorder{min: slog.LevelDebug}
		ns.SetLoggerV2(serverLogger{log: slog.New(rec), said: &onceEach{}}, true, false, false)
		nc := connect(t, ns.ClientURL())
		sub, err := nc.SubscribeSync(SubjectAll)
		if err != nil {
			t.Fatal(err)
		}
		rogues[name] = &rogue{ns: ns, rec: rec, sub: sub, nc: nc}
	}
	for name, r := range rogues {
		waitFor(t, "rogue "+name+" refused three times", func() bool { return r.rec.containing(routeRefused) >= 2 || r.ns.NumRoutes() > 0 })
	}
	for why, want := range map[string]int{"it presented no cluster secret": 1, "it presented another cluster secret": 1} {
		line := "events: refused a NATS route from another server: " + why +
			"; every host of the cluster needs the same secret (said once per host)"
		if n := logs.of("a").count(slog.LevelWarn, line); n != want {
			t.Errorf("a refused rogues three times or more; it said %q %d times, want %d", line, n, want)
		}
		if at := logs.of("a").attrs(line); at["setting"] != "--test-secret" || at["from"] != "127.0.0.1" {
			t.Errorf("a's line %q: %v, want it to name the setting and the rogue's address", line, at)
		}
	}

	publishN(t, a, "bid-2", 1)
	publishN(t, b, "bid-2", 1)
	for name, r := range rogues {
		if n, _, _ := r.sub.Pending(); n != 0 {
			t.Errorf("rogue %s received %d of the cluster's messages, want none", name, n)
		}
		data, err := marshal(Event{ID: "forged-" + name, Kind: KindJob, BatchID: "bid-1", JobID: "bid-1-z", To: "Completed", Host: "rogue"})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.nc.Publish("ingestq.job.bid-1.bid-1-z", data); err != nil {
			t.Fatal(err)
		}
		if err := r.nc.Flush(); err != nil {
			t.Fatal(err)
		}
		if n := r.ns.NumRoutes(); n != 0 {
			t.Errorf("rogue %s has %d routes into the cluster, want none", name, n)
		}
	}
	for _, m := range ms {
		wantSeen(t, m, map[string]int{"a": 3, "b": 2})
	}
	logs.noSecretLogged(t)
}

// A member whose secret differs from the cluster's is refused; it says
// once per refusing server that the secrets differ, and the refusing
// member says once that it refused it, each naming the setting, though
// the route is dialed again every second. The secret is in no log line,
// though nats-server logs a route it drops with its URL.
func TestClusterSecretDiffersSaidOnce(t *testing.T) {
	t.Parallel()
	logs := &memberLogs{}
	ms := openClusterWith(t, logs.withSecret(testSecret), "a", "b")
	a, b := ms[0], ms[1]
	other := &logRecorder{min: slog.LevelDebug}
	c := openMemberWith(t, "c", func(c *Config) {
		c.Logger, c.ClusterSecret, c.SecretSetting = slog.New(other), "another-secret-altogether", "--test-secret"
	}, a, b)
	const differs = "events: a NATS server refused this server's route: its cluster secret differs from this host's, or it has none " +
		"(said once per server)"
	waitFor(t, "c refused twice by each", func() bool { return other.count(slog.LevelWarn, differs) >= 2 && other.containing(routeRefused) >= 4 })
	if n := other.count(slog.LevelWarn, differs); n != 2 {
		t.Errorf("c, refused by a and b three times or more, said %q %d times, want twice", differs, n)
	}
	if at := other.attrs(differs); at["setting"] != "--test-secret" || !strings.HasPrefix(at["by"], "127.0.0.1:") {
		t.Errorf("c's line %q: %v, want it to name the setting and the refusing server", differs, at)
	}
	if n := other.count(slog.LevelInfo, joinedLine); n != 0 {
		t.Errorf("c, refused, said %d times it joined the cluster", n)
	}
	refused := "events: refused a NATS route from another server: it presented another cluster secret" +
		"; every host of the cluster needs the same secret (said once per host)"
	if n := logs.of("a").count(slog.LevelWarn, refused); n != 1 {
		t.Errorf("a said %q %d times, want once", refused, n)
	}

	// a routed to c too, then to c only: nats-server logs the connected
	// route it removes, b's, by its URL.
	a.SetRoutes([]string{b.route, c.route})
	waitFor(t, "a routed to c", func() bool {
		a.emb.mu.Lock()
		defer a.emb.mu.Unlock()
		return len(a.emb.routes) == 2
	})
	a.SetRoutes([]string{c.route})
	waitFor(t, "a to drop b's route", func() bool { return logs.of("a").containing("Removed route") > 0 })
	logs.noSecretLogged(t)
}

// A cluster without a secret is given one by a rolling restart, one member
// at a time: throughout, every member's events are in the one stream.
// A member with the secret dials the others, which ask none, and they
// take its route; it refuses theirs, and one route a pair is all NATS
// needs.
func TestClusterSecretGivenByRollingRestart(t *testing.T) {
	t.Parallel()
	ms := openCluster(t, "a", "b", "c")
	want := map[string]int{}
	for _, m := range ms {
		publishN(t, m, "bid-0", 1)
		want[m.cfg.Host]++
	}
	waitThreeCurrent(t, ms[0])
	logs := &memberLogs{}
	for i, old := range ms {
		if err := old.Close(); err != nil {
			t.Fatal(err)
		}
		ms[i] = openMemberWith(t, old.cfg.Host, func(c *Config) {
			logs.withSecret(testSecret)(c)
			c.DataDir, c.Cluster = old.cfg.DataDir, old.cfg.Cluster
		}, others(ms, old)...)
		flush(t, ms[i].Bus)
		for _, m := range ms {
			publishN(t, m, "bid-"+old.cfg.Host, 1)
			want[m.cfg.Host]++
		}
		// Until the restarted replica is current again, a replay whose
		// consumer it holds waits for it or fails as incomplete (Replay);
		// once it is (three current replicas), the replays are whole and
		// the next member may stop, as a rolling restart waits for a host
		// to be back.
		waitThreeCurrent(t, ms[i])
		for _, m := range ms {
			wantSeen(t, m, want)
		}
		t.Logf("%s restarted with the secret: every member's events in the one stream", old.cfg.Host)
	}
	logs.noSecretLogged(t)
}

// presented records the passwords the routes into a server present, and
// admits them all, as a server that wants to be dialed would.
type presented struct {
	mu        sync.Mutex
	passwords []string
}

func (p *presented) Check(c server.ClientAuthentication) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.passwords = append(p.passwords, c.GetOpts().Password)
	return true
}

func (p *presented) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.passwords)
}

// While a cluster is given its secret host by host, a member without one
// takes any route, and tells the others of the server routed to it: a
// member with the secret then dials that server too. It must not present
// the secret to it, or a rogue that joined during the rolling restart
// keeps the secret that guards the cluster after it. Before, the member
// presented it (nats-server dials a server it learns of with the cluster's
// password whenever that server's INFO says it asks for one).
func TestClusterSecretNotGivenToServersLearntOf(t *testing.T) {
	t.Parallel()
	ms := openCluster(t, "a", "b") // not given the secret yet
	open := ms[0]
	logs := &memberLogs{}
	openMemberWith(t, "s", logs.withSecret(testSecret), ms...)

	rec := &presented{}
	rogue := natstest.Run(t, &server.Options{ServerName: "rogue", Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true,
		Cluster: server.ClusterOpts{Name: "test", Host: "127.0.0.1", Port: server.RANDOM_PORT, Username: "rogue", Password: "asks-for-one"},
		Routes:  server.RoutesFromStr(open.route), CustomRouterAuthentication: rec})
	waitFor(t, "s to dial the rogue a told it of", func() bool { return len(rec.seen()) > 0 })
	for _, p := range rec.seen() {
		if p == testSecret {
			t.Errorf("s presented the cluster secret to a server it learnt of from a: %q", rec.seen())
			break
		}
	}
	if n := rogue.NumRoutes(); n == 0 {
		t.Errorf("the rogue has no route: the test proves nothing")
	}
}

// Members with the secret, joining one after another, warn of no route
// refused: a member told of a newcomer by its peers before it dials it
// from ZooKeeper dials it at once, without the secret (withSecret), and is
// refused, again and again until the route from ZooKeeper is up; said, it
// would be a false alarm. With such a refusal said at the first, as the
// route it dials from ZooKeeper is, 11 runs of 12 warned.
func TestClusterSecretMembersJoinQuietly(t *testing.T) {
	t.Parallel()
	logs := &memberLogs{}
	ms := openClusterWith(t, logs.withSecret(testSecret), "a", "b", "c", "d")
	publishN(t, ms[0], "bid-0", 5)
	waitThreeCurrent(t, ms[0])
	for _, m := range ms {
		for _, line := range []string{"events: a NATS server refused", "events: refused a NATS route"} {
			if said := logs.of(m.cfg.Host).warned(line); said != "" {
				t.Errorf("%s warned %q", m.cfg.Host, said)
			}
		}
	}
	logs.noSecretLogged(t)
}
