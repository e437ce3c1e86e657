package events

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/ingestq/ingestq/internal/natstest"
)

// A daemon that recorded alone and then joins a cluster whose meta leader
// it cannot reach for longer than its patience (its peer started minutes
// later) gives up settling, and its retries back off. A move it makes
// meanwhile goes into nothing (no stream yet), is sent again, parked, and
// recorded once the stream is there. A job's later move,
// recorded meanwhile by the peer once it is up, reaches the stream before
// the retry moves what was recorded alone: the job's timeline still has
// its moves in the order made, each once, and "joined the cluster" is said
// once, by the retry. Before, the moved copies were not marked late, and
// the timeline had the job leave Processing before it entered it.
func TestAloneEventsMovedByARetryKeepTheirPlaceInTheTimeline(t *testing.T) {
	t.Parallel()
	rec := &logRecorder{}
	a := openMemberWith(t, "a", func(cfg *Config) {
		cfg.settleWait, cfg.resendFor, cfg.parkedProbe = time.Second, 2*time.Second, 200*time.Millisecond
		cfg.Logger = slog.New(rec)
	})
	at := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
	entered := Event{Kind: KindJob, ID: "move-entered", BatchID: "bid-1", JobID: "jid-1", From: "Queued", To: "Processing", Time: at}
	left := Event{Kind: KindJob, ID: "move-left", BatchID: "bid-1", JobID: "jid-1", From: "Processing", To: "Storing", Time: at.Add(time.Second)}
	// Of a job of its own: when b's stream comes up, a's probe may send it
	// before b's move, and a late event is placed only before its job's
	// move out of the state it entered.
	parked := Event{Kind: KindJob, ID: "move-parked", BatchID: "bid-1", JobID: "jid-2", From: "Queued", To: "Processing", Time: at.Add(2 * time.Second)}
	a.Publish(entered)
	flush(t, a.Bus)

	bCluster := natstest.FreeAddr(t)
	bRoute, err := RouteURL(bCluster)
	if err != nil {
		t.Fatal(err)
	}
	a.SetRoutes([]string{bRoute}) // b is not up: no meta leader
	// The retries back off: 0.5, 1, 2, 4, then 8 s. b joins within the
	// wait before the fifth retry, well past a's patience.
	const notSettled = "events: NATS cluster not settled; trying again"
	waitFor(t, "a's first try to fail", func() bool { return rec.count(slog.LevelWarn, notSettled) >= 1 })
	a.Publish(parked)
	waitFor(t, "a's fifth try to fail", func() bool { return rec.count(slog.LevelWarn, notSettled) >= 5 })
	if s := a.Stats(); s.Parked != 1 || s.Lost != 0 {
		t.Errorf("a without a stream past resendFor: %+v, want its move parked", s)
	}
	failed := time.Now()
	b := openMemberWith(t, "b", func(cfg *Config) { cfg.Cluster = bCluster }, a)
	b.Publish(left)
	flush(t, b.Bus)
	if got := replay(t, b.Conn(), Filter{JobID: "jid-1"}); slices.Contains(ids(got), entered.ID) {
		t.Fatalf("the stream before a's retry: %v, want no %s (b took %v; a's retry is 8 s after its fifth failure)",
			ids(got), entered.ID, time.Since(failed))
	}

	waitFor(t, "a's retry to move what it recorded alone, and its parked move", func() bool {
		return len(replay(t, b.Conn(), Filter{BatchID: "bid-1"})) >= 3
	})
	got := PlaceRecovered(replay(t, b.Conn(), Filter{JobID: "jid-1"}))
	if want := []string{entered.ID, left.ID}; !slices.Equal(ids(got), want) {
		t.Errorf("job's timeline: %v, want %v", ids(got), want)
	}
	if got := ids(replay(t, b.Conn(), Filter{JobID: "jid-2"})); !slices.Equal(got, []string{parked.ID}) {
		t.Errorf("a's parked move in the stream: %v, want it once", got)
	}
	if s := a.Stats(); s.Parked != 0 || s.Lost != 0 {
		t.Errorf("a once the stream takes events: %+v, want nothing parked or lost", s)
	}
	if n := rec.count(slog.LevelInfo, "events: embedded NATS server joined the cluster"); n != 1 {
		t.Errorf(`a said "joined the cluster" %d times, want once`, n)
	}
	if n := rec.count(slog.LevelWarn, notSettled); n > 7 {
		t.Errorf("a warned %q %d times, want at most 7", notSettled, n)
	}
}
