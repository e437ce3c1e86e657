//go:build linux

package main_test

import (
	"strings"
	"testing"
	"time"
)

// The daemon whose server leads the event stream is SIGTERMed mid-batch
// (a rolling restart): it hands the stream over before its server stops,
// and the others' events are answered without being sent again after
// their ack timeout; every listener left replays every job's timeline.
// Before, the server handed the leadership over only as it shut down, and
// a hand-over that did not take left the stream without a leader for 4 to
// 9 s (decision 923).
func TestNATSClusterLeaderSIGTERMHandsOver(t *testing.T) {
	t.Parallel()
	r := newClusterRig(t)
	const jobs = 150
	victim, bid1, jids1, bid2 := r.leaderMidBatch(jobs)
	stopped := time.Now()
	r.hosts[victim].stop(30 * time.Second)
	if lines := r.hosts[victim].logLines("handed the event stream's leadership over before stopping"); len(lines) == 0 {
		t.Errorf("%s, the stream's leader, stopped without handing it over:\n%s", victim, tail(r.hosts[victim].logText(), 30))
	}
	left, jids2 := r.batchDoneWithout(victim, bid2, jobs)
	for _, name := range left {
		if line := resentBeforeReroute(r.hosts[name].daemon, stopped); line != "" {
			t.Errorf("%s sent events again while the stream's leadership moved: %s", name, line)
		}
	}
	t.Logf("SIGTERMed %s, whose server led the stream, mid-batch; %s leads it now", victim, r.streamInfo(left[0]).Cluster.Leader)
	r.assertEveryTimeline(map[string][]string{bid1: jids1, bid2: jids2}, r.listeners(left...))
}

// resentBeforeReroute is d's first "sending them again" line logged after
// since and before its server is routed anew, the stopped daemon gone from
// ZooKeeper: what the leadership's move made it send again. The reroute
// that follows is a change of its own (twice here it was followed within
// a second or a few by one event sent again, after the new leader had
// taken the others): not the hand-over's.
func resentBeforeReroute(d *daemon, since time.Time) string {
	for _, line := range strings.Split(d.logText(), "\n") {
		at, err := time.Parse(time.RFC3339Nano, strings.SplitN(line, " ", 2)[0])
		switch {
		case err != nil || at.Before(since):
		case strings.Contains(line, "routes changed"):
			return ""
		case strings.Contains(line, "sending them again"):
			return line
		}
	}
	return ""
}
