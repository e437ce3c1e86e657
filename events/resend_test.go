package events

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ingestq/ingestq/internal/natstest"
)

// silenceStream has bus's stream answer nothing, as one without a leader
// or a quorum: the stream deleted, and a subscriber on its subjects that
// never replies; the channel gets the event ID of each message sent there
// (sends and resends alike).
func silenceStream(t *testing.T, bus *Bus) <-chan string {
	t.Helper()
	sent, _ := silenceStreamUntil(t, bus)
	return sent
}

// silenceStreamUntil is silenceStream, and returns what brings the stream
// back: the silent subscriber goes and the stream is made again, as the
// bus makes it.
func silenceStreamUntil(t *testing.T, bus *Bus) (sent <-chan string, back func()) {
	t.Helper()
	nc := connect(t, bus.ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	if err := js.DeleteStream(ctx, DefaultStream); err != nil {
		t.Fatal(err)
	}
	ch := make(chan string, 1000)
	sub, err := nc.Subscribe(SubjectAll, func(m *nats.Msg) {
		select {
		case ch <- m.Header.Get(jetstream.MsgIDHeader):
		default: // nobody reads any more
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return ch, func() {
		t.Helper()
		if err := sub.Unsubscribe(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
		defer cancel()
		if err := bus.ensureStream(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// receiveSent waits until the event id is sent (silenceStream's channel),
// passing over other events' sends and resends.
func receiveSent(t *testing.T, sent <-chan string, id string) {
	t.Helper()
	for receive(t, sent, "the send of "+id) != id {
	}
}

// An event whose publish gets no answer (no stream, and a subscriber on its
// subject that never replies, as a stream without a leader behaves) is
// sent again, and waits as one event; closed meanwhile, it is kept once
// for the next start, and not counted lost.
func TestUnansweredEventWaitsOnceAndIsKeptOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bus, _ := openBus(t, Config{DataDir: dir, Listen: "127.0.0.1:0", ackTimeout: 2 * time.Second})
	sent := silenceStream(t, bus)
	acked := bus.PublishAcked(Event{Kind: KindJob, ID: "ev-silent", JobID: "jid-silent", To: "Pending"})
	receiveSent(t, sent, "ev-silent")
	receiveSent(t, sent, "ev-silent") // sent again: in flight now, for 2 s
	if s := bus.Stats(); s.Waiting != 1 || s.Lost != 0 || s.Retried != 1 {
		t.Errorf("while it is sent again: %+v, want 1 waiting, none lost, 1 resend", s)
	}
	if err := bus.Close(); err != nil {
		t.Fatal(err)
	}
	receive(t, acked, "the waiter of an event kept at Close")
	if s := bus.Stats(); s.Lost != 0 || s.Published != 0 {
		t.Errorf("after Close: %+v, want none lost", s)
	}
	if _, kept := keptLines(t, dir); len(kept) != 1 || kept[0].JobID != "jid-silent" {
		t.Errorf("kept at Close: %+v, want the event once", kept)
	}
}

// A resend that cannot be queued (the queue full and stuck) is counted lost
// and forgotten: its waiter is told, and nothing says it still waits.
func TestDroppedResendIsForgotten(t *testing.T) {
	t.Parallel()
	bus := New(Config{DataDir: t.TempDir(), Host: "test-host", Logger: discardLogger()})
	t.Cleanup(func() { _ = bus.Close() })
	for range queueSize {
		bus.queue <- outMsg{}
	}
	bus.congested.Store(true) // the publisher (not started here) is stuck
	acked := make(chan struct{})
	bus.acks.Store("jid-dropped", acked)
	bus.failing.Store("jid-dropped", &resend{first: time.Now().Add(-time.Minute)})
	bus.enqueue(outMsg{id: "jid-dropped", resent: true})
	receive(t, acked, "the waiter of a resend dropped")
	if n := count(&bus.failing); n != 0 || bus.Recording() != nil || bus.Stats().Lost != 1 {
		t.Errorf("after the resend was dropped: %d failing, Recording %v, %+v; want none failing, nil, 1 lost", n, bus.Recording(), bus.Stats())
	}
}

// While NATS refuses the bus's credentials, the warning that events are
// sent again says so, not that a cluster may be electing a leader.
func TestResendWarningSaysCredentialsRefused(t *testing.T) {
	t.Parallel()
	opts := &server.Options{JetStream: true, StoreDir: t.TempDir(), Host: "127.0.0.1", Port: server.RANDOM_PORT,
		NoSigs: true, NoLog: true, Username: "ingestq", Password: "good"}
	ns := natstest.Run(t, opts)
	bus, rec := openBus(t, Config{URL: "nats://ingestq:good@" + ns.Addr().String(), ackTimeout: time.Second})

	renewed := *opts // the password changes: NATS drops the bus and refuses it from then on
	renewed.Password = "renewed"
	if err := ns.ReloadOptions(&renewed); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "NATS to refuse the bus's credentials", func() bool { return rec.warned("refuses this daemon's credentials") != "" })
	bus.Publish(Event{Kind: KindJob, JobID: "jid-refused", To: "Pending"})
	waitFor(t, "the event to be sent again", func() bool { return rec.warned("sending them again") != "" })
	if got := rec.warned("sending them again"); !strings.Contains(got, "(NATS refuses this daemon's credentials)") {
		t.Errorf("resend warning %q: want it to say NATS refuses the credentials", got)
	}
}

// An event sent again at a leader change has two copies on their way: the
// first answer of either ends it, once; a copy refused while the other is
// out leaves it to the other; answers after its end are ignored; the last
// copy's failure is the event's. Whoever waits until none is on its way
// finds each counted.
func TestFlightEndsOnceWhicheverCopyAnswers(t *testing.T) {
	t.Parallel()
	var f flights
	acked, failed := 0, 0
	ack := func() { acked++ }
	fail := func() { failed++ }
	first, again := &nats.Msg{}, &nats.Msg{}
	f.add("e1", first)
	if !f.again("e1", again) {
		t.Fatal("a copy of an event on its way was not taken")
	}
	done := f.done()
	f.failed("e1", again, fail) // refused "in process" while the first is stored
	f.acked("e1", ack)
	f.acked("e1", ack)
	receive(t, done, "no event on its way")
	f.failed("e1", first, fail) // its timeout
	if acked != 1 || failed != 0 || f.again("e1", &nats.Msg{}) {
		t.Errorf("an event with two copies: counted %d times, failed %d times, or taken again after its end; want once, never, no", acked, failed)
	}
	f.add("e2", first)
	f.failed("e2", first, fail)
	if failed != 1 || f.len() != 0 {
		t.Errorf("the failure of an event's only copy handled %d times, %d on their way; want once, none", failed, f.len())
	}
}

// A NATS user not allowed to hear the stream's leader elections gets one
// warning that says what it costs, and its events are recorded as before.
func TestLeaderElectionsDeniedSaysSo(t *testing.T) {
	t.Parallel()
	ns := natstest.Run(t, &server.Options{JetStream: true, StoreDir: t.TempDir(), Host: "127.0.0.1", Port: server.RANDOM_PORT,
		NoSigs: true, NoLog: true, Users: []*server.User{{Username: "ingestq", Password: "pw", Permissions: &server.Permissions{
			Subscribe: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.EVENT.>"}}}}}})
	bus, rec := openBus(t, Config{URL: "nats://ingestq:pw@" + ns.Addr().String()})
	waitFor(t, "the warning", func() bool { return rec.warned("does not let this daemon hear") != "" })
	bus.Publish(Event{Kind: KindJob, JobID: "jid-denied", To: "Pending"})
	flush(t, bus)
	if s := bus.Stats(); s.Published != 1 {
		t.Errorf("a daemon denied the leader elections: %+v, want its event recorded", s)
	}
}
