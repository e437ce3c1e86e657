//go:build linux

package main_test

import (
	"fmt"
	"io"
	"net/http"
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
	r := newClusterRig(t)
	all := []string{"e1", "e2", "e3"} // every state each
	for _, name := range all {
		var extra []string
		if name != "e3" {
			extra = []string{"--zk-session-timeout", "40s"} // frozen, still in ZooKeeper
		}
		r.launch(name, daemonConfig{Extra: extra}, natstest.FreeAddr(t), natstest.FreeAddr(t))
	}
	r.waitJoined(all...)
	r.waitStream("e1", 3, "")
	e3 := r.hosts["e3"]
	for _, name := range []string{"e1", "e2"} {
		r.hosts[name].signal(syscall.SIGSTOP)
	}
	bid := createBatch(t, r.q, clusterJobs)
	poll(t, 30*time.Second, "e3 to make two moves of each job unrecorded", func() (bool, string, error) {
		n, err := eventsWaiting(e3.daemon)
		return n >= 2*clusterJobs, strconv.Itoa(n) + " waiting", err
	})
	e3.stop(30 * time.Second)
	kept := regexp.MustCompile(`events: kept (\d+) unacknowledged events in (\S+); the next start publishes them`).FindStringSubmatch(e3.logText())
	if kept == nil || !strings.HasPrefix(kept[2], e3.dataDir) {
		t.Fatalf("e3's stop did not keep its unacknowledged events in its data folder: %v", e3.logLines("unacknowledged"))
	}
	for _, name := range []string{"e1", "e2"} {
		r.hosts[name].signal(syscall.SIGCONT)
	}
	r.launch("e3", daemonConfig{DataDir: e3.dataDir}, strings.TrimPrefix(e3.url, "nats://"), e3.cluster)
	r.waitJoined("e3")
	r.hosts["e3"].waitLog(60*time.Second, "events: published "+kept[1]+" events kept at the last stop")
	jids := r.finish([]string{bid}, clusterJobs)[bid]
	r.waitEventsTaken(all...)
	evs, err := r.replay(r.hosts["e1"].url, bid)
	if err != nil {
		t.Fatal(err)
	}
	assertExactlyOnce(t, evs, bid, jids)
	t.Logf("e3 kept %s events at its stop; replay of %s: %d events, per host %v", kept[1], bid, len(evs), perHost(evs))
	for _, name := range all {
		r.hosts[name].stop(30 * time.Second)
		r.hosts[name].assertNoLoss()
	}
}

// eventsWaiting is the daemon's ingestq_events_waiting, from its /metrics.
func eventsWaiting(d *daemon) (int, error) {
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
	w := regexp.MustCompile(`(?m)^ingestq_events_waiting (\S+)$`).FindSubmatch(body)
	if w == nil {
		return 0, fmt.Errorf("no ingestq_events_waiting in %s's metrics", d.name)
	}
	f, err := strconv.ParseFloat(string(w[1]), 64)
	return int(f), err
}
