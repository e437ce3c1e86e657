package events

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ingestq/ingestq/internal/childproc"
)

// killedMemberEnv makes this test binary the cluster of
// TestMemberKilledWhileCutOffSendsItsParkedMovesAtItsNextStart until it
// is killed; its value is the folder of the members' data folders.
const killedMemberEnv = "INGESTQ_TEST_KILLED_MEMBER"

// heldInFile is how many events the kept file in dir holds now (0 without
// one). The file is renamed into place, whole.
func heldInFile(t *testing.T, dir string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, keptFileName))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), "\n") - 1 // a header line, then one line an event, each ending with one
}

// A member cut off from its cluster's quorum (cutOffMember, in a child
// process) parks its moves past resendFor, and is SIGKILLed: no Close, its
// memory gone. Its data folder holds them all the same, and its next start
// (the others back) publishes them first; the stream has each of its moves
// once. Before, parked events were written only at Close: the file never
// came, and the kill lost the moves for good.
func TestMemberKilledWhileCutOffSendsItsParkedMovesAtItsNextStart(t *testing.T) {
	const cutOff = 4
	if dir := os.Getenv(killedMemberEnv); dir != "" {
		_, _, c, _ := cutOffMember(t, func(cfg *Config) { parksSoon(cfg); cfg.DataDir = filepath.Join(dir, cfg.Host) }, cutOff)
		if s := waitParkedOrLost(t, c.Bus, cutOff); s.Lost != 0 {
			t.Fatalf("c past resendFor: %+v, want its %d moves parked, none lost", s, cutOff)
		}
		t.Logf("c's %d moves parked; waiting to be killed", cutOff)
		time.Sleep(4 * testTimeout)
		t.Fatal("not killed")
	}
	t.Parallel()
	dir := t.TempDir()
	cDir := filepath.Join(dir, "c")
	child := &childproc.Proc{Name: "the cut-off cluster", LogPath: filepath.Join(dir, "child.log")}
	t.Cleanup(func() { _ = child.Kill() })
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v")
	cmd.Env = append(os.Environ(), killedMemberEnv+"="+dir)
	if err := child.Start(cmd); err != nil {
		t.Fatal(err)
	}
	// What a kill leaves is what is on disk: wait for c's moves there.
	if err := child.WaitReady(func() bool { return heldInFile(t, cDir) == cutOff },
		time.Now().Add(2*testTimeout)); err != nil {
		t.Fatalf("c's %d parked moves in %s: %v", cutOff, filepath.Join(cDir, keptFileName), err)
	}
	if err := child.Kill(); err != nil {
		t.Fatal(err)
	}
	_, kept := keptLines(t, cDir)
	if len(kept) != cutOff || slices.ContainsFunc(kept, func(e Event) bool { return e.Host != "c" || e.Kind != KindJob }) {
		t.Fatalf("c's file after the kill: %v, want its %d moves", kept, cutOff)
	}

	rec := &logRecorder{}
	again := openClusterWith(t, func(cfg *Config) {
		parksSoon(cfg)
		cfg.DataDir = filepath.Join(dir, cfg.Host)
		if cfg.Host == "c" {
			cfg.Logger = slog.New(rec)
		}
	}, "a", "b", "c")
	waitFor(t, "c's moves published", func() bool {
		return rec.count(slog.LevelInfo, fmt.Sprintf("events: published %d events kept at the last stop", cutOff)) == 1
	})
	if got := hostsSeen(t, again[0]); got["c"] != 2+cutOff {
		t.Errorf("replay after the restart: events per host %v, want c's %d, each once", got, 2+cutOff)
	}
	if n := heldInFile(t, cDir); n != 0 {
		t.Errorf("c's file holds %d events after they were published, want it gone", n)
	}
}

// A burst of parks (a lost quorum expires events at the pace they were
// published: here 10,000 at once) is written in a few whole writes, not
// one each, and the file ends holding every one, in the order parked. It
// logs what the burst cost.
func TestParkBurstIsWrittenInFewWrites(t *testing.T) {
	t.Parallel()
	const n = 10_000
	dir := t.TempDir()
	bus, _ := openBus(t, parkingConfig(dir, time.Hour))
	msgs := make([]*nats.Msg, n)
	for i := range msgs {
		msgs[i] = parkedMove(t, i)
	}
	start := time.Now()
	for _, m := range msgs {
		if !bus.park(m, m.Header.Get(jetstream.MsgIDHeader)) {
			t.Fatal("an event within the cap was not parked")
		}
	}
	parked := time.Since(start)
	waitFor(t, "the file written up to the last park", func() bool { return bus.keptWritten.Load() == bus.keptFile.version() })
	took, writes := time.Since(start), bus.keptWrites.Load()
	fi, err := os.Stat(filepath.Join(dir, keptFileName))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d events parked at once in %v: %d writes of the file (the last %d bytes), all on disk %v after the first park",
		n, parked.Round(time.Millisecond), writes, fi.Size(), took.Round(time.Millisecond))
	if writes == 0 || writes > n/10 {
		t.Errorf("%d writes for %d parks, want a few: changes during a write make one write after it", writes, n)
	}
	_, kept := keptLines(t, dir)
	var want []string
	for _, m := range msgs {
		want = append(want, m.Header.Get(jetstream.MsgIDHeader))
	}
	if !slices.Equal(ids(kept), want) {
		t.Errorf("the file holds %d events, want the %d parked, in the order parked", len(kept), n)
	}
}

// BenchmarkKeptWriteAtTheCap is one write of the file while the events held
// fill its cap (64 MiB of job moves): the longest write, which the writer
// rests nine times as long after.
//
//	go test -run '^$' -bench KeptWriteAtTheCap -benchtime 5x ./events/
func BenchmarkKeptWriteAtTheCap(b *testing.B) {
	bus := heldBus(b, keptMaxBytes)
	b.ResetTimer()
	for range b.N {
		bus.writeHeld(0)
	}
	b.ReportMetric(float64(bus.keptFile.n.Load()), "events")
}

// heldBus is a bus, not started, whose set of events held has job moves
// up to size bytes of the file.
func heldBus(tb testing.TB, size int) *Bus {
	tb.Helper()
	bus := New(Config{DataDir: tb.TempDir(), Queue: "q-1", Host: "test-host", Logger: discardLogger()})
	tb.Cleanup(func() { _ = bus.Close() })
	held := 0
	for i := 0; ; i++ {
		data, err := marshal(Event{Kind: KindJob, ID: NewID(), BatchID: "bid-1", JobID: fmt.Sprintf("jid-%07d", i),
			From: "Downloading", To: "Processing", Host: "test-host", Time: time.Now().UTC()})
		if err != nil {
			tb.Fatal(err)
		}
		if held += len(data) + 1; held > size {
			return bus
		}
		bus.keptFile.add(outMsg{id: fmt.Sprint(i), data: data}, false)
	}
}

// A write of the file allocates its bytes once, beside the list of the
// events held: at 64 MiB the writer writes every few seconds for as long as
// a split goes on, and a daemon sized for what it holds must not be killed
// for its garbage. Before, the buffer grew by doubling: a write of 64 MiB
// allocated 244 MB (3.6 times the file), now 110 MB.
func TestKeptWriteAllocatesTheFileOnce(t *testing.T) {
	const size = 8 << 20
	bus := heldBus(t, size)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, ok := bus.writeHeld(0); !ok {
		t.Fatal("the write failed")
	}
	runtime.ReadMemStats(&after)
	fi, err := os.Stat(bus.cfg.keptPath())
	if err != nil {
		t.Fatal(err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 3*uint64(fi.Size()) {
		t.Errorf("a write of %d bytes allocated %d bytes, want under three times the file", fi.Size(), got)
	}
}

// parkedMove is the message of job i's move, as park takes it.
func parkedMove(t *testing.T, i int) *nats.Msg {
	t.Helper()
	e := Event{Kind: KindJob, ID: fmt.Sprintf("move-%05d", i), BatchID: "bid-1", JobID: fmt.Sprintf("jid-%05d", i),
		From: "Downloading", To: "Processing", Host: "test-host", Time: time.Now().UTC()}
	m := &nats.Msg{Subject: e.Subject(), Data: []byte(eventLine(t, e)), Header: nats.Header{}}
	m.Header.Set(jetstream.MsgIDHeader, e.ID)
	return m
}

// A write of the file that fails (its place taken by a folder: it fails as
// a full or read-only data folder fails it, also for root) is tried again
// though nothing changes: once the place is free, the file holds the move
// parked, and the log says it is written again. Before, the writer waited
// for the next change, which a batch stuck through the split never makes:
// the move stayed out of the file, and a kill lost it.
func TestKeptWriteThatFailedIsTriedAgain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bus, rec := openBus(t, parkingConfig(dir, time.Hour))
	inTheWay := filepath.Join(dir, keptFileName)
	if err := os.MkdirAll(filepath.Join(inTheWay, "a-file"), 0o755); err != nil {
		t.Fatal(err)
	}
	m := parkedMove(t, 1)
	if !bus.park(m, m.Header.Get(jetstream.MsgIDHeader)) {
		t.Fatal("the move was not parked")
	}
	waitFor(t, "the failed write said", func() bool { return rec.warned("cannot write the file of the events held") != "" })
	if err := os.RemoveAll(inTheWay); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the parked move written, its file's place free", func() bool { return heldInFile(t, dir) == 1 })
	waitFor(t, "the write after the failed ones said", func() bool {
		return rec.count(slog.LevelInfo, "events: the file of the events held for the next start is written again") == 1
	})
}

// Once Close has begun the writer writes no more, though a change waits:
// Close waits for it, then writes the file itself, so a write begun then
// (up to 64 MiB) only held the stop up. Before, a change waiting as Close
// cancelled was written half the time, a select picking either of two
// ready cases.
func TestKeptWriterWritesNoMoreOnceCloseBegins(t *testing.T) {
	t.Parallel()
	for range 100 {
		bus := heldBus(t, 1000)
		bus.keptWriteSoon()
		bus.cancel() // as Close begins
		go bus.keptWriter()
		<-bus.keptWriterDone
		if n := bus.keptWrites.Load(); n != 0 {
			t.Fatalf("the writer wrote %d times after Close began, want none", n)
		}
	}
}

// The writer's rest after a write: by its share of time for a small file
// written slowly, by the bytes for a large one (a full file rewritten every
// 2.6 s wore a disk by 93 GB an hour of a split), bounded either way.
func TestKeptRestBoundsTimeAndBytes(t *testing.T) {
	for _, c := range []struct {
		took time.Duration
		size int
		want time.Duration
	}{
		{time.Millisecond, 1 << 10, 9 * time.Millisecond},                     // a few events: the share
		{10 * time.Millisecond, 8 << 20, 8*time.Second - 10*time.Millisecond}, // 8 MiB: the bytes
		{260 * time.Millisecond, 64 << 20, time.Minute},                       // the cap: a minute
		{5 * time.Second, 1 << 10, keptWriteRestMax},                          // a slow disk: the share, bounded
	} {
		if got := keptRest(c.took, c.size); got != c.want {
			t.Errorf("keptRest(%v, %d) = %v, want %v", c.took, c.size, got, c.want)
		}
	}
}
