//go:build linux

package main_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
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

// A daemon cut off from its cluster's quorum (the two others frozen, their
// ZooKeeper sessions alive: a NATS partition as the daemon sees it) moves
// jobs with none of their moves recorded, each 2 s after the last
// (decision 781); SIGTERMed, it keeps them in its data folder; the others
// come back, it starts again, publishes them first, and every job's
// timeline is whole, each move once. Before, its stop counted them lost,
// and a job it had moved twice missed a move for good.
func TestDaemonCutOffFromItsQuorumKeepsItsMovesAcrossAStop(t *testing.T) {
	t.Parallel()
	r, e3, bid := cutOffDaemon(t, "40s")
	e3.stop(30 * time.Second)
	kept := regexp.MustCompile(`events: kept (\d+) unacknowledged events in (\S+); the next start publishes them`).FindStringSubmatch(e3.logText())
	if kept == nil || !strings.HasPrefix(kept[2], e3.dataDir) {
		t.Fatalf("e3's stop did not keep its unacknowledged events in its data folder: %v", e3.logLines("unacknowledged"))
	}
	r.rejoinCutOff(e3, bid, kept[1])
}

// A daemon cut off from its quorum past the minute of resends holds its
// moves, written to its data folder as it holds them; SIGKILLed (no stop:
// an OOM kill, the machine lost), it loses nothing held: started again once
// the others are back, it publishes them first, and every job's timeline is
// whole, each move once. Before, they were written only at a stop, and the
// kill lost them for good; nor were they held: a minute into the split the
// daemon's routes, handed again unchanged, held its publisher up.
func TestDaemonCutOffFromItsQuorumKeepsItsHeldMovesAcrossAKill(t *testing.T) {
	t.Parallel()
	// Held 75 s or more after its move (a 15 s ack timeout, then a minute
	// of resends): the others stay in ZooKeeper, frozen, for longer than
	// the wait below (else e3 runs alone, and its own stream takes them).
	r, e3, bid := cutOffDaemon(t, "240s")
	// Every event waiting is held (none within its minute of resends: no
	// move for a minute, the batch done or stuck), and the file has them.
	held := 0
	poll(t, 3*time.Minute, "e3 to hold every move it made, written to its data folder", func() (bool, string, error) {
		waiting, err := eventsMetric(e3.daemon, "ingestq_events_waiting")
		if err != nil {
			return false, "", err
		}
		held, err = eventsMetric(e3.daemon, "ingestq_events_parked")
		inFile := keptInFile(t, e3.dataDir)
		return err == nil && held >= 2*clusterJobs && held == waiting && inFile == held,
			fmt.Sprintf("%d waiting, %d held, %d in the file", waiting, held, inFile), err
	})
	e3.kill()
	r.rejoinCutOff(e3, bid, strconv.Itoa(held))
}

// cutOffDaemon launches e1, e2 and e3, freezes e1 and e2 (their ZooKeeper
// sessions, of the timeout given, alive: a NATS partition as e3 sees it),
// submits a batch, and waits until e3 has made two moves of each job,
// unrecorded.
func cutOffDaemon(t *testing.T, frozenSession string) (r *clusterRig, e3 *clusterHost, bid string) {
	t.Helper()
	r = newClusterRig(t)
	all := []string{"e1", "e2", "e3"} // every state each
	for _, name := range all {
		var extra []string
		if name != "e3" {
			extra = []string{"--zk-session-timeout", frozenSession} // frozen, still in ZooKeeper
		}
		r.launch(name, daemonConfig{Extra: extra}, natstest.FreeAddr(t), natstest.FreeAddr(t))
	}
	r.waitJoined(all...)
	r.waitStream("e1", 3, "")
	e3 = r.hosts["e3"]
	for _, name := range []string{"e1", "e2"} {
		r.hosts[name].signal(syscall.SIGSTOP)
	}
	bid = createBatch(t, r.q, clusterJobs)
	poll(t, 30*time.Second, "e3 to make two moves of each job unrecorded", func() (bool, string, error) {
		n, err := eventsWaiting(e3.daemon)
		return n >= 2*clusterJobs, strconv.Itoa(n) + " waiting", err
	})
	return r, e3, bid
}

// rejoinCutOff thaws e1 and e2, starts e3 (cutOffDaemon's, ended) again on
// its data folder, waits until it has published the n events it kept, and
// checks that the batch completes and every job's timeline is whole, each
// move once.
func (r *clusterRig) rejoinCutOff(e3 *clusterHost, bid, n string) {
	t := r.t
	t.Helper()
	all := []string{"e1", "e2", "e3"}
	for _, name := range []string{"e1", "e2"} {
		r.hosts[name].signal(syscall.SIGCONT)
	}
	r.launch("e3", daemonConfig{DataDir: e3.dataDir}, strings.TrimPrefix(e3.url, "nats://"), e3.cluster)
	r.waitJoined("e3")
	r.hosts["e3"].waitLog(60*time.Second, "events: published "+n+" events kept at the last stop")
	jids := r.finish([]string{bid}, clusterJobs)[bid]
	r.waitEventsTaken(all...)
	evs, err := r.replay(r.hosts["e1"].url, bid)
	if err != nil {
		t.Fatal(err)
	}
	assertExactlyOnce(t, evs, bid, jids)
	t.Logf("e3 kept %s events; replay of %s: %d events, per host %v", n, bid, len(evs), perHost(evs))
	for _, name := range all {
		r.hosts[name].stop(30 * time.Second)
		r.hosts[name].assertNoLoss()
	}
}

// keptInFile is how many events the file of kept events in dataDir holds
// (0 without one): a header line, then one an event.
func keptInFile(t *testing.T, dataDir string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dataDir, "events-kept.jsonl"))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), "\n") - 1
}

// eventsWaiting is the daemon's ingestq_events_waiting, from its /metrics.
func eventsWaiting(d *daemon) (int, error) { return eventsMetric(d, "ingestq_events_waiting") }

// eventsMetric is the daemon's gauge name, from its /metrics.
func eventsMetric(d *daemon, name string) (int, error) {
	m := regexp.MustCompile(`http=(http://\S+)`).FindStringSubmatch(d.logText())
	if m == nil {
		d.t.Fatalf("no http= in %s's log", d.name)
	}
	req, err := http.NewRequest("GET", m[1]+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	if d.metricsToken != "" {
		req.Header.Set("Authorization", "Bearer "+d.metricsToken)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	w := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindSubmatch(body)
	if w == nil {
		return 0, fmt.Errorf("no %s in %s's metrics", name, d.name)
	}
	f, err := strconv.ParseFloat(string(w[1]), 64)
	return int(f), err
}
