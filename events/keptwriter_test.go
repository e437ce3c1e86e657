package events

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
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
	fast := func(cfg *Config) { cfg.ackTimeout, cfg.resendFor = time.Second, 2*time.Second }
	const cutOff = 4
	if dir := os.Getenv(killedMemberEnv); dir != "" {
		_, _, c, _ := cutOffMember(t, func(cfg *Config) { fast(cfg); cfg.DataDir = filepath.Join(dir, cfg.Host) }, cutOff)
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
		fast(cfg)
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
		e := Event{Kind: KindJob, ID: fmt.Sprintf("move-%05d", i), BatchID: "bid-1", JobID: fmt.Sprintf("jid-%05d", i),
			From: "Downloading", To: "Processing", Host: "test-host", Time: time.Now().UTC()}
		msgs[i] = &nats.Msg{Subject: e.Subject(), Data: []byte(eventLine(t, e)), Header: nats.Header{}}
		msgs[i].Header.Set(jetstream.MsgIDHeader, e.ID)
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
	bus := New(Config{DataDir: b.TempDir(), Queue: "q-1", Host: "test-host", Logger: discardLogger()})
	b.Cleanup(func() { _ = bus.Close() })
	size := 0
	for i := 0; ; i++ {
		data, err := marshal(Event{Kind: KindJob, ID: NewID(), BatchID: "bid-1", JobID: fmt.Sprintf("jid-%07d", i),
			From: "Downloading", To: "Processing", Host: "test-host", Time: time.Now().UTC()})
		if err != nil {
			b.Fatal(err)
		}
		if size += len(data) + 1; size > keptMaxBytes {
			break
		}
		bus.keptFile.add(outMsg{id: fmt.Sprint(i), data: data}, false)
	}
	b.ResetTimer()
	for range b.N {
		bus.writeHeld()
	}
	b.ReportMetric(float64(bus.keptFile.n.Load()), "events")
}
