package events

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// keptLines reads the file of kept events in dir: its header and events.
func keptLines(t *testing.T, dir string) (keptHeader, []Event) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, keptFileName))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	var h keptHeader
	if err := json.Unmarshal([]byte(lines[0]), &h); err != nil {
		t.Fatalf("header %q: %v", lines[0], err)
	}
	var evs []Event
	for _, l := range lines[1:] {
		e, err := decode([]byte(l))
		if err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		evs = append(evs, e)
	}
	return h, evs
}

// writeKeptFile writes a file of kept events into dir: a header for queue
// and the lines as given.
func writeKeptFile(t *testing.T, dir, queue string, lines ...string) {
	t.Helper()
	head, err := json.Marshal(keptHeader{Format: 1, Queue: queue, Stream: DefaultStream, Host: "test-host"})
	if err != nil {
		t.Fatal(err)
	}
	body := string(head) + "\n" + strings.Join(lines, "\n")
	if err := os.WriteFile(filepath.Join(dir, keptFileName), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// eventLine is e as a line of the file, as published.
func eventLine(t *testing.T, e Event) string {
	t.Helper()
	data, err := marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// ids lists the events' IDs.
func ids(evs []Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.ID)
	}
	return out
}

// A daemon whose stream takes none of its events (silenceStream) keeps
// them at Close in its data folder, none counted lost; the next start on
// that folder publishes them first, under their IDs, and the file goes.
// Before, Close counted them lost and they were gone.
func TestUnacknowledgedEventsKeptAtCloseArePublishedAtNextStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := Config{DataDir: dir, Listen: "127.0.0.1:0", ackTimeout: 2 * time.Second, Queue: "q-1", QueueAt: "zk q-1"}
	bus, logs := openBus(t, cfg)
	sent := silenceStream(t, bus)
	var moves []Event
	var waiters []<-chan struct{}
	for i, to := range []string{"Downloading", "Processing", "Storing"} {
		e := Event{Kind: KindJob, ID: "move-" + to, BatchID: "bid-1", JobID: "jid-1", From: []string{"Pending", "Downloading", "Processing"}[i], To: to}
		moves = append(moves, e)
		waiters = append(waiters, bus.PublishAcked(e))
		receiveSent(t, sent, e.ID) // not a resend of the one before: under load it may come first
	}
	if err := bus.Close(); err != nil {
		t.Fatal(err)
	}
	for _, w := range waiters {
		receive(t, w, "the waiter of an event kept at Close")
	}
	if s := bus.Stats(); s.Lost != 0 || s.Published != 0 || s.Kept != 3 || s.Waiting != 0 {
		t.Errorf("after Close: %+v, want 3 kept, none lost, none waiting", s)
	}
	path := filepath.Join(dir, keptFileName)
	if w := "events: kept 3 unacknowledged events in " + path + "; the next start publishes them"; logs.count(slog.LevelWarn, w) != 1 {
		t.Errorf("no warning %q", w)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", path, fi.Mode().Perm())
	}
	h, kept := keptLines(t, dir)
	if h.Queue != "q-1" || h.Stream != DefaultStream || h.Events != 3 || !slices.Equal(ids(kept), ids(moves)) {
		t.Errorf("file: header %+v, events %v; want queue q-1, 3 events %v", h, ids(kept), ids(moves))
	}

	// The next start: what is published before Start comes after them.
	rec := &logRecorder{}
	cfg.Logger, cfg.Host = slog.New(rec), "test-host"
	next := New(cfg)
	t.Cleanup(func() { _ = next.Close() })
	next.Publish(Event{Kind: KindJob, ID: "move-Recording", BatchID: "bid-1", JobID: "jid-1", From: "Storing", To: "Recording"})
	if err := next.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	flush(t, next)
	waitFor(t, "the line saying they are published", func() bool {
		return rec.count(slog.LevelInfo, "events: published 3 events kept at the last stop") == 1
	})
	got := replay(t, next.Conn(), Filter{})
	want := append(ids(moves), "move-Recording")
	if !slices.Equal(ids(got), want) {
		t.Errorf("replay after the next start: %v, want %v", ids(got), want)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("%s after its events were published: %v, want it gone", path, err)
	}
	if s := next.Stats(); s.Lost != 0 || s.Published != 4 {
		t.Errorf("next start: %+v, want 4 published, none lost", s)
	}
}

// storePastTheWindow stores e in the stream through nc under another
// message ID: as the stream, which forgets IDs after two minutes, sees an
// event it stored once sent again past that window.
func storePastTheWindow(t *testing.T, nc *nats.Conn, e Event) {
	t.Helper()
	store(t, nc, e, "window-passed", false)
}

// store stores e in the stream through nc under message ID id, marked as a
// kept event's copy when kept.
func store(t *testing.T, nc *nats.Conn, e Event, id string, kept bool) {
	t.Helper()
	msg := &nats.Msg{Subject: e.Subject(), Data: []byte(eventLine(t, e)), Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, id)
	if kept {
		msg.Header.Set(keptHeaderKey, "1")
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(t.Context(), msg); err != nil {
		t.Fatal(err)
	}
}

// A progress event parked or kept is sent again with the kept mark, like
// any, but Replay does not look it up among the earlier messages of its
// subject, which holds every progress event of its job (two a second of a
// download): a copy stored twice says no more than the one before it.
// Before, each such copy cost one request per earlier progress event of
// its job: here about 1,000 for 20 copies, and a job's timeline (10 s)
// failed after a split of a few minutes during its download.
func TestKeptProgressCopiesAreNotLookedUp(t *testing.T) {
	t.Parallel()
	bus, _ := openBus(t, Config{Listen: "127.0.0.1:0"})
	progress := func(i int) Event {
		return Event{Kind: KindProgress, ID: fmt.Sprintf("progress-%d", i), BatchID: "bid-1", JobID: "jid-1", To: "Downloading",
			Host: "test-host", Time: time.Now().UTC(), Attrs: map[string]any{"bytes_done": i}}
	}
	for i := range 40 {
		bus.Publish(progress(i))
	}
	flush(t, bus)
	for i := 40; i < 60; i++ {
		e := progress(i)
		store(t, bus.Conn(), e, e.ID, true)
	}
	nc := connect(t, bus.ClientURL())
	var gets atomic.Int64
	if _, err := nc.Subscribe("$JS.API.STREAM.MSG.GET."+DefaultStream, func(*nats.Msg) { gets.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := replay(t, bus.Conn(), Filter{JobID: "jid-1"}); len(got) != 60 {
		t.Errorf("replay of the job: %d events, want its 60 progress events", len(got))
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := gets.Load(); n > 2 {
		t.Errorf("the replay asked the stream's leader for %d messages, want none for the progress copies", n)
	}
}

// A kept event the stream had stored though its acknowledgement was lost,
// sent again past the duplicate window (here: stored under another ID, as
// the stream, which forgets IDs after two minutes, sees it), is in the
// stream twice and replayed once.
func TestKeptEventStoredBeforeIsReplayedOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := Event{Kind: KindJob, ID: "move-stored", BatchID: "bid-1", JobID: "jid-1", From: "Pending", To: "Downloading",
		Host: "test-host", Time: time.Now().UTC().Add(-time.Hour)}
	first, _ := openBus(t, Config{DataDir: dir})
	storePastTheWindow(t, first.Conn(), e)
	first.Publish(Event{Kind: KindJob, ID: "other-job", BatchID: "bid-1", JobID: "jid-2", From: "Pending", To: "Downloading"})
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	writeKeptFile(t, dir, "", eventLine(t, e))

	bus, logs := openBus(t, Config{DataDir: dir})
	flush(t, bus)
	waitFor(t, "the kept event published", func() bool {
		return logs.count(slog.LevelInfo, "events: published 1 events kept at the last stop") == 1
	})
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	js, err := jetstream.New(bus.Conn())
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CachedInfo().State.Msgs; n != 3 {
		t.Errorf("the stream holds %d messages, want 3 (the move twice, the other job's once)", n)
	}
	if got := ids(replay(t, bus.Conn(), Filter{})); !slices.Equal(got, []string{"move-stored", "other-job"}) {
		t.Errorf("replay: %v, want the move once, then the other job's", got)
	}
	if got := ids(replay(t, bus.Conn(), Filter{JobID: "jid-1"})); !slices.Equal(got, []string{"move-stored"}) {
		t.Errorf("replay of the job: %v, want the move once", got)
	}
}

// A file of kept events written for another queue is never published into
// this queue's stream: it is moved aside, and the warning names both.
func TestKeptEventsOfAnotherQueueAreNotPublished(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeKeptFile(t, dir, "queue-A", eventLine(t, Event{Kind: KindJob, ID: "of-A", JobID: "jid-1", To: "Pending"}))
	bus, logs := openBus(t, Config{DataDir: dir, Queue: "queue-B", QueueAt: "zk B"})
	bus.Publish(Event{Kind: KindAdmin, ID: "of-B", To: "hold"})
	flush(t, bus)
	if got := ids(replay(t, bus.Conn(), Filter{})); !slices.Equal(got, []string{"of-B"}) {
		t.Errorf("replay of queue B: %v, want only its own event", got)
	}
	w := logs.warned("holds events of another queue or stream")
	if !strings.Contains(w, `"queue-A"`) || !strings.Contains(w, `"queue-B"`) || !strings.Contains(w, keptFileName+".other-queue-") {
		t.Errorf("warning %q: want both queues and where the file went", w)
	}
	aside, _ := filepath.Glob(filepath.Join(dir, keptFileName+".other-queue-*"))
	if _, err := os.Stat(filepath.Join(dir, keptFileName)); !os.IsNotExist(err) || len(aside) != 1 {
		t.Errorf("the file: %v, %d moved aside; want it moved aside", err, len(aside))
	}
}

// A file with bad lines (one not an event, one cut short at its end) has
// its good events published; each bad line is named with the file, and
// the file is moved aside.
func TestKeptEventsFileWithBadLines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeKeptFile(t, dir, "",
		eventLine(t, Event{Kind: KindJob, ID: "good-1", JobID: "jid-1", To: "Pending"}),
		"not json",
		eventLine(t, Event{Kind: KindJob, ID: "good-2", JobID: "jid-1", From: "Pending", To: "Downloading"}),
		`{"id":"cut-short","kind":"jo`)
	bus, logs := openBus(t, Config{DataDir: dir})
	flush(t, bus)
	waitFor(t, "the good events published", func() bool {
		return logs.count(slog.LevelInfo, "events: published 2 events kept at the last stop") == 1
	})
	if got := ids(replay(t, bus.Conn(), Filter{})); !slices.Equal(got, []string{"good-1", "good-2"}) {
		t.Errorf("replay: %v, want the two good events", got)
	}
	path := filepath.Join(dir, keptFileName)
	for _, line := range []string{path + " line 3: not an event", path + " line 5: not an event"} {
		if logs.warned(line) == "" {
			t.Errorf("no warning naming %q", line)
		}
	}
	if w := logs.warned("2 bad lines left out, 2 events kept; moved to " + path + ".bad-"); w == "" {
		t.Error("no warning saying the file was moved aside")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("%s after its good events were published: %v, want it gone", path, err)
	}
}

// cutOffMember opens members a, b and c (set changes their Config; c's
// logs go to the recorder returned), has c publish 2 events, stops a and b
// without telling c (as a NATS partition does with ZooKeeper reachable),
// and has c publish n moves, which the stream cannot take.
func cutOffMember(t *testing.T, set func(*Config), n int) (a, b, c *member, rec *logRecorder) {
	t.Helper()
	rec = &logRecorder{}
	ms := openClusterWith(t, func(cfg *Config) {
		set(cfg)
		if cfg.Host == "c" {
			cfg.Logger = slog.New(rec)
		}
	}, "a", "b", "c")
	a, b, c = ms[0], ms[1], ms[2]
	publishN(t, c, "bid-1", 2)
	waitThreeCurrent(t, a)
	for _, m := range []*member{a, b} {
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		c.Publish(Event{Kind: KindJob, BatchID: "bid-2", JobID: "bid-2-a", From: "Processing", To: []string{"Storing", "Processing"}[i%2]})
	}
	return a, b, c, rec
}

// A member cut off from its cluster's quorum (the two others stopped, as a
// NATS partition does with ZooKeeper reachable: nobody tells it they went)
// goes on publishing moves the stream cannot take; stopped, it keeps them;
// once the others are back, its next start publishes them, and the replay
// holds every move once. Before, its stop counted them lost, for good.
func TestMemberCutOffFromItsQuorumKeepsItsMovesAcrossAStop(t *testing.T) {
	t.Parallel()
	fast := func(cfg *Config) { cfg.ackTimeout = time.Second }
	const cutOff = 6
	a, b, c, rec := cutOffMember(t, fast, cutOff)
	dirs := map[string]string{}
	for _, m := range []*member{a, b, c} {
		dirs[m.cfg.Host] = m.cfg.DataDir
	}
	waitFor(t, "c to send its moves and hear nothing", func() bool { return c.Stats().Retried > 0 })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.Lost != 0 || s.Published != 2 {
		t.Errorf("c after its stop: %+v, want its moves kept, none lost", s)
	}
	if _, kept := keptLines(t, dirs["c"]); len(kept) != cutOff {
		t.Fatalf("c kept %d events, want %d", len(kept), cutOff)
	}

	again := openClusterWith(t, func(cfg *Config) {
		fast(cfg)
		cfg.DataDir = dirs[cfg.Host]
		if cfg.Host == "c" {
			cfg.Logger = slog.New(rec)
		}
	}, "a", "b", "c")
	waitFor(t, "c's moves published", func() bool {
		return rec.count(slog.LevelInfo, "events: published 6 events kept at the last stop") == 1
	})
	if got := hostsSeen(t, again[0]); got["c"] != 2+cutOff {
		t.Errorf("replay after the restart: events per host %v, want c's %d", got, 2+cutOff)
	}
	if _, err := os.Stat(filepath.Join(dirs["c"], keptFileName)); !os.IsNotExist(err) {
		t.Errorf("c's file after its events were published: %v, want it gone", err)
	}
}

// Close's gathering of what the stream has not acknowledged races the ack
// timeouts: an event whose flight fails just as Close gathers (here,
// deterministically, between the two takes) moves from the flights to the
// resend pauses. It is kept, once: each event given is acknowledged, kept
// or counted lost. Before, the pauses were taken first: the event was in
// neither when each was taken, and vanished (kept 2 of 3, none lost; the
// lead saw it once in three runs under load).
func TestAckTimeoutAsCloseGathersIsKept(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var bus *Bus
	var flying []*nats.Msg
	cfg := Config{DataDir: dir, Listen: "127.0.0.1:0", ackTimeout: time.Minute, Queue: "q-1"}
	cfg.keepTaking = func() {
		for _, m := range flying { // nats.go's ack timers fire now
			bus.failed(m, jetstream.ErrAsyncPublishTimeout)
		}
	}
	bus, _ = openBus(t, cfg)
	sent := silenceStream(t, bus)
	want := []string{"move-Downloading", "move-Processing", "move-Storing"}
	for _, id := range want {
		bus.Publish(Event{Kind: KindJob, ID: id, BatchID: "bid-1", JobID: "jid-1", To: strings.TrimPrefix(id, "move-")})
		receiveSent(t, sent, id)
	}
	flying = bus.flying.all()[1:2] // move-Processing's
	if err := bus.Close(); err != nil {
		t.Fatal(err)
	}
	s := bus.Stats()
	if s.Published+s.Kept+s.Lost != 3 || s.Kept != 3 {
		t.Errorf("after Close: %+v; want the 3 events given kept (published + kept + lost = 3)", s)
	}
	if _, kept := keptLines(t, dir); !slices.Equal(ids(kept), want) {
		t.Errorf("kept at Close: %v, want %v", ids(kept), want)
	}
}

// A resend whose pause ends as Close begins is kept, once. Before, the
// pause's end took it from the pauses and, Close having begun, put it
// back after Close had taken them: neither kept nor counted lost.
func TestResendDueAsCloseBeginsIsKept(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ended, goOn := make(chan struct{}), make(chan struct{})
	var once sync.Once
	cfg := Config{DataDir: dir, Listen: "127.0.0.1:0", ackTimeout: 500 * time.Millisecond, Queue: "q-1"}
	cfg.pauseEnded = func() {
		once.Do(func() { close(ended); <-goOn })
	}
	bus, _ := openBus(t, cfg)
	sent := silenceStream(t, bus)
	bus.Publish(Event{Kind: KindJob, ID: "move-Paused", BatchID: "bid-1", JobID: "jid-1", To: "Downloading"})
	receiveSent(t, sent, "move-Paused")
	receive(t, ended, "the pause before the resend to end")
	closed := make(chan error)
	go func() { closed <- bus.Close() }()
	if err := receive(t, closed, "Close"); err != nil {
		t.Fatal(err)
	}
	close(goOn)
	if s := bus.Stats(); s.Kept != 1 || s.Lost != 0 || s.Published != 0 {
		t.Errorf("after Close: %+v, want the event kept", s)
	}
	if _, kept := keptLines(t, dir); !slices.Equal(ids(kept), []string{"move-Paused"}) {
		t.Errorf("kept at Close: %v, want [move-Paused]", ids(kept))
	}
}

// A daemon killed while Close wrote the file leaves durable.WriteFile's
// temporary file beside it (up to 64 MiB, never read); the next start
// removes it, and the file as it was before is read as ever.
func TestKeptWriteCutShortIsRemovedAtTheNextStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeKeptFile(t, dir, "q-1", eventLine(t, Event{Kind: KindJob, ID: "kept-1", JobID: "jid-1", To: "Pending"}))
	leftover := filepath.Join(dir, "."+keptFileName+".123456")
	if err := os.WriteFile(leftover, []byte(`{"ingestq_kept_events":1,"queue":"q-1"`), 0o600); err != nil {
		t.Fatal(err)
	}
	bus := New(Config{DataDir: dir, Queue: "q-1", Host: "test-host", Logger: discardLogger()})
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Errorf("%s after the next start: %v, want it removed", leftover, err)
	}
	if err := bus.Close(); err != nil {
		t.Fatal(err)
	}
	if _, kept := keptLines(t, dir); !slices.Equal(ids(kept), []string{"kept-1"}) {
		t.Errorf("kept: %v, want [kept-1]", ids(kept))
	}
}
