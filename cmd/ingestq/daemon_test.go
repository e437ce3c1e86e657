//go:build linux

// Process-level fault tests of `ingestq serve`: the real binary (built with
// -race by TestMain) runs as child processes against real ZooKeeper and a
// nats-server embedded in the test; the tests kill, stop and cut things
// under it and check ZooKeeper's outcome and the recorded events.
//
// Each test has its own NATS server (daemons of different tests would
// otherwise share wake-up signals and jid-numbered subjects), so they run
// in parallel.
package main_test

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// Three daemons share a 500-job batch; the busiest is SIGKILLed after 100
// completions. The survivors take its jobs over once its session expires
// (10 s) and the batch completes.
//
// What "exactly once" can mean here: every transition is one fenced
// multi() in ZooKeeper, and the pass-through pipeline is a line (no job
// fails, nothing requeues), so ZooKeeper's outcome — every job Completed
// with retry_count 0, listed once, Check clean — means each job entered
// each state exactly once. Events are published after the commit, through
// an in-process queue and an async JetStream publish: the killed daemon may
// have committed transitions whose events died with it, and the survivors
// publish those when they move the jobs on or report (decision 131). So
// the record holds:
//   - every (job, state) exactly once, each event a pipeline step of a job
//     of the batch;
//   - the survivors lost nothing (events_lost=0 when they stop);
//   - the batch's Processing, Reporting and Completed events are exactly
//     once (Processing is seen live before the kill; the report comes from
//     a survivor).
func TestKilledDaemonMidRun(t *testing.T) {
	t.Parallel()
	const n = 500
	ns := startNATS(t, -1, t.TempDir())
	url := ns.ClientURL()
	zkAddr, root := zktest.Shared(t).Addr, zktest.Root(t)
	q := openQueue(t, zkAddr, root)
	rec := record(t, url)

	ds := map[string]*daemon{}
	for i := range 3 {
		host := fmt.Sprintf("d%d", i+1)
		ds[host] = startDaemon(t, daemonConfig{Host: host, ZK: zkAddr, Root: root, NATS: url, Delay: 5 * time.Millisecond})
	}

	start := time.Now()
	bid := createBatch(t, q, n)
	rec.waitFor(60*time.Second, "the batch's jobs and 100 job.completed events", func(evs []events.Event) bool {
		return batchEvents(evs, bid)["Processing"] == 1 && countCompleted(evs, bid) >= 100
	})
	snap := rec.snapshot()
	done := map[string]int{}
	for _, e := range snap {
		if e.Kind == events.KindJob && e.To == string(queue.Completed) {
			done[e.Host]++
		}
	}
	victim := slices.MaxFunc(slices.Sorted(maps.Keys(ds)), func(a, b string) int { return done[a] - done[b] })
	killAt := time.Now()
	ds[victim].kill()
	t.Logf("SIGKILLed %s at %v: %d job.completed events so far, per host %v",
		victim, killAt.Sub(start).Round(time.Millisecond), countCompleted(snap, bid), done)
	if done[victim] == 0 {
		t.Errorf("the killed daemon %s had completed no job: the kill did not land mid-run", victim)
	}

	waitReport(t, rec, q, bid, 90*time.Second)
	took := time.Since(start)
	jids := assertBatchCompleted(t, q, bid, n)
	if got := completedRefs(t, q); got != n {
		t.Errorf("%d refs in /jobs/states/completed, want %d", got, n)
	}

	// Stop the survivors so that everything they published is recorded.
	for host, d := range ds {
		if host == victim {
			continue
		}
		d.stop(15 * time.Second)
		t.Logf("%s stopped: events_published=%d", host, d.assertNoLoss())
	}

	recorded := replay(t, url, bid)
	// Everything the server took went both to the stream and to the live
	// subscriber (which may still be reading the last of it). A move whose
	// recovered copy raced its maker's own publish reaches the subscriber
	// twice with one ID, and the stream once: count IDs.
	live := func(evs []events.Event) int {
		ids := map[string]bool{}
		for _, e := range evs {
			if e.BatchID == bid {
				ids[e.ID] = true
			}
		}
		return len(ids)
	}
	rec.waitFor(10*time.Second, "the live subscriber to see as many events as the stream holds", func(evs []events.Event) bool {
		return live(evs) >= len(recorded)
	})
	if n := live(rec.snapshot()); n != len(recorded) {
		t.Errorf("the live subscriber saw %d distinct events of the batch, the stream recorded %d", n, len(recorded))
	}

	tl := tallyJobs(recorded, bid, jids)
	if len(tl.wrong) > 0 || len(tl.dups) > 0 {
		t.Errorf("job events: %d off-pipeline %v; %d (job, state) with more than one event %v%s",
			len(tl.wrong), first(tl.wrong), len(tl.dups), first(tl.dups), tl.describeDups())
	}
	if len(tl.missing) > 0 {
		t.Errorf("%d job transitions have no event (first %v): the killed daemon's unpublished moves were not recovered",
			len(tl.missing), first(tl.missing))
	}
	if got, want := batchEvents(recorded, bid), map[string]int{"Processing": 1, "Reporting": 1, "Completed": 1}; !mapsEqual(got, want) {
		t.Errorf("batch events per state %v, want %v", got, want)
	}

	hosts := perHost(recorded)
	if len(hosts) < 2 {
		t.Errorf("events came from hosts %v, want at least 2", hosts)
	}
	t.Logf("batch of %d took %v (kill at %v); %d events recorded, per host %v (\"\" for the moves recovered)",
		n, took.Round(time.Millisecond), killAt.Sub(start).Round(time.Millisecond), len(recorded), hosts)
}

// SIGTERM during a run: the daemon stops taking work, lets its running
// steps finish within --grace, closes its session (its locks go at once)
// and exits 0; a second daemon finishes the batch. Both stop cleanly, so
// here every transition's event is recorded exactly once.
func TestSIGTERMDuringRun(t *testing.T) {
	t.Parallel()
	const n = 200
	const grace = 3 * time.Second
	ns := startNATS(t, -1, t.TempDir())
	url := ns.ClientURL()
	zkAddr, root := zktest.Shared(t).Addr, zktest.Root(t)
	q := openQueue(t, zkAddr, root)
	rec := record(t, url)

	a := startDaemon(t, daemonConfig{Host: "a", ZK: zkAddr, Root: root, NATS: url, Grace: grace, Delay: 200 * time.Millisecond})
	start := time.Now()
	bid := createBatch(t, q, n)
	rec.waitFor(60*time.Second, "10 job.completed events", func(evs []events.Event) bool { return countCompleted(evs, bid) >= 10 })

	termAt := time.Now()
	a.signal(syscall.SIGTERM)
	if !a.wait(grace + 5*time.Second) {
		t.Fatalf("a still running %v after SIGTERM (grace %v)", grace+5*time.Second, grace)
	}
	exitTook := a.exitedAt.Sub(termAt)
	if code := a.state.ExitCode(); code != 0 {
		t.Errorf("a exited with %s after SIGTERM, want 0", a.state)
	}
	held, err := locks(q)
	if err != nil {
		t.Fatal(err)
	}
	if len(held) > 0 {
		t.Errorf("right after a exited, %d lock nodes are held (a was the only daemon): %v", len(held), held)
	}
	doneByA := completedRefs(t, q)
	if len(a.logLines("reactor: stopping")) == 0 {
		t.Errorf("a did not log \"reactor: stopping\"")
	}
	// 200 ms steps finish well within a 3 s grace: nothing may be cut short.
	for _, bad := range []string{"grace period over", "step cancelled by shutdown"} {
		if l := a.logLines(bad); len(l) > 0 {
			t.Errorf("a logged %q with 200 ms steps and a %v grace: %v", bad, grace, first(l))
		}
	}
	pubA := a.assertNoLoss()
	t.Logf("a exited %v after SIGTERM (%s), %d jobs Completed by then, events_published=%d",
		exitTook.Round(time.Millisecond), a.state, doneByA, pubA)
	if doneByA >= n {
		t.Fatalf("a finished all %d jobs before SIGTERM took effect: nothing left for b", n)
	}

	b := startDaemon(t, daemonConfig{Host: "b", ZK: zkAddr, Root: root, NATS: url, Delay: 5 * time.Millisecond})
	restart := time.Now()
	waitReport(t, rec, q, bid, 60*time.Second)
	t.Logf("b finished the batch %v after it started (%v in all)", time.Since(restart).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	jids := assertBatchCompleted(t, q, bid, n)
	if got := completedRefs(t, q); got != n {
		t.Errorf("%d refs in /jobs/states/completed, want %d", got, n)
	}
	b.stop(15 * time.Second)
	b.assertNoLoss()
	recorded := replay(t, url, bid)
	assertExactlyOnce(t, recorded, bid, jids)
	hosts := perHost(recorded)
	if hosts["a"] == 0 || hosts["b"] == 0 {
		t.Errorf("events per host %v: want both a and b", hosts)
	}
	// An acknowledged event is recorded: events_published can't exceed
	// what the stream holds from a (a's events all belong to this batch).
	if pubA > hosts["a"] {
		t.Errorf("a reported events_published=%d but the stream holds %d of its events", pubA, hosts["a"])
	}
	t.Logf("events per host %v; a's events_published=%d", hosts, pubA)
}

// ZooKeeper stopped and restarted (same port and data) under a running
// daemon: it reconnects (its session survives the restart) and the batch
// completes, so no job may stay locked by the daemon's own session. A
// commit in flight when the server went away may have been applied with its
// answer lost: the daemon then publishes nothing for it, so events are at
// most once, and missing for at most the transitions in flight.
func TestZooKeeperRestart(t *testing.T) {
	t.Parallel()
	const n = 300
	srv := zktest.OwnServer(t)
	ns := startNATS(t, -1, t.TempDir())
	url := ns.ClientURL()
	const root = "/ingestq"
	q := openQueue(t, srv.Addr, root)
	rec := record(t, url)
	d := startDaemon(t, daemonConfig{Host: "d", ZK: srv.Addr, Root: root, NATS: url, Delay: 5 * time.Millisecond})

	start := time.Now()
	bid := createBatch(t, q, n)
	rec.waitFor(60*time.Second, "the batch's jobs and 50 job.completed events", func(evs []events.Event) bool {
		return batchEvents(evs, bid)["Processing"] == 1 && countCompleted(evs, bid) >= 50
	})
	before := countCompleted(rec.snapshot(), bid)
	stopAt := time.Now()
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Since(stopAt)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	outage := time.Since(stopAt)
	t.Logf("ZooKeeper stopped at %d completions, %v into the run; stop took %v, serving again after %v",
		before, stopAt.Sub(start).Round(time.Millisecond), stopped.Round(time.Millisecond), outage.Round(time.Millisecond))

	waitReport(t, rec, q, bid, 90*time.Second)
	took := time.Since(start)
	jids := assertBatchCompleted(t, q, bid, n)
	if got := completedRefs(t, q); got != n {
		t.Errorf("%d refs in /jobs/states/completed, want %d", got, n)
	}
	d.stop(15 * time.Second)
	d.assertNoLoss()
	recorded := replay(t, url, bid)
	tl := tallyJobs(recorded, bid, jids)
	if len(tl.wrong) > 0 || len(tl.dups) > 0 || len(tl.missing) > 0 {
		t.Errorf("job events: %d off-pipeline %v, %d duplicated %v, %d missing %v%s",
			len(tl.wrong), first(tl.wrong), len(tl.dups), first(tl.dups), len(tl.missing), first(tl.missing), tl.describeDups())
	}
	if got, want := batchEvents(recorded, bid), map[string]int{"Processing": 1, "Reporting": 1, "Completed": 1}; !mapsEqual(got, want) {
		t.Errorf("batch events per state %v, want %v", got, want)
	}
	trouble := map[string]int{}
	for _, s := range []string{"retrying the write", "commit failed", "result abandoned", "acquire failed", "listing failed", "unlock failed", "expired"} {
		trouble[s] = len(d.logLines(s))
	}
	t.Logf("batch of %d took %v; %d transitions without an event %v; daemon's log lines: %v",
		n, took.Round(time.Millisecond), len(tl.missing), first(tl.missing), trouble)
}

// The daemon reaches ZooKeeper through a proxy that is paused until the
// server expires the daemon's session (--zk-session-timeout 3s). After
// Resume the daemon gets a new session, re-arms its watches, rescans, and
// finishes the batch.
func TestSessionExpiry(t *testing.T) {
	t.Parallel()
	const n = 200
	srv, proxy := proxiedServer(t)
	ns := startNATS(t, -1, t.TempDir())
	url := ns.ClientURL()
	const root = "/ingestq"
	q := openQueue(t, srv.Addr, root) // straight to the server
	rec := record(t, url)
	const sessionTimeout = 3 * time.Second
	d := startDaemon(t, daemonConfig{Host: "d", ZK: proxy.Addr(), Root: root, NATS: url, Delay: 100 * time.Millisecond,
		Extra: []string{"--zk-session-timeout", sessionTimeout.String()}})

	start := time.Now()
	bid := createBatch(t, q, n)
	rec.waitFor(60*time.Second, "20 job.completed events", func(evs []events.Event) bool { return countCompleted(evs, bid) >= 20 })
	proxy.Pause()
	pausedAt := time.Now()
	// Nothing the daemon sends reaches the server now, so the locks it
	// holds are those of its session: they go when the server expires it.
	held, err := locks(q)
	if err != nil {
		t.Fatal(err)
	}
	owners := sessionsOf(held)
	if len(owners) == 0 {
		t.Fatal("the daemon holds no lock while working 100 ms steps: cannot tell when its session expires")
	}
	poll(t, 10*sessionTimeout, "the server to expire the daemon's session (its locks to go)", func() (bool, string, error) {
		l, err := locks(q)
		if err != nil {
			return false, "", err
		}
		left := 0
		for _, o := range l {
			if owners[o] {
				left++
			}
		}
		return left == 0, fmt.Sprintf("%d of its %d locks still there", left, len(held)), nil
	})
	expiredAfter := time.Since(pausedAt)
	proxy.Resume()
	t.Logf("paused at %d completions; the daemon's %d locks (sessions %v) went %v after the pause",
		countCompleted(rec.snapshot(), bid), len(held), slices.Collect(maps.Keys(owners)), expiredAfter.Round(time.Millisecond))

	// The daemon works again, under a new session: it takes locks that
	// none of the old sessions own.
	var newOwner int64
	poll(t, 30*time.Second, "the daemon to take a lock under a new session", func() (bool, string, error) {
		l, err := locks(q)
		if err != nil {
			return false, "", err
		}
		for _, o := range l {
			if !owners[o] {
				newOwner = o
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d locks, all of old sessions", len(l)), nil
	})
	t.Logf("the daemon holds locks again under session %d, %v after Resume", newOwner, time.Since(pausedAt)-expiredAfter)

	waitReport(t, rec, q, bid, 90*time.Second)
	took := time.Since(start)
	jids := assertBatchCompleted(t, q, bid, n)
	if got := completedRefs(t, q); got != n {
		t.Errorf("%d refs in /jobs/states/completed, want %d", got, n)
	}
	back := d.logLines("zookeeper: back; the session had expired")
	if len(back) != 1 {
		t.Errorf("the daemon's log has %d lines saying ZooKeeper is back after its session expired, want 1", len(back))
	}
	d.stop(15 * time.Second)
	d.assertNoLoss()
	recorded := replay(t, url, bid)
	tl := tallyJobs(recorded, bid, jids)
	if len(tl.wrong) > 0 || len(tl.dups) > 0 || len(tl.missing) > 0 {
		t.Errorf("job events: %d off-pipeline %v, %d duplicated %v, %d missing %v%s",
			len(tl.wrong), first(tl.wrong), len(tl.dups), first(tl.dups), len(tl.missing), first(tl.missing), tl.describeDups())
	}
	t.Logf("batch of %d took %v; %d transitions without an event; log: %q",
		n, took.Round(time.Millisecond), len(tl.missing), firstLine(back))
}

// NATS goes away under a running daemon: ZooKeeper work goes on (pools
// wake locally), the batch completes, and the events that cannot be
// recorded are sent again (decision 268), which the daemon logs. A new
// server on the same port and store within the resends' minute: the daemon
// reconnects, every event of both batches is recorded once, none lost.
func TestNATSUnreachable(t *testing.T) {
	t.Parallel()
	const n, n2 = 200, 20
	store := t.TempDir()
	ns1 := startNATS(t, -1, store)
	port, url := natsPort(ns1), ns1.ClientURL()
	zkAddr, root := zktest.Shared(t).Addr, zktest.Root(t)
	q := openQueue(t, zkAddr, root)
	rec := record(t, url)
	d := startDaemon(t, daemonConfig{Host: "d", ZK: zkAddr, Root: root, NATS: url, Delay: 20 * time.Millisecond})

	start := time.Now()
	bid := createBatch(t, q, n)
	rec.waitFor(60*time.Second, "20 job.completed events", func(evs []events.Event) bool { return countCompleted(evs, bid) >= 20 })
	downAt := time.Now()
	ns1.Shutdown()
	ns1.WaitForShutdown()
	seen := countCompleted(rec.snapshot(), bid)

	// Wait for both: the batch done in ZooKeeper, and the daemon's warning
	// that events are sent again (an unacknowledged event is, after the
	// 15 s ack timeout).
	const resending = "events: the stream did not acknowledge events in time; sending them again"
	var doneAfter, resentAfter time.Duration
	poll(t, 60*time.Second, "batch 1 done in ZooKeeper and a \"sending them again\" warning", func() (bool, string, error) {
		if resentAfter == 0 && len(d.logLines(resending)) > 0 {
			resentAfter = time.Since(downAt)
		}
		if doneAfter == 0 {
			b, err := q.LoadBatch(t.Context(), bid)
			if err != nil {
				return false, "", err
			}
			if b.State() == queue.Completed || b.State() == queue.Failed {
				doneAfter = time.Since(downAt)
			}
		}
		return doneAfter > 0 && resentAfter > 0, fmt.Sprintf("batch done after %v, warning after %v (0: not yet)", doneAfter, resentAfter), nil
	})
	jids1 := assertBatchCompleted(t, q, bid, n)
	if got := completedRefs(t, q); got != n {
		t.Errorf("%d refs in /jobs/states/completed, want %d", got, n)
	}
	if l := d.logLines("events: NATS disconnected"); len(l) == 0 {
		t.Errorf("the daemon did not log the NATS disconnect")
	}
	t.Logf("NATS down after %d completions (%v into the run); batch Completed in ZooKeeper %v later; first \"sending them again\" warning %v after the outage",
		seen, downAt.Sub(start).Round(time.Millisecond), doneAfter.Round(time.Millisecond), resentAfter.Round(time.Millisecond))

	ns2 := startNATS(t, port, store)
	d.waitLog(30*time.Second, "events: NATS reconnected")
	rec2 := record(t, ns2.ClientURL())
	bid2 := createBatch(t, q, n2)
	rec2.waitFor(60*time.Second, "batch 2's report event", func(evs []events.Event) bool {
		return batchReported(evs, bid2) && countCompleted(evs, bid2) == n2
	})
	waitBatchDone(t, q, bid2, 30*time.Second)
	jids2 := assertBatchCompleted(t, q, bid2, n2)

	d.stop(15 * time.Second)
	pub, lost := d.stopped()
	if lost != 0 {
		t.Errorf("the daemon stopped with events_lost=%d after NATS was down for less than the resends' minute", lost)
	}
	assertExactlyOnce(t, replay(t, ns2.ClientURL(), bid2), bid2, jids2)
	assertExactlyOnce(t, replay(t, ns2.ClientURL(), bid), bid, jids1)
	t.Logf("stopped: events_published=%d events_lost=%d; both batches' events recorded once", pub, lost)
}

func firstLine(l []string) string {
	if len(l) == 0 {
		return ""
	}
	return strings.TrimSpace(l[0])
}

var keptRE = regexp.MustCompile(`ingestq: stopped.*events_kept=(\d+)`)

// SIGTERM while NATS is down: what the daemon published during the outage
// is unacknowledged when it stops. Bus.Close keeps it in the data folder
// for the next start (decision 827), counting none lost, and the daemon's
// last word, its "ingestq: stopped" line, says so: events_kept the number
// the bus's own line gives, events_lost 0. Before the events were kept,
// they were counted lost here.
func TestSIGTERMWhileNATSDown(t *testing.T) {
	t.Parallel()
	ns := startNATS(t, -1, t.TempDir())
	url := ns.ClientURL()
	zkAddr, root := zktest.Shared(t).Addr, zktest.Root(t)
	q := openQueue(t, zkAddr, root)
	rec := record(t, url)
	d := startDaemon(t, daemonConfig{Host: "d", ZK: zkAddr, Root: root, NATS: url, Delay: 20 * time.Millisecond})

	bid := createBatch(t, q, 100)
	rec.waitFor(60*time.Second, "5 job.completed events", func(evs []events.Event) bool { return countCompleted(evs, bid) >= 5 })
	downAt := time.Now()
	ns.Shutdown()
	ns.WaitForShutdown()
	base := completedRefs(t, q)
	// The daemon works on; its events wait in the NATS client's reconnect
	// buffer, unacknowledged (the ack timeout is 15 s: SIGTERM comes first).
	poll(t, 10*time.Second, "10 more jobs Completed in ZooKeeper", func() (bool, string, error) {
		n := completedRefs(t, q)
		return n >= base+10, fmt.Sprintf("%d completed, %d at the outage", n, base), nil
	})
	termAt := time.Now()
	d.stop(15 * time.Second)
	pub, lost := d.stopped()
	kept := 0
	if m := keptRE.FindAllStringSubmatch(d.logText(), -1); len(m) > 0 {
		kept, _ = strconv.Atoi(m[len(m)-1][1])
	}
	t.Logf("SIGTERM %v after NATS went down; exit after %v; stopped line: events_published=%d events_lost=%d events_kept=%d",
		termAt.Sub(downAt).Round(time.Millisecond), d.exitedAt.Sub(termAt).Round(time.Millisecond), pub, lost, kept)
	if lost != 0 || kept == 0 {
		t.Errorf("stopped with events_lost=%d events_kept=%d after publishing into a dead NATS for %v; want none lost, the unacknowledged kept",
			lost, kept, termAt.Sub(downAt).Round(time.Millisecond))
	}
	if w := fmt.Sprintf("events: kept %d unacknowledged events in ", kept); !strings.Contains(d.logText(), w) {
		t.Errorf("the \"ingestq: stopped\" line says events_kept=%d, but the bus's own line does not say %q:\n%s", kept, w, tail(d.logText(), 6))
	}
}

// Connections cut again and again under a running daemon (its ZooKeeper
// session survives: the client reconnects at once through the proxy, as it
// would to another server of an ensemble). A request in flight at a cut may
// have been applied with its answer lost, or fail with a raw network error;
// whatever it was (an acquisition, a commit, an unlock), the daemon must
// not leave a job locked by its own, still living, session: the batch must
// complete. A failure lists the stranded jobs and the session holding their
// locks (the daemon's: the only other client).
func TestConnectionCuts(t *testing.T) {
	t.Parallel()
	const n, maxCuts = 400, 200
	srv, proxy := proxiedServer(t)
	ns := startNATS(t, -1, t.TempDir())
	url := ns.ClientURL()
	const root = "/ingestq"
	q := openQueue(t, srv.Addr, root)
	rec := record(t, url)
	d := startDaemon(t, daemonConfig{Host: "d", ZK: proxy.Addr(), Root: root, NATS: url, Delay: 5 * time.Millisecond})

	start := time.Now()
	bid := createBatch(t, q, n)
	rec.waitFor(60*time.Second, "the batch's jobs and 20 job.completed events", func(evs []events.Event) bool {
		return batchEvents(evs, bid)["Processing"] == 1 && countCompleted(evs, bid) >= 20
	})
	// The fault schedule: a cut every 60 ms while the batch runs.
	cuts := 0
	tick := time.NewTicker(60 * time.Millisecond)
	for cuts < maxCuts && !batchReported(rec.snapshot(), bid) {
		proxy.Cut()
		cuts++
		<-tick.C
	}
	tick.Stop()
	waitReport(t, rec, q, bid, 60*time.Second)
	took := time.Since(start)
	jids := assertBatchCompleted(t, q, bid, n)
	if got := completedRefs(t, q); got != n {
		t.Errorf("%d refs in /jobs/states/completed, want %d", got, n)
	}
	d.stop(15 * time.Second)
	d.assertNoLoss()
	recorded := replay(t, url, bid)
	tl := tallyJobs(recorded, bid, jids)
	if len(tl.wrong) > 0 || len(tl.dups) > 0 || len(tl.missing) > 0 {
		t.Errorf("job events: %d off-pipeline %v, %d duplicated %v, %d missing %v%s",
			len(tl.wrong), first(tl.wrong), len(tl.dups), first(tl.dups), len(tl.missing), first(tl.missing), tl.describeDups())
	}
	trouble := map[string]int{}
	for _, s := range []string{"retrying the write", "result abandoned", "acquire failed", "unlock failed", "expired"} {
		trouble[s] = len(d.logLines(s))
	}
	t.Logf("batch of %d took %v with %d connection cuts; %d transitions without an event; daemon's log lines: %v",
		n, took.Round(time.Millisecond), cuts, len(tl.missing), trouble)
}

// proxiedServer starts a ZooKeeper of the test's own and a proxy in front of
// it, through which a daemon can be cut off or partitioned.
func proxiedServer(t *testing.T) (*zktest.Server, *zktest.Proxy) {
	t.Helper()
	srv := zktest.OwnServer(t)
	proxy, err := zktest.StartProxy(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	return srv, proxy
}
