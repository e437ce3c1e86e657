//go:build linux

package main_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/internal/natstest"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// The daemons' embedded NATS servers make one NATS cluster by themselves
// (serve --nats-cluster): every host's events are in one stream, which
// `ingestq events replay` reads through any daemon's listener, and every
// host's dashboard counts its finished jobs from.

const clusterJobs = 24

// clusterRig is a test's queue and its daemons with --nats-cluster.
type clusterRig struct {
	t        *testing.T
	zk, root string
	q        *queue.Queue
	hosts    map[string]*clusterHost
	// For daemons whose listeners ask a token over TLS: the CLI's
	// environment (INGESTQ_NATS_TOKEN, INGESTQ_NATS_TLS_CA), the test's own
	// NATS clients' options, and the token /metrics asks.
	clientEnv    []string
	clientOpts   []nats.Option
	metricsToken string
	// submittedByCLI: the batches were submitted by `ingestq submit`,
	// which records each submission (the batch's Pending event).
	submittedByCLI bool
}

// clusterHost is one daemon and the client listener of its NATS server.
type clusterHost struct {
	*daemon
	url     string
	cluster string // its --nats-cluster address
}

func newClusterRig(t *testing.T) *clusterRig {
	zkAddr, root := zktest.Shared(t).Addr, zktest.Root(t)
	return &clusterRig{t: t, zk: zkAddr, root: root, q: openQueue(t, zkAddr, root), hosts: map[string]*clusterHost{}}
}

// clusterStates splits the job states in three groups, each worked by two
// of the three daemons, so that every batch has steps of two daemons or
// more: any two of them work every state, and a daemon that makes a batch
// and hands each job on to its own next step (decisions 172, 189) would
// otherwise run a small batch alone, leaving the replays one host's.
var clusterStates = map[string]string{
	"d1": "intake,reporting,pending,estimating,provisioning,recording,notify",
	"d2": "intake,reporting,pending,estimating,provisioning,downloading,processing,storing",
	"d3": "intake,reporting,downloading,processing,storing,recording,notify",
	// d4 and d5 take d3's and d2's places (TestNATSClusterHostsReplacedOneByOne).
	"d4": "intake,reporting,downloading,processing,storing,recording,notify",
	"d5": "intake,reporting,pending,estimating,provisioning,downloading,processing,storing",
}

// start launches the named daemons at the same instant, then waits until
// each runs and its NATS server is in the cluster.
func (r *clusterRig) start(names ...string) {
	r.t.Helper()
	for _, name := range names {
		r.launch(name, daemonConfig{}, natstest.FreeAddr(r.t), natstest.FreeAddr(r.t))
	}
	r.waitJoined(names...)
}

// launch starts the named daemon with c's binary, data folder and further
// flags (c's other fields are the rig's), its NATS server on the addresses
// given.
func (r *clusterRig) launch(name string, c daemonConfig, listen, cluster string) {
	r.t.Helper()
	c.Host, c.ZK, c.Root, c.Delay = name, r.zk, r.root, 5*time.Millisecond
	c.Extra = append([]string{"--nats-listen", listen, "--nats-cluster", cluster, "--zk-session-timeout", "4s"}, c.Extra...)
	if states, ok := clusterStates[name]; ok {
		c.Extra = append(c.Extra, "--states", states) // else every state
	}
	r.hosts[name] = &clusterHost{daemon: launchDaemon(r.t, c), url: "nats://" + listen, cluster: cluster}
	r.hosts[name].metricsToken = r.metricsToken
}

// restart stops the named daemon (SIGTERM; none of its events lost) and
// starts it again, this build, on its data folder and NATS addresses with
// the extra flags given, and waits until it has joined the cluster.
func (r *clusterRig) restart(name string, extra ...string) {
	r.t.Helper()
	r.relaunch(name, extra...)
	r.waitJoined(name)
}

// relaunch is restart up to the daemon running, without waiting for its
// server to join the cluster (a host that cannot route yet).
func (r *clusterRig) relaunch(name string, extra ...string) {
	r.t.Helper()
	h := r.hosts[name]
	h.stop(30 * time.Second)
	h.assertNoLoss()
	r.launch(name, daemonConfig{DataDir: h.dataDir, Extra: extra}, strings.TrimPrefix(h.url, "nats://"), h.cluster)
	r.hosts[name].waitLog(60*time.Second, "reactor: running")
}

// finish waits until each batch is done, checks that it completed its n
// jobs, and returns the jobs of each.
func (r *clusterRig) finish(bids []string, n int) map[string][]string {
	r.t.Helper()
	batches := map[string][]string{}
	for _, bid := range bids {
		waitBatchDone(r.t, r.q, bid, 90*time.Second)
		batches[bid] = assertBatchCompleted(r.t, r.q, bid, n)
	}
	return batches
}

// waitJoined waits until each named daemon runs and its NATS server is in
// the cluster.
func (r *clusterRig) waitJoined(names ...string) {
	r.t.Helper()
	for _, name := range names {
		r.hosts[name].waitLog(60*time.Second, "reactor: running")
		r.hosts[name].waitLog(60*time.Second, "events: embedded NATS server joined the cluster")
	}
}

// streamInfo asks the stream's state through host's listener; nil while
// the cluster does not answer (during an election).
func (r *clusterRig) streamInfo(host string) *jetstream.StreamInfo {
	nc, err := nats.Connect(r.hosts[host].url, r.clientOpts...)
	if err != nil {
		return nil
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(r.t.Context(), time.Second)
	defer cancel()
	s, err := js.Stream(ctx, events.DefaultStream)
	if err != nil {
		return nil
	}
	return s.CachedInfo()
}

// waitStream waits until the stream, seen through host's listener, has
// the replicas wanted, a leader that is not avoid, and every replica
// current.
func (r *clusterRig) waitStream(host string, replicas int, avoid string) *jetstream.StreamInfo {
	r.t.Helper()
	var info *jetstream.StreamInfo
	poll(r.t, 60*time.Second, fmt.Sprintf("the event stream with %d current replicas", replicas), func() (bool, string, error) {
		info = r.streamInfo(host)
		if info == nil || info.Cluster == nil {
			return false, "no answer", nil
		}
		c := info.Cluster
		current := 0
		for _, p := range c.Replicas {
			if p.Current && !p.Offline {
				current++
			}
		}
		ok := info.Config.Replicas == replicas && c.Leader != "" && c.Leader != avoid && current == min(replicas, len(r.live()))-1
		return ok, fmt.Sprintf("%d replicas (%d current besides the leader), leader %q", info.Config.Replicas, current, c.Leader), nil
	})
	return info
}

// live lists the daemons still running.
func (r *clusterRig) live() []string {
	var out []string
	for name, h := range r.hosts {
		if !h.exited() {
			out = append(out, name)
		}
	}
	return out
}

// batch runs a pass-through batch to its end and returns its jobs.
func (r *clusterRig) batch() (string, []string) {
	r.t.Helper()
	bid := createBatch(r.t, r.q, clusterJobs)
	waitBatchDone(r.t, r.q, bid, 90*time.Second)
	return bid, assertBatchCompleted(r.t, r.q, bid, clusterJobs)
}

// listeners are the client URLs of the named daemons' NATS servers.
func (r *clusterRig) listeners(names ...string) map[string]string {
	out := map[string]string{}
	for _, name := range names {
		out[name] = r.hosts[name].url
	}
	return out
}

// replay runs `ingestq events replay --batch BID -o json` against the NATS
// server at url.
func (r *clusterRig) replay(url, bid string) ([]events.Event, error) {
	var err error
	for try := 1; try <= 3; try++ {
		var evs []events.Event
		if evs, err = r.replayOnce(url, bid); err == nil {
			return evs, nil
		}
		// A replay that stalls while the cluster re-forms gives up (decision
		// 130) rather than hang; the stream is whole once it has formed.
		r.t.Logf("replay try %d: %v", try, err)
	}
	return nil, err
}

func (r *clusterRig) replayOnce(url, bid string) ([]events.Event, error) {
	cmd := exec.Command(ingestqBin, "--zk", r.zk, "--zk-root", r.root, "--nats", url,
		"events", "replay", "--batch", bid, "-o", "json")
	cmd.Env = append(os.Environ(), r.clientEnv...)
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("ingestq events replay --batch %s --nats %s: %w", bid, url, err)
	}
	var evs []events.Event
	if err := json.Unmarshal(out, &evs); err != nil {
		return nil, fmt.Errorf("ingestq events replay -o json --nats %s: %w\n%s", url, err, out)
	}
	return evs, nil
}

// assertEveryTimeline replays each batch through each NATS server named
// (the replays at once): every job's full timeline and the batch's, once
// each, and events published by more than one daemon.
func (r *clusterRig) assertEveryTimeline(batches map[string][]string, through map[string]string) {
	r.t.Helper()
	type replayOf struct{ host, bid string }
	got := map[replayOf][]events.Event{}
	var mu sync.Mutex
	var g errgroup.Group
	for host, url := range through {
		for bid := range batches {
			g.Go(func() error {
				evs, err := r.replay(url, bid)
				mu.Lock()
				defer mu.Unlock()
				got[replayOf{host, bid}] = evs
				return err
			})
		}
	}
	if err := g.Wait(); err != nil {
		r.t.Fatal(err)
	}
	for k, evs := range got {
		if r.submittedByCLI {
			submitted := func(e events.Event) bool {
				return e.Kind == events.KindBatch && e.BatchID == k.bid && e.To == string(queue.Pending) && e.Actor != ""
			}
			rest := slices.DeleteFunc(slices.Clone(evs), submitted)
			if n := len(evs) - len(rest); n != 1 {
				r.t.Errorf("replay of %s through %s: %d submissions recorded (a Pending event with an actor), want 1", k.bid, k.host, n)
			}
			evs = rest
		}
		assertExactlyOnce(r.t, evs, k.bid, batches[k.bid])
		if by := perHost(evs); len(by) < 2 {
			r.t.Errorf("replay of %s through %s: events of hosts %v, want the steps of two hosts or more", k.bid, k.host, by)
		} else {
			r.t.Logf("replay of %s through %s: %d events, per host %v", k.bid, k.host, len(evs), by)
		}
	}
}

// Two daemons that start at the same instant make one NATS cluster and run
// a batch; a third started later joins them, and the stream gets three
// replicas; each daemon's listener replays both batches whole, whichever
// daemon ran each step. The third's start costs the other two no refused
// route: its URL is announced once its server listens (each warned
// "Error trying to connect to route (attempt 1) … connection refused"
// twice, at every start of another host, when it was announced before).
func TestNATSClusterOfDaemons(t *testing.T) {
	t.Parallel()
	r := newClusterRig(t)
	start := time.Now()
	r.start("d1", "d2")
	r.waitStream("d1", 1, "")
	t.Logf("d1 and d2 clustered after %v", time.Since(start).Round(time.Millisecond))
	bid1, jids1 := r.batch()
	t.Logf("batch %s done after %v", bid1, time.Since(start).Round(time.Millisecond))

	const refused = "Error trying to connect to route"
	before := map[string]int{"d1": len(r.hosts["d1"].logLines(refused)), "d2": len(r.hosts["d2"].logLines(refused))}
	r.start("d3")
	r.waitStream("d3", 3, "")
	t.Logf("d3 joined, three replicas after %v", time.Since(start).Round(time.Millisecond))
	for name, n := range before {
		if lines := r.hosts[name].logLines(refused); len(lines) > n {
			t.Errorf("%s, routed already, at d3's start: %q", name, lines[n:])
		}
	}
	bid2, jids2 := r.batch()
	t.Logf("batch %s done after %v", bid2, time.Since(start).Round(time.Millisecond))
	r.assertEveryTimeline(map[string][]string{bid1: jids1, bid2: jids2}, r.listeners("d1", "d2", "d3"))
	// Every host's dashboard counts the finishes from the one stream: d3's
	// too, which started after the first batch.
	r.waitFinished(fmt.Sprintf("%d completed, 0 failed.", 2*clusterJobs), "d1", "d2", "d3")
}

// waitFinished waits until the overview of each named daemon's dashboard
// (at its HTTP address in `ingestq hosts`) says want of the jobs finished
// in the last hour.
func (r *clusterRig) waitFinished(want string, names ...string) {
	r.t.Helper()
	hosts := r.hostInfos()
	for _, h := range hosts {
		if !slices.Contains(names, h.Name) {
			continue
		}
		poll(r.t, 30*time.Second, h.Name+"'s dashboard to say "+want, func() (bool, string, error) {
			resp, err := http.Get(h.HTTP + "/ui/")
			if err != nil {
				return false, "", err
			}
			defer resp.Body.Close()
			page, err := io.ReadAll(resp.Body)
			_, finished, _ := strings.Cut(string(page), `id="finished">`)
			finished, _, _ = strings.Cut(finished, "<")
			return strings.HasPrefix(finished, want), finished, err
		})
	}
}

// A daemon SIGKILLed in a cluster of three (the one whose server leads the
// stream) while a batch runs: the two left elect a leader among them, the
// events the others published during the election are sent again until it
// takes them (decision 268), the killed host's last moves are recovered,
// and the stream (three replicas) replays both batches whole.
func TestNATSClusterSurvivesKill(t *testing.T) {
	t.Parallel()
	r := newClusterRig(t)
	const jobs = 150
	victim, bid1, jids1, bid2 := r.leaderMidBatch(jobs)
	r.hosts[victim].kill()
	left, jids2 := r.batchDoneWithout(victim, bid2, jobs)
	t.Logf("SIGKILLed %s, whose server led the stream, mid-batch; %s leads it now", victim, r.streamInfo(left[0]).Cluster.Leader)
	r.assertEveryTimeline(map[string][]string{bid1: jids1, bid2: jids2}, r.listeners(left...))
}

// leaderMidBatch starts d1, d2 and d3, runs a first batch through, and
// returns once a job of a second, of jobs jobs, has Completed and others
// have not: with the daemon whose server leads the stream, and the batches.
func (r *clusterRig) leaderMidBatch(jobs int) (leader, bid1 string, jids1 []string, bid2 string) {
	r.t.Helper()
	r.start("d1", "d2", "d3")
	info := r.waitStream("d1", 3, "")
	bid1, jids1 = r.batch()
	for name := range r.hosts {
		if "ingestq-"+name == info.Cluster.Leader {
			leader = name
		}
	}
	if leader == "" {
		r.t.Fatalf("the stream's leader %q is none of the daemons' servers", info.Cluster.Leader)
	}
	done := completedRefs(r.t, r.q)
	bid2 = createBatch(r.t, r.q, jobs)
	poll(r.t, 60*time.Second, "a job of the second batch Completed", func() (bool, string, error) {
		n := completedRefs(r.t, r.q) - done
		return n > 0 && n < jobs, fmt.Sprintf("%d Completed", n), nil
	})
	return leader, bid1, jids1, bid2
}

// batchDoneWithout waits, with gone stopped, until batch bid of jobs jobs
// has Completed whole and the daemons left have no event waiting; it
// returns their names and the batch's job IDs.
func (r *clusterRig) batchDoneWithout(gone, bid string, jobs int) (left, jids []string) {
	r.t.Helper()
	for name := range r.hosts {
		if name != gone {
			left = append(left, name)
		}
	}
	waitBatchDone(r.t, r.q, bid, 120*time.Second)
	jids = assertBatchCompleted(r.t, r.q, bid, jobs)
	r.waitEventsTaken(left...)
	return left, jids
}

// waitEventsTaken waits until the named daemons have no event waiting for
// the stream: those published during an election are sent again until a
// leader takes them.
func (r *clusterRig) waitEventsTaken(names ...string) {
	r.t.Helper()
	for _, name := range names {
		r.hosts[name].waitEventsTaken(90 * time.Second)
	}
}

// A daemon that cannot start (here its HTTP address is taken, then its
// --host is a live daemon's) exits before its NATS server joins the
// others' or announces its route: the cluster neither routes to it nor
// waits for it (decision 257). Before, it joined, left at once, and held
// the others' events up for 30 s. `ingestq hosts` and the API give each
// clustered daemon's HTTP address and NATS route.
func TestNATSClusterUntouchedByADaemonThatFailsToStart(t *testing.T) {
	t.Parallel()
	r := newClusterRig(t)
	r.start("d1", "d2")
	r.waitStream("d1", 1, "")
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	d3 := launchDaemon(t, daemonConfig{Host: "d3", ZK: r.zk, Root: r.root, Delay: 5 * time.Millisecond,
		Extra: []string{"--nats-listen", natstest.FreeAddr(t), "--nats-cluster", natstest.FreeAddr(t),
			"--http", taken.Addr().String()}})
	wantFailedBeforeJoining(t, d3, "with its HTTP address taken", "address already in use")
	// A daemon whose --host a live daemon without --nats-cluster holds is
	// refused before it announces its route.
	solo := startDaemon(t, daemonConfig{Host: "solo", ZK: r.zk, Root: r.root, Extra: []string{"--nats-listen", natstest.FreeAddr(t)}})
	dup := launchDaemon(t, daemonConfig{Host: "solo", ZK: r.zk, Root: r.root,
		Extra: []string{"--nats-listen", natstest.FreeAddr(t), "--nats-cluster", natstest.FreeAddr(t), "--zk-session-timeout", "2s"}})
	wantFailedBeforeJoining(t, dup, "named like a live daemon", "host name solo is in use by another live daemon")
	solo.stop(30 * time.Second) // its events would go to its own NATS, not the cluster's stream
	r.assertHostAddresses("d1", "d2")
	bid, jids := r.batch()
	for _, name := range []string{"d1", "d2"} {
		if lines := r.hosts[name].logLines("routes changed"); len(lines) > 0 {
			t.Errorf("%s routed to the daemon that failed to start: %s", name, firstLine(lines))
		}
	}
	r.assertEveryTimeline(map[string][]string{bid: jids}, r.listeners("d1", "d2"))
}

// wantFailedBeforeJoining checks that d, a daemon that cannot start (why),
// exits with a failure its log says (want) before its NATS server is
// routed to the cluster.
func wantFailedBeforeJoining(t *testing.T, d *daemon, why, want string) {
	t.Helper()
	if !d.wait(60 * time.Second) {
		t.Fatalf("%s %s still runs after 60 s", d.name, why)
	}
	if d.status() == "exit status 0" || !strings.Contains(d.logText(), want) {
		t.Fatalf("%s %s: %s; want a failure saying %q; log:\n%s", d.name, why, d.status(), want, tail(d.logText(), 2000))
	}
	if strings.Contains(d.logText(), "routed to the cluster") {
		t.Errorf("%s %s: its NATS server was routed to the cluster before it failed:\n%s", d.name, why, tail(d.logText(), 2000))
	}
}

// hostInfos is what `ingestq hosts -o json` says of the rig's daemons.
func (r *clusterRig) hostInfos() []reactor.HostInfo {
	r.t.Helper()
	out, err := r.cli("hosts", "-o", "json")
	var hosts []reactor.HostInfo
	if err != nil || json.Unmarshal([]byte(out), &hosts) != nil {
		r.t.Fatalf("ingestq hosts -o json: %v\n%s", err, out)
	}
	return hosts
}

// assertHostAddresses checks that `ingestq hosts` (text and -o json) and
// each daemon's GET /api/v1/hosts give the named clustered daemons' HTTP
// addresses (the API answers at each) and their NATS routes (those of
// their route nodes).
func (r *clusterRig) assertHostAddresses(names ...string) {
	r.t.Helper()
	routes, err := r.q.Routes(r.t.Context())
	if err != nil {
		r.t.Fatal(err)
	}
	route := map[string]string{}
	for _, h := range routes {
		route[h.Name] = string(h.Data)
	}
	hosts := r.hostInfos()
	text, err := r.cli("hosts")
	if err != nil || !strings.Contains(text, "NATS ROUTE") {
		r.t.Errorf("ingestq hosts: %v, want a NATS ROUTE column:\n%s", err, text)
	}
	byName := map[string]reactor.HostInfo{}
	for _, h := range hosts {
		byName[h.Name] = h
	}
	for _, name := range names {
		h := byName[name]
		if route[name] == "" || h.NATSRoute != route[name] || !strings.HasPrefix(h.HTTP, "http://127.0.0.1:") {
			r.t.Errorf("host %s: http %q, nats_route %q; want its HTTP URL and its route %q", name, h.HTTP, h.NATSRoute, route[name])
			continue
		}
		if !strings.Contains(text, h.HTTP) || !strings.Contains(text, h.NATSRoute) {
			r.t.Errorf("ingestq hosts does not show %s's %s and %s:\n%s", name, h.HTTP, h.NATSRoute, text)
		}
		resp, err := http.Get(h.HTTP + "/api/v1/hosts")
		if err != nil {
			r.t.Fatalf("GET /hosts at %s's address: %v", name, err)
		}
		var page struct{ Items []reactor.HostInfo }
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil || !slices.ContainsFunc(page.Items, func(x reactor.HostInfo) bool { return x.Name == name && x.NATSRoute == h.NATSRoute && x.HTTP == h.HTTP }) {
			r.t.Errorf("GET %s/api/v1/hosts: %v, %+v; want %s with its addresses", h.HTTP, err, page.Items, name)
		}
	}
}

// Hosts replaced one by one, each by a host of another name, each
// forgotten as it goes (ingestq hosts forget, decision 258): the event
// stream's copies follow the hosts that live, and the cluster still
// records every move. Without forgetting, the stream keeps its copies on
// the servers that went; once two of its three are gone it has no leader,
// and every event is lost.
func TestNATSClusterHostsReplacedOneByOne(t *testing.T) {
	t.Parallel()
	r := newClusterRig(t)
	r.start("d1", "d2", "d3")
	r.waitStream("d1", 3, "")
	bid1, jids1 := r.batch()

	out, err := r.cli("hosts", "forget", "d1")
	if err == nil || !strings.Contains(out, "d1 is running") {
		t.Errorf("hosts forget of a running host: %v, %q; want it refused, saying it runs", err, out)
	}
	for _, swap := range [][2]string{{"d3", "d4"}, {"d2", "d5"}} {
		gone, next := swap[0], swap[1]
		r.hosts[gone].stop(30 * time.Second)
		if out, err := r.cli("hosts", "forget", gone); err != nil || !strings.Contains(out, "forgot host "+gone) {
			t.Fatalf("hosts forget %s: %v\n%s", gone, err, out)
		}
		r.start(next)
		r.waitReplicasOn("d1", r.live())
		t.Logf("%s gone and forgotten, %s in: the stream's copies are on %v", gone, next, r.live())
	}
	bid2, jids2 := r.batch()
	r.assertEveryTimeline(map[string][]string{bid1: jids1, bid2: jids2}, r.listeners("d1", "d4", "d5"))

	// d3 comes back, with the data dir it had: it drops its old cluster
	// store and its note, and joins afresh.
	old, listen := r.hosts["d3"].dataDir, natstest.FreeAddr(t)
	back := launchDaemon(t, daemonConfig{Host: "d3", ZK: r.zk, Root: r.root, DataDir: old, Delay: 5 * time.Millisecond,
		Extra: []string{"--nats-listen", listen, "--nats-cluster", natstest.FreeAddr(t), "--states", clusterStates["d3"]}})
	r.hosts["d3"] = &clusterHost{daemon: back, url: "nats://" + listen}
	back.waitLog(60*time.Second, "reactor: running")
	if lines := back.logLines("joins afresh"); len(lines) != 1 || !strings.Contains(lines[0], filepath.Join(old, "nats-cluster")) {
		t.Errorf("d3 started again after it was forgotten: %q; want one line saying it dropped %s", lines, filepath.Join(old, "nats-cluster"))
	}
	if _, forgotten, err := r.q.Forgotten(t.Context(), "d3"); err != nil || forgotten {
		t.Errorf("d3 back: still forgotten %v (%v), want its note deleted", forgotten, err)
	}
	bid3, jids3 := r.batch()
	r.assertEveryTimeline(map[string][]string{bid3: jids3}, r.listeners("d1", "d3", "d5"))
	if t.Failed() {
		// Tells an event late from one lost: what the stream did not
		// acknowledge is sent again, for a minute.
		r.waitEventsTaken("d1", "d3", "d5")
		evs, err := r.replay(r.hosts["d1"].url, bid3)
		t.Logf("once every daemon's events were taken: %d events of %s in the stream (%v)", len(evs), bid3, err)
	}
}

// cli runs an ingestq command on the rig's queue, its NATS the running
// daemons' servers (with none, where nothing listens: not whatever
// 127.0.0.1:4222 is), and returns its output.
func (r *clusterRig) cli(args ...string) (string, error) {
	url := cmp.Or(strings.Join(slices.Collect(maps.Values(r.listeners(r.live()...))), ","), "nats://127.0.0.1:1")
	cmd := exec.Command(ingestqBin, append([]string{"--zk", r.zk, "--zk-root", r.root, "--nats", url}, args...)...)
	cmd.Env = append(os.Environ(), r.clientEnv...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// waitReplicasOn waits until the stream, seen through host's listener, has
// a leader and current copies on exactly the servers of the named hosts.
func (r *clusterRig) waitReplicasOn(host string, hosts []string) {
	r.t.Helper()
	var want []string
	for _, h := range hosts {
		want = append(want, "ingestq-"+h)
	}
	slices.Sort(want)
	poll(r.t, 90*time.Second, fmt.Sprintf("the stream's copies on %v", want), func() (bool, string, error) {
		info := r.streamInfo(host)
		if info == nil || info.Cluster == nil || info.Cluster.Leader == "" {
			return false, "no leader", nil
		}
		on := []string{info.Cluster.Leader}
		current := true
		for _, p := range info.Cluster.Replicas {
			on = append(on, p.Name)
			current = current && p.Current && !p.Offline
		}
		slices.Sort(on)
		return slices.Equal(on, want) && current, fmt.Sprintf("copies on %v (all current: %v)", on, current), nil
	})
}

// Daemons joined with --nats to an existing NATS cluster, each through
// another of its servers, share its one stream: every server replays a
// batch whole, whichever daemon ran each step.
func TestExternalNATSCluster(t *testing.T) {
	t.Parallel()
	urls := natstest.Cluster(t, 3)
	r := newClusterRig(t)
	for i, name := range []string{"d1", "d2"} {
		d := launchDaemon(t, daemonConfig{Host: name, ZK: r.zk, Root: r.root, NATS: urls[i], Delay: 5 * time.Millisecond,
			Extra: []string{"--states", clusterStates[name]}})
		r.hosts[name] = &clusterHost{daemon: d, url: urls[i]}
	}
	for _, h := range r.hosts {
		h.waitLog(60*time.Second, "reactor: running")
	}
	bid, jids := r.batch()
	r.assertEveryTimeline(map[string][]string{bid: jids}, map[string]string{"ext-0": urls[0], "ext-1": urls[1], "ext-2": urls[2]})
}
