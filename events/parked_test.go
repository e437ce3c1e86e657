package events

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"
)

// parkingConfig is a bus whose events are sent again for a second, each
// copy waiting 300 ms for its answer, and whose probe of a silent stream
// comes every probe.
func parkingConfig(dir string, probe time.Duration) Config {
	return Config{DataDir: dir, Listen: "127.0.0.1:0", Queue: "q-1", ackTimeout: 300 * time.Millisecond,
		resendFor: time.Second, parkedProbe: probe}
}

// publishSilenced publishes a move of jid-1 to each of tos on a bus whose
// stream answers nothing, waiting for each one's send, and returns the
// events and their waiters.
func publishSilenced(t *testing.T, bus *Bus, sent <-chan string, tos ...string) ([]Event, []<-chan struct{}) {
	t.Helper()
	var evs []Event
	var waiters []<-chan struct{}
	for _, to := range tos {
		e := Event{Kind: KindJob, ID: "move-" + to, BatchID: "bid-1", JobID: "jid-1", To: to, Host: "test-host",
			Time: time.Date(2026, 11, 27, 12, 0, len(evs), 0, time.UTC)}
		evs = append(evs, e)
		waiters = append(waiters, bus.PublishAcked(e))
		receiveSent(t, sent, e.ID)
	}
	return evs, waiters
}

// waitParkedOrLost waits until n events are parked or counted lost: past
// resendFor, each is one or the other.
func waitParkedOrLost(t *testing.T, bus *Bus, n int) Stats {
	t.Helper()
	waitFor(t, "the events past resendFor parked or counted lost", func() bool {
		s := bus.Stats()
		return s.Parked+int(s.Lost) == n
	})
	return bus.Stats()
}

// A stream silent for longer than resendFor (a daemon cut off from its
// quorum) and then back: the events past resendFor are held, not counted
// lost, their waiters told, and sent again at the next acknowledgement;
// one the stream had stored before (its acknowledgement lost: here stored
// under another ID, as the stream sees it past its duplicate window) is
// replayed once. Before, the three were counted lost and gone.
func TestParkedEventsAreSentWhenTheStreamAnswersAgain(t *testing.T) {
	t.Parallel()
	bus, logs := openBus(t, parkingConfig(t.TempDir(), time.Hour)) // no probe: the acknowledgement sends them
	sent, back := silenceStreamUntil(t, bus)
	moves, waiters := publishSilenced(t, bus, sent, "Downloading", "Processing", "Storing")
	if s := waitParkedOrLost(t, bus, 3); s.Lost != 0 || s.Parked != 3 || s.Waiting != 3 {
		t.Fatalf("past resendFor: %+v, want 3 parked and waiting, none lost", s)
	}
	for _, w := range waiters {
		receive(t, w, "the waiter of a parked event")
	}
	if n := logs.containing("holding them until it takes events again"); n != 1 {
		t.Errorf("%d lines saying events are held, want 1", n)
	}

	back()
	storePastTheWindow(t, bus.Conn(), moves[0])
	receive(t, bus.PublishAcked(Event{Kind: KindJob, ID: "move-Recording", BatchID: "bid-1", JobID: "jid-1", To: "Recording"}),
		"the acknowledgement of a move published once the stream is back")
	waitFor(t, "the parked events stored", func() bool { return bus.Stats().Published == 4 })
	if s := bus.Stats(); s.Published+s.Kept+s.Lost != 4 || s.Parked != 0 || s.Waiting != 0 {
		t.Errorf("once the stream is back: %+v, want the 4 events given published, none parked or waiting", s)
	}
	if n := logs.count(slog.LevelInfo, "events: the stream takes events again; sent again events held until it did"); n != 1 {
		t.Errorf("%d lines saying the held events were sent again, want 1", n)
	}
	s, err := bus.js.Stream(t.Context(), DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CachedInfo().State.Msgs; n != 5 {
		t.Errorf("the stream holds %d messages, want 5 (move-Downloading twice)", n)
	}
	got := ids(replay(t, bus.Conn(), Filter{}))
	want := []string{"move-Downloading", "move-Processing", "move-Recording", "move-Storing"}
	if !slices.Equal(slices.Sorted(slices.Values(got)), want) {
		t.Errorf("replay: %v, want each move once: %v", got, want)
	}
}

// With nothing published once the stream is back, the probe finds it
// taking events and sends the parked ones again.
func TestParkedEventsAreSentAtAProbe(t *testing.T) {
	t.Parallel()
	bus, _ := openBus(t, parkingConfig(t.TempDir(), 100*time.Millisecond))
	sent, back := silenceStreamUntil(t, bus)
	moves, _ := publishSilenced(t, bus, sent, "Downloading", "Processing")
	if s := waitParkedOrLost(t, bus, 2); s.Lost != 0 {
		t.Fatalf("past resendFor: %+v, want 2 parked, none lost", s)
	}
	back()
	waitFor(t, "the parked events stored", func() bool { return bus.Stats().Published == 2 })
	if got := ids(replay(t, bus.Conn(), Filter{})); !slices.Equal(slices.Sorted(slices.Values(got)), ids(moves)) {
		t.Errorf("replay: %v, want %v once each", got, ids(moves))
	}
}

// Closed while events are parked, the bus keeps them in the file with the
// rest, and the next start publishes them. Before, they were counted lost
// while it ran, and the file did not have them.
func TestParkedEventsAreKeptAtClose(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := parkingConfig(dir, time.Hour)
	bus, _ := openBus(t, cfg)
	sent := silenceStream(t, bus)
	moves, _ := publishSilenced(t, bus, sent, "Downloading", "Processing", "Storing")
	if s := waitParkedOrLost(t, bus, 3); s.Lost != 0 {
		t.Fatalf("past resendFor: %+v, want 3 parked, none lost", s)
	}
	if err := bus.Close(); err != nil {
		t.Fatal(err)
	}
	if s := bus.Stats(); s.Kept != 3 || s.Published+s.Kept+s.Lost != 3 || s.Parked != 0 || s.Waiting != 0 {
		t.Errorf("after Close: %+v, want the 3 parked events kept, none waiting", s)
	}
	if _, kept := keptLines(t, dir); !slices.Equal(ids(kept), ids(moves)) {
		t.Fatalf("kept at Close: %v, want %v", ids(kept), ids(moves))
	}

	rec := &logRecorder{}
	cfg.Logger, cfg.Host = slog.New(rec), "test-host"
	next, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = next.Close() })
	waitFor(t, "the kept events published", func() bool {
		return rec.count(slog.LevelInfo, "events: published 3 events kept at the last stop") == 1
	})
	if got := ids(replay(t, next.Conn(), Filter{})); !slices.Equal(got, ids(moves)) {
		t.Errorf("replay after the next start: %v, want %v", got, ids(moves))
	}
}

// Parked events are bounded by the kept file's cap: past it, events are
// counted lost, said once; Close keeps those held, and every event given
// is accounted for.
func TestParkedEventsPastTheCapAreCountedLost(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := parkingConfig(dir, time.Hour)
	tos := []string{"Estimating", "Processing", "Downloaded", "Validating"} // one length: two fit
	line := eventLine(t, Event{Kind: KindJob, ID: "move-" + tos[0], BatchID: "bid-1", JobID: "jid-1", To: tos[0],
		Host: "test-host", Time: time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)})
	cfg.keptMax = 2 * (len(line) + 1)
	bus, logs := openBus(t, cfg)
	sent := silenceStream(t, bus)
	publishSilenced(t, bus, sent, tos...)
	if s := waitParkedOrLost(t, bus, 4); s.Parked != 2 || s.Lost != 2 {
		t.Fatalf("past resendFor: %+v, want 2 parked, 2 lost past the cap", s)
	}
	if n := logs.containing("events past it are counted lost until the stream takes events"); n != 1 {
		t.Errorf("%d lines saying the cap is reached, want 1", n)
	}
	if err := bus.Close(); err != nil {
		t.Fatal(err)
	}
	if s := bus.Stats(); s.Kept != 2 || s.Lost != 2 || s.Published+s.Kept+s.Lost != 4 {
		t.Errorf("after Close: %+v, want 2 kept, 2 lost", s)
	}
	if _, kept := keptLines(t, dir); len(kept) != 2 {
		t.Errorf("kept at Close: %v, want the 2 parked", ids(kept))
	}
}

// While events are parked /readyz's check says how many are held and what
// becomes of them, and the counts have them among those waiting.
func TestRecordingCountsParkedEvents(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bus := New(Config{DataDir: dir, Host: "test-host", Logger: discardLogger()})
	e := Event{Kind: KindJob, ID: "move-held", JobID: "jid-1", To: "Pending"}
	held, _, _ := bus.parked.add(parkedEvent{m: outMsg{subject: e.Subject(), id: e.ID, data: []byte(eventLine(t, e))},
		first: time.Now().Add(-time.Hour)}, keptMaxBytes)
	if !held {
		t.Fatal("an event within the cap was not held")
	}
	err := bus.Recording()
	if err == nil || !strings.Contains(err.Error(), "taken none of 1 events for 1h0m0s") ||
		!strings.Contains(err.Error(), "then held until the stream takes events (1 held: kept at a stop, lost if the process is killed; past 64 MiB, counted lost)") {
		t.Errorf("Recording: %v, want it to say the held event", err)
	}
	if s := bus.Stats(); s.Parked != 1 || s.Waiting != 1 {
		t.Errorf("%+v, want 1 parked, waiting", s)
	}
	if err := bus.Close(); err != nil {
		t.Fatal(err)
	}
	if _, kept := keptLines(t, dir); !slices.Equal(ids(kept), []string{"move-held"}) {
		t.Errorf("kept at Close: %v, want [move-held]", ids(kept))
	}
}

// A member cut off from its cluster's quorum for longer than resendFor
// (the two others stopped, nobody telling it) holds its moves; once the
// others are back where they were, it sends them again without a stop (at
// the stream's leader election, or its probe), and the stream holds every
// move once. Before, they were counted lost as it ran, for good.
func TestMemberCutOffPastResendForRecordsItsMovesWhenTheQuorumReturns(t *testing.T) {
	t.Parallel()
	// The probe, too: a stream leader that kept its place through the
	// split announces no election when its quorum returns.
	fast := func(cfg *Config) {
		cfg.ackTimeout, cfg.resendFor, cfg.parkedProbe = time.Second, 2*time.Second, 500*time.Millisecond
	}
	const cutOff = 4
	a, b, c, rec := cutOffMember(t, fast, cutOff)
	if s := waitParkedOrLost(t, c.Bus, cutOff); s.Lost != 0 {
		t.Fatalf("c past resendFor: %+v, want its %d moves parked, none lost", s, cutOff)
	}

	// Back where they were, as a healed split: c's routes come up again
	// by themselves, nothing tells c.
	again := func(m *member) func(*Config) {
		return func(cfg *Config) { fast(cfg); cfg.DataDir, cfg.Cluster = m.cfg.DataDir, m.cfg.Cluster }
	}
	openMemberWith(t, "a", again(a), c)
	openMemberWith(t, "b", again(b), c)
	waitFor(t, "c's parked moves recorded", func() bool { return c.Stats().Published == 2+cutOff })
	if s := c.Stats(); s.Lost != 0 || s.Parked != 0 || s.Waiting != 0 {
		t.Errorf("c once the quorum is back: %+v, want every move published, none lost or waiting", s)
	}
	if rec.count(slog.LevelInfo, "events: the stream takes events again; sent again events held until it did") == 0 {
		t.Error("c did not say it sent its held events again")
	}
	// The stream's count, not a replay: a replay's consumer just after the
	// quorum returned was refused (503) or never delivered in 2 of 6 runs.
	if n := streamInfo(t, c).State.Msgs; n != 2+cutOff {
		t.Errorf("the stream holds %d messages once the quorum is back, want c's %d, each once", n, 2+cutOff)
	}
}

// More events held than one turn sends (parkedPerTurn) go in several
// turns once the stream is back, and their resend is said once. Before, each
// turn said it, one line for each answer that let a few more go: with
// 268,000 held, thousands of lines.
func TestManyParkedEventsSentAgainAreSaidOnce(t *testing.T) {
	t.Parallel()
	bus, logs := openBus(t, parkingConfig(t.TempDir(), 100*time.Millisecond))
	_, back := silenceStreamUntil(t, bus)
	const n = parkedPerTurn + 200
	for i := range n {
		bus.Publish(Event{Kind: KindJob, BatchID: "bid-1", JobID: fmt.Sprintf("jid-%d", i), To: "Downloading"})
	}
	if s := waitParkedOrLost(t, bus, n); s.Lost != 0 {
		t.Fatalf("past resendFor: %+v, want %d parked, none lost", s, n)
	}
	back()
	waitFor(t, "the parked events stored", func() bool { return bus.Stats().Published == n })
	if got := logs.count(slog.LevelInfo, "events: the stream takes events again; sent again events held until it did"); got != 1 {
		t.Errorf("%d lines saying the held events were sent again, want 1", got)
	}
}

// A job's moves parked during a split reach the stream after the moves
// made after them (sent at once, or when their pause ended), yet a job's
// timeline shows each in its place: Replay marks a kept copy, and
// PlaceRecovered and Timeline place it as they place a recovered event.
// Before, the API's and the dashboard's job page and `events replay --job`
// showed the job leaving Storing before it entered Processing.
func TestParkedMovesArePlacedInTheirJobsTimeline(t *testing.T) {
	t.Parallel()
	bus, _ := openBus(t, parkingConfig(t.TempDir(), time.Hour)) // no probe: the next acknowledgement sends them
	sent, back := silenceStreamUntil(t, bus)
	at := func(s int) time.Time { return time.Date(2026, 11, 27, 12, 0, s, 0, time.UTC) }
	move := func(from, to string, s int) Event {
		return Event{Kind: KindJob, ID: "move-" + to, BatchID: "bid-1", JobID: "jid-1", From: from, To: to, Host: "test-host", Time: at(s)}
	}
	for _, e := range []Event{move("Downloading", "Processing", 1), move("Processing", "Storing", 2)} {
		bus.Publish(e)
		receiveSent(t, sent, e.ID)
	}
	if s := waitParkedOrLost(t, bus, 2); s.Lost != 0 {
		t.Fatalf("past resendFor: %+v, want 2 parked, none lost", s)
	}
	back()
	receive(t, bus.PublishAcked(move("Storing", "Recording", 3)), "the acknowledgement of the move made once the stream is back")
	waitFor(t, "the parked moves stored", func() bool { return bus.Stats().Published == 3 })

	evs := replay(t, bus.Conn(), Filter{JobID: "jid-1"})
	if got := ids(evs); len(got) != 3 || got[0] != "move-Recording" {
		t.Fatalf("the stream's order: %v, want the move made once the stream was back first, then the 2 parked", got)
	}
	want := []string{"move-Processing", "move-Storing", "move-Recording"}
	if got := ids(PlaceRecovered(slices.Clone(evs))); !slices.Equal(got, want) {
		t.Errorf("the job's timeline (API, dashboard): %v, want %v", got, want)
	}
	if got := ids(Timeline(evs)); !slices.Equal(got, want) {
		t.Errorf("the job's timeline (events replay --job): %v, want %v", got, want)
	}
}
