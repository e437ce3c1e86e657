//go:build linux

package main_test

import (
	"testing"
	"time"
)

// The daemon whose server leads the event stream is SIGTERMed mid-batch
// (a rolling restart): it hands the stream over before its server stops,
// and every listener left replays every job's timeline. That the others'
// events are then answered without a resend is the events package's
// TestClusterLeaderStopElectsAnotherFirst: here, among three processes, a
// publish failing as the old leader steps down is sent again at once (1 run
// in 8), which is the resend doing its work.
// Before, the server handed the leadership over only as it shut down, and
// a hand-over that did not take left the stream without a leader for 4 to
// 9 s (decision 923).
func TestNATSClusterLeaderSIGTERMHandsOver(t *testing.T) {
	t.Parallel()
	r := newClusterRig(t)
	const jobs = 150
	victim, bid1, jids1, bid2 := r.leaderMidBatch(jobs)
	r.hosts[victim].stop(30 * time.Second)
	if lines := r.hosts[victim].logLines("handed the event stream's leadership over before stopping"); len(lines) == 0 {
		t.Errorf("%s, the stream's leader, stopped without handing it over:\n%s", victim, tail(r.hosts[victim].logText(), 30))
	}
	left, jids2 := r.batchDoneWithout(victim, bid2, jobs)
	t.Logf("SIGTERMed %s, whose server led the stream, mid-batch; %s leads it now", victim, r.streamInfo(left[0]).Cluster.Leader)
	r.assertEveryTimeline(map[string][]string{bid1: jids1, bid2: jids2}, r.listeners(left...))
}
