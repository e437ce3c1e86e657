package events

import (
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// An outside process, on its own connection to the embedded listener,
// receives events on the subjects it asked for, every field intact.
func TestOutsideSubscriberReceivesEvents(t *testing.T) {
	t.Parallel()
	bus, _ := openBus(t, Config{Listen: "127.0.0.1:0"})
	if !strings.HasPrefix(bus.ClientURL(), "nats://127.0.0.1:") {
		t.Fatalf("ClientURL() = %q, want a loopback nats:// URL", bus.ClientURL())
	}
	outside := connect(t, bus.ClientURL())
	completed, err := outside.SubscribeSync("ingestq.job.completed.*")
	if err != nil {
		t.Fatal(err)
	}
	batches, err := outside.SubscribeSync("ingestq.batch.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := outside.Flush(); err != nil { // the server has both subscriptions
		t.Fatal(err)
	}

	job := Event{
		ID:       "ev-1",
		Time:     time.Date(2025, 3, 4, 5, 6, 7, 891011121, time.UTC),
		Kind:     KindJob,
		BatchID:  "bid0001",
		JobID:    "jid0001",
		From:     "Recording",
		To:       "Completed",
		Priority: new(5),
		Host:     "worker-3",
		Message:  "stored 12 files",
		Attrs:    map[string]any{"files": float64(12), "ark": "ark:/99999/fk4x"},
	}
	bus.Publish(Event{Kind: KindJob, JobID: "jid0001", To: "Recording"}) // not on either subject
	bus.Publish(job)
	batch := Event{Kind: KindBatch, BatchID: "bid0001", From: "Processing", To: "Reporting"}
	bus.Publish(batch)

	m, err := completed.NextMsg(testTimeout)
	if err != nil {
		t.Fatalf("completed: %v", err)
	}
	if m.Subject != "ingestq.job.completed.jid0001" {
		t.Errorf("subject = %q", m.Subject)
	}
	got, err := decode(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Time.Equal(job.Time) {
		t.Errorf("Time = %v, want %v", got.Time, job.Time)
	}
	got.Time = job.Time
	if !reflect.DeepEqual(got, job) {
		t.Errorf("received %+v\nwant     %+v", got, job)
	}

	m, err = batches.NextMsg(testTimeout)
	if err != nil {
		t.Fatalf("batch: %v", err)
	}
	gotBatch, err := decode(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "ingestq.batch.reporting.bid0001" || gotBatch.From != "Processing" || gotBatch.To != "Reporting" {
		t.Errorf("batch event %s %+v", m.Subject, gotBatch)
	}
	// Publish stamped what was left empty.
	if gotBatch.ID == "" || gotBatch.Time.IsZero() || gotBatch.Host != "test-host" {
		t.Errorf("not stamped: id %q time %v host %q", gotBatch.ID, gotBatch.Time, gotBatch.Host)
	}
}

// Bus.Subscribe decodes events and skips what is not one.
func TestSubscribeSkipsBadJSON(t *testing.T) {
	t.Parallel()
	bus, _ := openBus(t, Config{})
	got := make(chan Event, 10)
	unsubscribe, err := bus.Subscribe("ingestq.job.>", func(e Event) { got <- e })
	if err != nil {
		t.Fatal(err)
	}
	defer unsubscribe()
	if err := bus.Conn().Publish("ingestq.job.pending.x", []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	bus.Publish(Event{Kind: KindJob, JobID: "jid7", To: "Pending"})
	if e := receive(t, got, "event"); e.JobID != "jid7" || e.Kind != KindJob {
		t.Fatalf("first event = %+v, want jid7", e)
	}
}

// Signals travel on core NATS under InternalPrefix and are never recorded.
func TestSignalsAreDeliveredButNotRecorded(t *testing.T) {
	t.Parallel()
	bus, _ := openBus(t, Config{})
	got := make(chan string, 10)
	unsubscribe, err := bus.SubscribeSignal("wake.>", func(data []byte) { got <- string(data) })
	if err != nil {
		t.Fatal(err)
	}
	defer unsubscribe()
	events := make(chan Event, 10)
	unsubscribeAll, err := bus.Subscribe(SubjectAll, func(e Event) { events <- e })
	if err != nil {
		t.Fatal(err)
	}
	defer unsubscribeAll()

	bus.Signal("wake.jobs.pending", []byte("jid0001"))
	bus.Signal("wake.batches", []byte("bid0001"))
	if d := receive(t, got, "signal"); d != "jid0001" {
		t.Errorf("signal data = %q", d)
	}
	if d := receive(t, got, "signal"); d != "bid0001" {
		t.Errorf("signal data = %q", d)
	}
	flush(t, bus)
	if evs := replay(t, bus.Conn(), Filter{}); len(evs) != 0 {
		t.Errorf("the stream recorded signals: %+v", evs)
	}
	if len(events) != 0 {
		t.Errorf("a subscriber on %s received signals", SubjectAll)
	}
	if s := bus.Stats(); s.Published != 0 || s.Lost != 0 {
		t.Errorf("Stats() = %+v, want zero", s)
	}
}

// Close twice is fine; later publishes are counted lost, with one warning.
func TestCloseTwiceAndPublishAfterClose(t *testing.T) {
	t.Parallel()
	bus, logs := openBus(t, Config{})
	bus.Publish(Event{Kind: KindAdmin, To: "cleanup"})
	if err := bus.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := bus.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if s := bus.Stats(); s.Published != 1 || s.Lost != 0 {
		t.Fatalf("after Close Stats() = %+v, want the one event published", s)
	}
	for range 100 {
		bus.Publish(Event{Kind: KindJob, JobID: "late", To: "Pending"})
	}
	bus.Signal("wake", nil)
	if s := bus.Stats(); s.Lost != 101 {
		t.Errorf("Lost = %d, want 101", s.Lost)
	}
	if n := logs.count(slog.LevelWarn, "events: events not recorded"); n != 1 {
		t.Errorf("%d warnings about lost events, want 1 (rate-limited)", n)
	}
	var nilBus *Bus
	nilBus.Publish(Event{}) // no panic
}

// Publishers racing Close: every event ends up published or lost.
func TestPublishRacingClose(t *testing.T) {
	t.Parallel()
	bus, _ := openBus(t, Config{})
	const workers, each = 4, 500
	var wg sync.WaitGroup
	started := make(chan struct{}, workers)
	for range workers {
		wg.Go(func() {
			started <- struct{}{}
			for i := range each {
				bus.Publish(Event{Kind: KindProgress, JobID: "jid", Attrs: map[string]any{"i": i}})
			}
		})
	}
	for range workers {
		<-started
	}
	if err := bus.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	s := bus.Stats()
	if s.Published+s.Lost != workers*each {
		t.Errorf("Published %d + Lost %d != %d", s.Published, s.Lost, workers*each)
	}
	if bus.Conn().Status() != nats.CLOSED {
		t.Errorf("connection status %v after Close", bus.Conn().Status())
	}
}

// An in-process-only bus has no client URL to give out.
func TestInProcessBusHasNoClientURL(t *testing.T) {
	t.Parallel()
	bus, _ := openBus(t, Config{})
	if u := bus.ClientURL(); u != "" {
		t.Errorf("ClientURL() = %q, want empty", u)
	}
}

func BenchmarkPublish(b *testing.B) {
	bus, _ := openBus(b, Config{})
	e := Event{Kind: KindJob, BatchID: "bid0001", JobID: "jid0001", From: "Pending", To: "Estimating", Priority: new(5)}
	for b.Loop() {
		bus.Publish(e)
	}
	flush(b, bus)
	if s := bus.Stats(); s.Lost != 0 {
		b.Logf("lost %d of %d (queue full)", s.Lost, s.Published+s.Lost)
	}
}

// PublishAcked's channel closes once the stream has the event (Recorded
// finds it then, with nothing flushed), and at once for an event that
// cannot be published: a closed or nil bus.
func TestPublishAckedClosesOnceRecorded(t *testing.T) {
	t.Parallel()
	bus, _ := openBus(t, Config{})
	for i := range 20 {
		e := Event{Kind: KindJob, ID: fmt.Sprintf("acked-%d", i), JobID: "jid-acked", To: "Estimating"}
		select {
		case <-bus.PublishAcked(e):
		case <-time.After(testTimeout):
			t.Fatalf("event %s: no acknowledgement in %v", e.ID, testTimeout)
		}
		ok, err := bus.Recorded(t.Context(), e)
		if err != nil || !ok {
			t.Fatalf("event %s acknowledged but not recorded: %v, %v", e.ID, ok, err)
		}
	}
	if err := bus.Close(); err != nil {
		t.Fatal(err)
	}
	for _, b := range []*Bus{bus, nil} {
		select {
		case <-b.PublishAcked(Event{Kind: KindJob, JobID: "late", To: "Pending"}):
		default:
			t.Errorf("PublishAcked on a closed or nil bus: channel open, want closed at once")
		}
	}
}

// A bus made with New records nothing until Start; what was published
// before waits and is recorded then. One closed without starting keeps
// what it was given for the next start, and Close does not wait for a
// publisher; what it is given after Close is lost.
func TestNewThenStart(t *testing.T) {
	t.Parallel()
	bus := New(Config{DataDir: t.TempDir(), Host: "test-host", Logger: discardLogger()})
	t.Cleanup(func() { _ = bus.Close() })
	early := Event{Kind: KindJob, ID: "before-start", JobID: "jid-early", To: "Pending"}
	acked := bus.PublishAcked(early)
	if err := bus.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	receive(t, acked, "the acknowledgement of an event published before Start")
	if ok, err := bus.Recorded(t.Context(), early); err != nil || !ok {
		t.Fatalf("event published before Start: recorded %v, %v; want recorded", ok, err)
	}

	dir := t.TempDir()
	unstarted := New(Config{DataDir: dir, Host: "test-host", Logger: discardLogger()})
	lost := unstarted.PublishAcked(Event{Kind: KindJob, JobID: "jid-never", To: "Pending"})
	if err := unstarted.Close(); err != nil {
		t.Fatal(err)
	}
	receive(t, lost, "the channel of an event given to a bus closed before Start")
	unstarted.Publish(Event{Kind: KindJob, JobID: "jid-late", To: "Pending"})
	if s := unstarted.Stats(); s.Lost != 1 || s.Published != 0 {
		t.Errorf("bus closed before Start: Stats() = %+v, want the one given after Close lost", s)
	}
	if _, kept := keptLines(t, dir); len(kept) != 1 || kept[0].JobID != "jid-never" {
		t.Errorf("kept by a bus closed before Start: %+v, want the event given before", kept)
	}
}
