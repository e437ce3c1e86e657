package cli_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// lostWait starts submit --wait of three objects on a daemon with no
// reactor (the batch stays Pending, read each poll) and returns it once it
// has printed its batch id.
func (d *daemon) lostWait(t *testing.T) (*background, string) {
	t.Helper()
	c := runBackground(t, "--zk", zktest.Shared(t).Addr, "--zk-root", d.root, "--nats", d.bus.ClientURL(),
		"submit", "--profile", "demo", "--wait", "passthrough:3")
	c.waitFor(t, "printed no batch id", func(out, _ string) bool { return strings.HasSuffix(out, "\n") })
	return c, d.onlyBatch().ID
}

// remove holds the batch bid (only a Held batch, of those not finished,
// can be deleted), then deletes it, as an operator would.
func (d *daemon) remove(t *testing.T, bid string) {
	t.Helper()
	for _, args := range [][]string{{"hold", "batch", bid}, {"delete", bid}} {
		_, _, code := d.cli(args...)
		wantCode(t, code, 0)
	}
}

// wantLost waits until the wait c ends (a minute at most, exit's bound),
// and wants exit 3 and stderr's last line to hold each of parts; it
// returns stderr.
func wantLost(t *testing.T, c *background, parts ...string) string {
	t.Helper()
	_, errb, code := c.exit(t)
	wantCode(t, code, 3)
	s := strings.TrimSuffix(errb, "\n")
	last := s[strings.LastIndex(s, "\n")+1:]
	for _, want := range parts {
		if !strings.Contains(last, want) {
			t.Errorf("last line %q: want %q", last, want)
		}
	}
	return errb
}

// A batch removed while submit --wait follows it ends the wait (exit 3),
// naming the batch and who removed it and when, as show does: the
// operator's delete is recorded. Before, the wait went on for ever: here
// exit's bound (a minute) failed the test; then it named who may have
// removed it, "by ingestq delete or cleanup, or by another program".
func TestSubmitWaitEndsWhenItsBatchIsRemoved(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	c, bid := d.lostWait(t)
	d.remove(t, bid)
	errb := wantLost(t, c, "ingestq: stopped waiting, its outcome unknown: batch "+bid+" was removed from the queue by ",
		" (delete); its history: ingestq events replay --batch "+bid)
	// The operator's hold is said as theirs, not as a collection's.
	if !strings.Contains(errb, "note: batch "+bid+" is Held (held by ") {
		t.Errorf("stderr %q: the operator's hold not said as theirs", errb)
	}
}

// A batch whose status stays unreadable ends the wait (exit 3), naming its
// node and the reader's words. Before, the wait went on for ever.
func TestSubmitWaitEndsWhenItsBatchIsUnreadable(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	c, bid := d.lostWait(t)
	_, err := d.conn.Set(d.root+"/batches/"+bid+"/status", []byte("{not json"), -1)
	d.ok(err)
	errb := wantLost(t, c, "ingestq: stopped waiting, its outcome unknown: batch "+bid+" cannot be read: ",
		"/batches/"+bid+"/status: bad JSON", "invalid character")
	if !strings.Contains(errb, "note: reading batch "+bid+" failed (/batches/"+bid+"/status: ") {
		t.Errorf("stderr %q: no note of the first unreadable read", errb)
	}
}

// A status unreadable for a moment (another program rewriting it) does not
// end the wait: the batch, readable again, is followed to its report.
func TestSubmitWaitRidesOutAMomentarilyUnreadableBatch(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	c, bid := d.lostWait(t)
	status := d.root + "/batches/" + bid + "/status"
	good, _, err := d.conn.Get(status)
	d.ok(err)
	_, err = d.conn.Set(status, []byte("{not json"), -1)
	d.ok(err)
	c.waitFor(t, "noted no unreadable read", func(_, errb string) bool { return strings.Contains(errb, "note: reading batch "+bid+" failed") })
	_, err = d.conn.Set(status, good, -1)
	d.ok(err)
	d.start()
	out, errb, code := c.exit(t)
	wantCode(t, code, 0)
	if !strings.Contains(out, "successful jobs: 3\n") || strings.Contains(errb, "stopped waiting") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", out, errb)
	}
}

// A batch removed right after it reports (cleanup --older-than 0 or
// Merritt's sweep between its Completed event and the report's read) ends
// the wait by its report: exit 0 for Completed, saying the report is gone
// and where its history is. Before, it exited 1, as a Failed batch does.
func TestSubmitWaitExitsByTheReportOfABatchRemovedAfterIt(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	c, bid := d.lostWait(t)
	d.remove(t, bid)
	d.bus.Publish(events.Event{Kind: events.KindBatch, BatchID: bid, From: "Held", To: "Completed"})
	_, errb, code := c.exit(t)
	wantCode(t, code, 0)
	for _, want := range []string{"ingestq: batch " + bid + " reported Completed, but its report cannot be read: batch " + bid +
		" was removed from the queue", "ingestq events replay --batch " + bid} {
		if !strings.Contains(errb, want) {
			t.Errorf("stderr %q: want %q", errb, want)
		}
	}
}

// A batch whose report event the wait did not hear (NATS reconnecting, its
// channel full), removed before the wait read it again, ends by the report
// the stream recorded: exit 0 for Completed, as when the event is heard.
// Here the event is recorded before the wait listens, so it never hears
// it. Before, the wait ended with exit 3, its outcome unknown.
func TestSubmitWaitEndsByARecordedReportItMissed(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	_, st, err := d.conn.Get(d.root + "/batches")
	d.ok(err)
	next := fmt.Sprintf("bid%010d", st.Cversion) // ZooKeeper's next sequence number under /batches
	d.bus.Publish(events.Event{Kind: events.KindBatch, BatchID: next, From: "Processing", To: "Completed"})
	d.flush()
	c, bid := d.lostWait(t)
	if bid != next {
		t.Fatalf("the wait's batch is %s, want %s", bid, next)
	}
	d.remove(t, bid)
	_, errb, code := c.exit(t)
	if code != 0 {
		t.Fatalf("exit %d, want 0; stderr %q", code, errb)
	}
	want := "ingestq: batch " + bid + " reported Completed, but its report cannot be read: batch " + bid + " was removed from the queue by "
	if !strings.Contains(errb, want) {
		t.Errorf("stderr %q: want %q", errb, want)
	}
}
