package events

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
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

// parksSoon has a cluster member (cutOffMember) park an event its stream
// does not take within 3 s of its first send: 1 s for the ack, 2 s of
// resends.
func parksSoon(cfg *Config) { cfg.ackTimeout, cfg.resendFor = time.Second, 2*time.Second }

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

// waitParkedOrLost waits until n events are parked, superseded or counted
// lost: past resendFor, each is one of them.
func waitParkedOrLost(t *testing.T, bus *Bus, n int) Stats {
	t.Helper()
	waitFor(t, "the events past resendFor parked, superseded or counted lost", func() bool {
		s := bus.Stats()
		return s.Parked+int(s.Lost+s.Superseded) == n
	})
	return bus.Stats()
}

// The lines that say the events held and sent again.
const (
	heldLine   = "holding them until it takes events again"
	resentLine = "events: the stream takes events again; sent again events held until it did"
)

// resentOncePerHold waits until the resend of the events held is said once
// for each time their hold is, and returns how many times: the two lines
// take turns, so a drain of many turns says the resend once, and a copy
// sent again and held again (unanswered within its ack timeout) says the
// hold, then the resend, again. A turn's line follows its sends, whose
// answers may come first.
func resentOncePerHold(t *testing.T, logs *logRecorder) int {
	t.Helper()
	waitFor(t, "as many lines saying the held events were sent again as saying they were held", func() bool {
		return logs.count(slog.LevelInfo, resentLine) == logs.containing(heldLine)
	})
	return logs.containing(heldLine)
}

// parkedCopy is e as the bus parks it, its first failure at first.
func parkedCopy(t *testing.T, e Event, first time.Time) parkedEvent {
	t.Helper()
	return parkedEvent{m: outMsg{subject: e.Subject(), id: e.ID, data: []byte(eventLine(t, e))}, first: first, at: e.Time}
}

// replaysOnceEach checks that a replay of bus's stream has each event of
// want once, in any order, and nothing else.
func replaysOnceEach(t *testing.T, bus *Bus, want []string) {
	t.Helper()
	got := ids(replay(t, bus.Conn(), Filter{}))
	if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Errorf("replay: %v, want each of %v once", got, want)
	}
}

// streamHolds is how many messages bus's stream holds.
func streamHolds(t *testing.T, bus *Bus) uint64 {
	t.Helper()
	s, err := bus.js.Stream(t.Context(), DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo().State.Msgs
}

// reopenPublishesKept opens a bus on cfg's data folder after Close kept
// want there, and checks that it publishes them first, and says so.
func reopenPublishesKept(t *testing.T, cfg Config, want []Event) {
	t.Helper()
	rec := &logRecorder{}
	cfg.Logger, cfg.Host = slog.New(rec), "test-host"
	next, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = next.Close() })
	waitFor(t, "the kept events published", func() bool {
		return rec.count(slog.LevelInfo, fmt.Sprintf("events: published %d events kept at the last stop", len(want))) == 1
	})
	if got := ids(replay(t, next.Conn(), Filter{})); !slices.Equal(got, ids(want)) {
		t.Errorf("replay after the next start: %v, want %v", got, ids(want))
	}
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
	if n := logs.containing(heldLine); n != 1 {
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
	resentOncePerHold(t, logs)
	if n := streamHolds(t, bus); n != 5 {
		t.Errorf("the stream holds %d messages, want 5 (move-Downloading twice)", n)
	}
	replaysOnceEach(t, bus, []string{"move-Downloading", "move-Processing", "move-Recording", "move-Storing"})
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
	replaysOnceEach(t, bus, ids(moves))
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
	reopenPublishesKept(t, cfg, moves)
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
	if !bus.parked.add(parkedCopy(t, e, time.Now().Add(-time.Hour)), keptMaxBytes).held {
		t.Fatal("an event within the cap was not held")
	}
	err := bus.Recording()
	if err == nil || !strings.Contains(err.Error(), "taken none of 1 events for 1h0m0s") ||
		!strings.Contains(err.Error(), "then held until the stream takes events (1 held, kept in "+filepath.Join(dir, keptFileName)+
			" for the next start, also after a kill; past 64 MiB, counted lost)") {
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
	if rec.count(slog.LevelInfo, resentLine) == 0 {
		t.Error("c did not say it sent its held events again")
	}
	// The stream's count, not a replay: a replay's consumer just after the
	// quorum returned was refused (503) or never delivered in 2 of 6 runs.
	if n := streamInfo(t, c).State.Msgs; n != 2+cutOff {
		t.Errorf("the stream holds %d messages once the quorum is back, want c's %d, each once", n, 2+cutOff)
	}
}

// heldPastOneTurn has a bus hold more events than one turn sends again
// (parkedPerTurn), its stream silent, and returns how many and what brings
// the stream back. Its probe comes every askTimeout + 1 s: one of the
// silent stream holds the publisher up to askTimeout, and one every 100 ms
// held it nearly always, the resends still queued after the first park
// crawling to theirs, one a probe, in a busy run (decision 1055).
func heldPastOneTurn(t *testing.T) (bus *Bus, logs *logRecorder, n int, back func()) {
	t.Helper()
	bus, logs = openBus(t, parkingConfig(t.TempDir(), askTimeout+time.Second))
	_, back = silenceStreamUntil(t, bus)
	n = parkedPerTurn + 200
	for i := range n {
		bus.Publish(Event{Kind: KindJob, BatchID: "bid-1", JobID: fmt.Sprintf("jid-%d", i), To: "Downloading"})
	}
	if s := waitParkedOrLost(t, bus, n); s.Lost != 0 {
		t.Fatalf("past resendFor: %+v, want %d parked, none lost", s, n)
	}
	return bus, logs, n, back
}

// More events held than one turn sends (parkedPerTurn) go in several
// turns once the stream is back, and their resend is said once. Before, each
// turn said it, one line for each answer that let a few more go: with
// 268,000 held, thousands of lines. Under load a copy may go unanswered
// within the 300 ms ack timeout and be held again: that says the hold and
// the resend once more each; a turn alone says nothing.
func TestManyParkedEventsSentAgainAreSaidOnce(t *testing.T) {
	t.Parallel()
	bus, logs, n, back := heldPastOneTurn(t)
	back()
	waitFor(t, "the parked events stored", func() bool { return bus.Stats().Published == uint64(n) })
	if held := resentOncePerHold(t, logs); held > 1 {
		t.Logf("copies sent again went unanswered within the ack timeout: held again %d times", held-1)
	}
	first := logs.attrs(resentLine)
	if still, _ := strconv.Atoi(first["still_held"]); first["events"] != strconv.Itoa(parkedPerTurn) || still < n-parkedPerTurn {
		t.Errorf("the first turn said %v, want %d events sent and at least %d still held: several turns", first,
			parkedPerTurn, n-parkedPerTurn)
	}
}

// Held events sent again to a stream that takes them no more (an answer to
// one publish started the turn, then the stream stopped again) are held
// again, and that is said before their next resend is: the hold and the
// resend take turns. Before, a copy held again while more were held said
// nothing, and the next turn said "the stream takes events again" a second
// time, a recovery with no outage said before it (decisions 1062, 1120).
func TestHeldEventsHeldAgainAreSaidBeforeTheirNextResend(t *testing.T) {
	t.Parallel()
	// A turn leaves some held, so the set is not empty when its copies come back.
	bus, logs, n, back := heldPastOneTurn(t)
	bus.unparkSoon() // as an acknowledgement does: one turn, to the still silent stream
	waitFor(t, "the turn's unanswered copies held again", func() bool {
		return logs.count(slog.LevelInfo, resentLine) == 1 && bus.Stats().Parked == n
	})
	if got := logs.containing(heldLine); got != 2 {
		t.Fatalf("%d lines saying the events are held, once sent again and held again, want 2", got)
	}

	back()
	receive(t, bus.PublishAcked(Event{Kind: KindJob, ID: "move-later", BatchID: "bid-1", JobID: "jid-later", To: "Downloading"}),
		"the acknowledgement of a move published once the stream is back")
	waitFor(t, "the held events stored", func() bool { return bus.Stats().Published == uint64(n+1) })
	if held := resentOncePerHold(t, logs); held < 2 {
		t.Errorf("%d lines saying the events are held, want 2 or more", held)
	}
}

// Events published while one is parked and the stream is silent are sent
// at once, not behind the probes, which a silent stream holds for
// askTimeout each: at most the probe under way comes first. Before, the
// publisher took a probe due or an event queued at random, each event
// queued waited a probe or more, and with probes due back to back 36 of
// TestManyParkedEventsSentAgainAreSaidOnce's 1,200 waited past 45 s to be
// parked.
func TestEventsQueuedAreSentBeforeAProbeOfASilentStream(t *testing.T) {
	t.Parallel()
	bus, _ := openBus(t, parkingConfig(t.TempDir(), 100*time.Millisecond))
	sent := silenceStream(t, bus)
	publishSilenced(t, bus, sent, "Downloading")
	if s := waitParkedOrLost(t, bus, 1); s.Parked != 1 {
		t.Fatalf("past resendFor: %+v, want 1 parked", s)
	}
	receiveSent(t, sent, "") // a probe under way: its publish carries no event ID
	const n = 20
	start := time.Now()
	for i := range n {
		bus.Publish(Event{Kind: KindJob, ID: fmt.Sprintf("later-%d", i), BatchID: "bid-1", JobID: fmt.Sprintf("jid-%d", i),
			To: "Downloading"})
	}
	for i := range n {
		receiveSent(t, sent, fmt.Sprintf("later-%d", i))
	}
	// Waiting for a probe each, they took n asks (40 s); one probe at most
	// is 2 asks. The bound is wider than that, for a loaded machine.
	if within := 5 * askTimeout; time.Since(start) > within {
		t.Errorf("%d events published while one is parked were sent in %v, want within %v (one probe of the silent stream at most, not one each)",
			n, time.Since(start).Round(time.Millisecond), within)
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

// progressEvent is job's progress event n, made job milliseconds after
// second n: each of one length, as their lines in the kept file are.
func progressEvent(job, n int) Event {
	return Event{Kind: KindProgress, ID: fmt.Sprintf("progress-%d-%02d", job, n), BatchID: "bid-1",
		JobID: fmt.Sprintf("jid-%d", job), Host: "test-host", Time: time.Date(2026, 11, 27, 12, 0, n, job*1e6, time.UTC),
		Attrs: map[string]any{"done": 1000 + n}}
}

// jobMove is job's move into to, made job milliseconds after second n.
func jobMove(job int, to string, n int) Event {
	return Event{Kind: KindJob, ID: fmt.Sprintf("move-%d-%s", job, to), BatchID: "bid-1", JobID: fmt.Sprintf("jid-%d", job),
		To: to, Host: "test-host", Time: time.Date(2026, 11, 27, 12, 0, n, job*1e6, time.UTC)}
}

// downloads is three jobs' downloads: each job's move into Downloading,
// its progress events 1 to last, and its move into Processing, in the
// order made, the jobs' interleaved.
func downloads(last int) []Event {
	var evs []Event
	for n := 0; n <= last+1; n++ {
		for job := 1; job <= 3; job++ {
			switch n {
			case 0:
				evs = append(evs, jobMove(job, "Downloading", n))
			case last + 1:
				evs = append(evs, jobMove(job, "Processing", n))
			default:
				evs = append(evs, progressEvent(job, n))
			}
		}
	}
	return evs
}

// heldIDs lists the IDs of the events parked, sorted.
func heldIDs(bus *Bus) []string {
	bus.parked.mu.Lock()
	defer bus.parked.mu.Unlock()
	var out []string
	for _, e := range bus.parked.events {
		out = append(out, e.m.id)
	}
	return slices.Sorted(slices.Values(out))
}

// latestOfEachJob is evs less the progress events followed by a later one
// of their job: what is held of them.
func latestOfEachJob(evs []Event) []Event {
	last := map[string]int{}
	for i, e := range evs {
		if e.Kind == KindProgress {
			last[e.JobID] = i
		}
	}
	var out []Event
	for i, e := range evs {
		if e.Kind != KindProgress || last[e.JobID] == i {
			out = append(out, e)
		}
	}
	return out
}

// Three downloads through a split past resendFor, each job's 20 progress
// events among its moves: only the latest progress event of each job is
// held, the others superseded (not lost), within a cap that holds the
// moves and one progress event a job only. Once the stream is back it
// holds every move and each job's latest progress. Before, every progress
// event was held and they filled the cap: moves past it were counted lost.
func TestParkedProgressKeepsTheLatestOfEachJob(t *testing.T) {
	t.Parallel()
	cfg := parkingConfig(t.TempDir(), 100*time.Millisecond)
	evs := downloads(20)
	want := latestOfEachJob(evs)
	for _, e := range want {
		cfg.keptMax += len(eventLine(t, e)) + 1 // the 60 progress events would pass it 6 times over
	}
	bus, _ := openBus(t, cfg)
	sent, back := silenceStreamUntil(t, bus)
	for _, e := range evs {
		bus.Publish(e)
	}
	receiveSent(t, sent, evs[len(evs)-1].ID)
	if s := waitParkedOrLost(t, bus, len(evs)); s.Lost != 0 || s.Parked != len(want) || s.Superseded != uint64(len(evs)-len(want)) ||
		s.Published+s.Kept+s.Lost+s.Superseded+uint64(s.Waiting) != uint64(len(evs)) {
		t.Errorf("past resendFor: %+v, want the %d moves and latest progress events held, the %d others superseded, "+
			"none lost, %d given", s, len(want), len(evs)-len(want), len(evs))
	}
	if got, wantIDs := heldIDs(bus), slices.Sorted(slices.Values(ids(want))); !slices.Equal(got, wantIDs) {
		t.Errorf("held: %v, want %v", got, wantIDs)
	}

	back()
	waitFor(t, "the held events stored", func() bool { return bus.Stats().Published == uint64(len(want)) })
	if s := bus.Stats(); s.Lost != 0 || s.Waiting != 0 || s.Published+s.Kept+s.Lost+s.Superseded != uint64(len(evs)) {
		t.Errorf("once the stream is back: %+v, want %d published and %d superseded, nothing waiting", s, len(want), len(evs)-len(want))
	}
	if n := streamHolds(t, bus); n != uint64(len(want)) {
		t.Errorf("the stream holds %d messages, want %d: the moves and each job's latest progress", n, len(want))
	}
	replaysOnceEach(t, bus, ids(want))
}

// Closed with progress events held and others still on their way (sent
// after the held ones, not yet past resendFor), the bus keeps each job's
// latest progress event only, with every move, and the next start
// publishes them. Before, the file had every progress event.
func TestProgressKeptAtCloseIsTheLatestOfEachJob(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := parkingConfig(dir, time.Hour)
	bus, _ := openBus(t, cfg)
	sent := silenceStream(t, bus)
	held := downloads(5)[:3*6] // the moves into Downloading and progress 1 to 5
	for _, e := range held {
		bus.Publish(e)
	}
	receiveSent(t, sent, held[len(held)-1].ID)
	waitParkedOrLost(t, bus, len(held))
	var later []Event
	for n := 6; n <= 8; n++ {
		for job := 1; job <= 3; job++ {
			later = append(later, progressEvent(job, n))
		}
	}
	for _, e := range later {
		bus.Publish(e)
	}
	receiveSent(t, sent, later[len(later)-1].ID)
	if s := bus.Stats(); s.Parked != 6 {
		t.Errorf("before Close: %+v, want the 3 moves and 3 progress events held, the later ones on their way", s)
	}
	if err := bus.Close(); err != nil {
		t.Fatal(err)
	}
	given := append(held, later...)
	want := latestOfEachJob(given)
	if s := bus.Stats(); s.Kept != uint64(len(want)) || s.Lost != 0 || s.Superseded != uint64(len(given)-len(want)) ||
		s.Published+s.Kept+s.Lost+s.Superseded != uint64(len(given)) || s.Waiting != 0 {
		t.Errorf("after Close: %+v, want %d kept, %d superseded, none lost", s, len(want), len(given)-len(want))
	}
	if _, kept := keptLines(t, dir); !slices.Equal(ids(kept), ids(want)) {
		t.Fatalf("kept at Close: %v, want %v", ids(kept), ids(want))
	}
	reopenPublishesKept(t, cfg, want)
}

// Of two progress events of a job held, the later by its time stays,
// wherever it came in the order parked (resends settle that), in the place
// of the first held; put back after a turn, an earlier one is superseded.
func TestParkingHoldsTheLaterProgressOfAJob(t *testing.T) {
	t.Parallel()
	var p parking
	hold := func(e Event, first time.Time) parked {
		t.Helper()
		return p.add(parkedCopy(t, e, first), keptMaxBytes)
	}
	start := time.Now()
	if r := hold(progressEvent(1, 5), start); !r.held || r.superseded != "" {
		t.Fatalf("the first progress of jid-1: %+v, want held", r)
	}
	hold(jobMove(2, "Processing", 6), start)
	if r := hold(progressEvent(1, 3), start); r.held || r.superseded != "progress-1-03" {
		t.Errorf("an earlier progress of jid-1 parked after a later one: %+v, want it superseded", r)
	}
	if r := hold(progressEvent(1, 7), start.Add(time.Minute)); !r.held || r.superseded != "progress-1-05" {
		t.Errorf("a later progress of jid-1: %+v, want it held in the place of progress-1-05", r)
	}
	taken := p.take(-1)
	if got := []string{taken[0].m.id, taken[1].m.id}; len(taken) != 2 || !slices.Equal(got, []string{"progress-1-07", "move-2-Processing"}) ||
		!taken[0].first.Equal(start) {
		t.Fatalf("taken: %+v, want progress-1-07 first, with the first failure of the one it replaced", taken)
	}
	hold(progressEvent(1, 9), start)
	if superseded := p.putBack(taken); !slices.Equal(superseded, []string{"progress-1-07"}) || p.len() != 2 {
		t.Errorf("put back under a later progress of jid-1: superseded %v, %d held, want progress-1-07 superseded, 2 held",
			superseded, p.len())
	}
}

// The hold is said at the first park since the resend was said (or ever),
// the resend at the first turn since the hold was said: once each an
// episode, in turns. Before, a job's progress event taking the place of the
// one event held said the hold again (the hold went by the set holding
// one), and a park while others were held said no hold, yet had the next
// turn say the resend again.
func TestParkingSaysTheHoldAndTheResendInTurns(t *testing.T) {
	t.Parallel()
	var p parking
	sayHeld := func(e Event) bool {
		t.Helper()
		r := p.add(parkedCopy(t, e, time.Now()), keptMaxBytes)
		if !r.held {
			t.Fatalf("%s: %+v, want held", e.ID, r)
		}
		return r.sayHeld
	}
	if !sayHeld(progressEvent(1, 5)) {
		t.Error("the first park: the hold not said")
	}
	if sayHeld(progressEvent(1, 7)) {
		t.Error("a later progress event of the one job held, in its place: the hold said again")
	}
	if sayHeld(jobMove(2, "Processing", 6)) || sayHeld(jobMove(3, "Processing", 8)) {
		t.Error("more events held: the hold said again")
	}
	turn := func(sent bool) (sayResent, sayHeld bool) {
		if sent {
			p.takeTurn(1)
		} else {
			p.putBack(p.takeTurn(1)) // its first send stalled: all put back
		}
		return p.turnEnded(sent)
	}
	if said, _ := turn(false); said {
		t.Error("a turn that sent none (its first send stalled): the resend said")
	}
	if said, _ := turn(true); !said {
		t.Error("the first turn: the resend not said")
	}
	if said, _ := turn(true); said {
		t.Error("the next turn of the same resend: said again")
	}
	if !sayHeld(jobMove(3, "Processing", 8)) { // taken, unanswered, held again while progress-1-07 is held
		t.Error("held again after the resend was said, another held: the hold not said")
	}
	if said, held := turn(true); !said || held {
		t.Errorf("the turn after the hold said again: resend said %v, hold said %v; want the resend alone", said, held)
	}

	// Held while a turn sends (a copy of an earlier turn unanswered, the
	// stream failing again): said at the turn's end, after its resend, not
	// taken for one the resend covers. Before, the turn's resend line was
	// the last said, and the hold of these events never was.
	sayHeld(jobMove(4, "Processing", 9))
	p.takeTurn(1)
	if sayHeld(jobMove(5, "Processing", 10)) {
		t.Error("held while a turn sends: the hold said before the turn's resend")
	}
	if said, held := p.turnEnded(true); !said || !held {
		t.Errorf("held while a turn sends: at its end resend said %v, hold said %v; want both", said, held)
	}
	if said, _ := turn(true); !said {
		t.Error("the turn after a hold said at a turn's end: the resend not said")
	}
	p.takeTurn(1)
	sayHeld(jobMove(6, "Processing", 11))
	if said, held := p.turnEnded(true); said || !held {
		t.Errorf("held while a later turn of a drain sends: resend said %v, hold said %v; want the hold alone", said, held)
	}
}

// A member cut off from its quorum is handed the routes it has (the
// daemon's ZooKeeper watch does so every minute): nothing changes, and its
// moves are parked past resendFor as ever. Before, the routes asked a
// reconfiguration, which waited for the stream to take events, holding the
// publisher: the moves were never sent again, parked or written.
func TestSameRoutesWhileCutOffHoldNothingUp(t *testing.T) {
	t.Parallel()
	const cutOff = 3
	a, b, c, _ := cutOffMember(t, parksSoon, cutOff)
	c.SetRoutes(routesOf([]*member{b, a}))
	if s := waitParkedOrLost(t, c.Bus, cutOff); s.Lost != 0 || s.Parked != cutOff {
		t.Errorf("c past resendFor: %+v, want its %d moves parked", s, cutOff)
	}
}

// A member cut off from its quorum while it reconfigures (its routes
// changed: a peer's node went; or its connection came back, onReconnect)
// waits for the stream no longer than its patience: the moves published
// meanwhile are then sent, sent again, parked past resendFor and written to
// its kept file. Before, the reconfiguration waited until the stream took
// events, holding the publisher for the whole split: nothing was sent,
// parked or written, and a kill lost every move.
func TestReconfigureWhileCutOffHoldsTheMovesNoLongerThanItsPatience(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		reconfigure func(a, b, c *member)
	}{
		{"routes changed", func(a, _, c *member) { c.SetRoutes(routesOf([]*member{a})) }},
		{"reconnected", func(_, _, c *member) { c.onReconnect(c.nc) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const patience = 2 * time.Second
			fast := func(cfg *Config) {
				cfg.ackTimeout, cfg.resendFor, cfg.settleWait = time.Second, 2*time.Second, patience
			}
			a, b, c, _ := cutOffMember(t, fast, 0)
			// Not before: a stream leader refuses a probe without its
			// quorum, until it steps down (within 20 s).
			waitFor(t, "c's stream to take no event of c's", func() bool { return !c.streamTakes(t.Context()) })
			tc.reconfigure(a, b, c)
			start := time.Now()
			var moves []Event
			for i, to := range []string{"Processing", "Storing", "Recording"} {
				moves = append(moves, jobMove(3, to, i))
				c.Publish(moves[i])
			}
			const cutOff = 3
			if s := waitParkedOrLost(t, c.Bus, cutOff); s.Lost != 0 || s.Parked != cutOff {
				t.Errorf("c past its patience and resendFor: %+v, want its %d moves parked", s, cutOff)
			}
			waitFor(t, "c's moves in its kept file", func() bool { return heldInFile(t, c.cfg.DataDir) == cutOff })
			if _, kept := keptLines(t, c.cfg.DataDir); !slices.Equal(slices.Sorted(slices.Values(ids(kept))), slices.Sorted(slices.Values(ids(moves)))) {
				t.Errorf("c's kept file: %v, want each of %v once", ids(kept), ids(moves))
			}
			t.Logf("c's %d moves parked and kept %v after they were published (patience %v, resendFor %v)",
				cutOff, time.Since(start).Round(time.Millisecond), patience, c.cfg.resendFor)
		})
	}
}
