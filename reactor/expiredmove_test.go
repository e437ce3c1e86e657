package reactor_test

import (
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/ingestq/ingestq/internal/queuetest"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// A daemon whose ZooKeeper session expires while its step runs (paused
// past the session timeout: a VM pause, a GC stall) finishes the step and
// commits its move while its connection is still dead: that first try gets
// no answer. Meanwhile another daemon has taken the job over. The retry
// meets the other's change, and the version the move would have made holds
// the other's acquisition: the move never landed, and nothing of it is
// missing from the stream. It is abandoned, said at info with the host that
// took the job over; nothing is counted lost. Before, the outcome was said
// unknown ("commit outcome unknown … its event is counted lost") and the
// bus counted a lost event, which fires IngestqEventsLost. The same holds
// when the other daemon has moved the job on (the status past that
// version): its holder names the version its acquisition made, the one the
// move would have made; before, that move was still counted lost.
func TestMoveAfterAnExpiredSessionsTakeOverIsAbandoned(t *testing.T) {
	for _, movedOn := range []bool{false, true} {
		t.Run(map[bool]string{false: "taker in Downloading", true: "taker moved on to Processing"}[movedOn], func(t *testing.T) {
			moveAfterATakeOver(t, movedOn)
		})
	}
}

// moveAfterATakeOver is TestMoveAfterAnExpiredSessionsTakeOverIsAbandoned,
// whose taker holds the job in Downloading, or has moved it on (movedOn)
// and holds it in Processing, when the paused daemon's move is tried.
func moveAfterATakeOver(t *testing.T, movedOn bool) {
	e := newEnv(t)
	batches := e.outside("ingestq.batch.>")
	proxy, s := e.proxiedSession()
	// The paused daemon's queue gives a request up after a second; each
	// multi it sends while paused says so on multis.
	multis := make(chan struct{}, 16)
	qa, err := queue.New(s.Conn, e.root, queue.WithRequestTimeout(time.Second),
		queue.WithLogger(slog.New(queuetest.OnRequest(func(op, _ string) {
			if op == "multi" {
				select {
				case multis <- struct{}{}:
				default:
				}
			}
		}))))
	if err != nil {
		t.Fatal(err)
	}
	logs, log := e.logged()

	obs := moves{outcomes: make(chan string, 4)}
	startedA, proceedA := make(chan string, 1), make(chan struct{})
	proceedB := make(chan struct{})
	releaseA, releaseB := sync.OnceFunc(func() { close(proceedA) }), sync.OnceFunc(func() { close(proceedB) })
	defer releaseA() // before the daemons' stops, should the test fail early
	defer releaseB()
	e.run("host-a", map[queue.State]reactor.JobHandler{
		queue.Downloading: heldStep(startedA, proceedA),
	}, func(c *reactor.Config) {
		c.Session, c.Queue, c.Observer, c.Logger = s, qa, obs, log
	})

	b := e.submit(map[string]any{"payload_url": "passthrough:1"})
	await(t, startedA, "host-a's step's start")
	proxy.Pause() // host-a hears nothing from now on; the server expires its session

	startedB, heldB := make(chan string, 1), queue.Downloading
	if movedOn {
		heldB = queue.Processing
	}
	e.run("host-b", map[queue.State]reactor.JobHandler{heldB: heldStep(startedB, proceedB)})
	await(t, startedB, "host-b's take-over of the job") // host-a's lock went with its session

	lostBefore := e.bus.Stats().Lost
	for len(multis) > 0 { // host-a's earlier writes
		<-multis
	}
	releaseA() // host-a's step ends: its move's first try goes to the dead connection
	await(t, multis, "host-a's move's first try")
	await(t, multis, "host-a's move's second try, the first given up")
	proxy.Resume() // host-a learns its session expired, and opens a new one

	if got := await(t, obs.outcomes, "host-a's move's outcome"); got != reactor.Abandoned {
		t.Errorf("host-a's move's outcome: %q, want %q", got, reactor.Abandoned)
	}
	if lost := e.bus.Stats().Lost - lostBefore; lost != 0 {
		t.Errorf("%d events counted lost; want none: the move never landed", lost)
	}
	logs.WaitFor(t, "result abandoned: this daemon's session expired while the step ran and host host-b took the job over")
	if lines := logs.Lines("commit outcome unknown"); len(lines) > 0 {
		t.Errorf("host-a said the move's outcome unknown: %s", lines[0])
	}

	releaseB()
	if rep := e.waitBatch(batches, b.ID); rep.To != "Completed" {
		t.Fatalf("batch ended %s: %s", rep.To, rep.Message)
	}
	e.clean()
}
