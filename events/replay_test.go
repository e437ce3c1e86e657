package events

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// 1,000 mixed events are recorded in publish order, and every filter of
// Replay selects exactly what it should, also through another connection.
func TestRecordingAndReplayFilters(t *testing.T) {
	t.Parallel()
	bus, _ := openBus(t, Config{Listen: "127.0.0.1:0"})
	evs := mixedEvents(1000)
	for _, e := range evs {
		bus.Publish(e)
	}
	flush(t, bus)
	if s := bus.Stats(); s.Published != 1000 || s.Lost != 0 {
		t.Fatalf("Stats() = %+v, want 1000 published", s)
	}
	cli := connect(t, bus.ClientURL()) // as the CLI would, on the listener

	all := replay(t, cli, Filter{})
	if got, want := messages(all, keepAll), messages(evs, keepAll); !slices.Equal(got, want) {
		t.Fatalf("full replay: %d events, want %d in publish order", len(got), len(want))
	}
	if fromBus := replay(t, bus.Conn(), Filter{}); len(fromBus) != 1000 {
		t.Errorf("replay on the bus's own connection: %d events", len(fromBus))
	}

	t.Run("batch", func(t *testing.T) {
		got := messages(replay(t, cli, Filter{BatchID: "bid-b"}), keepAll)
		want := messages(evs, func(e Event) bool { return e.BatchID == "bid-b" })
		if len(want) != 333 || !slices.Equal(got, want) {
			t.Errorf("got %d events, want %d (%v...)", len(got), len(want), head(got))
		}
	})
	t.Run("job", func(t *testing.T) {
		got := messages(replay(t, cli, Filter{JobID: "jid-3"}), keepAll)
		want := messages(evs, func(e Event) bool { return e.JobID == "jid-3" })
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", head(got), head(want))
		}
	})
	t.Run("batch and job", func(t *testing.T) {
		got := messages(replay(t, cli, Filter{BatchID: "bid-a", JobID: "jid-3"}), keepAll)
		want := messages(evs, func(e Event) bool { return e.BatchID == "bid-a" && e.JobID == "jid-3" })
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", head(got), head(want))
		}
	})
	t.Run("since", func(t *testing.T) {
		since := all[500].Time
		if !all[499].Time.Before(since) {
			t.Fatalf("events 499 and 500 have the same time %v", since)
		}
		got := messages(replay(t, cli, Filter{Since: since}), keepAll)
		want := messages(all, func(e Event) bool { return !e.Time.Before(since) })
		if len(want) != 500 || !slices.Equal(got, want) {
			t.Errorf("got %d events from %v, want %d", len(got), head(got), len(want))
		}
	})
	t.Run("subject", func(t *testing.T) {
		got := messages(replay(t, cli, Filter{Subject: "ingestq.job.completed.*"}), keepAll)
		want := messages(evs, func(e Event) bool { return e.Kind == KindJob && e.To == "Completed" })
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", head(got), head(want))
		}
	})
	t.Run("nothing matches", func(t *testing.T) {
		if got := replay(t, cli, Filter{Subject: "ingestq.job.nosuchstate.>"}); len(got) != 0 {
			t.Errorf("got %d events", len(got))
		}
		if got := replay(t, cli, Filter{Since: time.Now().Add(time.Hour)}); len(got) != 0 {
			t.Errorf("got %d events from the future", len(got))
		}
	})
	t.Run("fn error stops the replay", func(t *testing.T) {
		stop := errors.New("enough")
		n := 0
		err := Replay(t.Context(), cli, DefaultStream, Filter{}, func(Event) error {
			if n++; n == 10 {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) || n != 10 {
			t.Errorf("Replay = %v after %d events, want fn's error after 10", err, n)
		}
	})
}

// Replay delivers what was in the stream when it began, not what comes after.
func TestReplayStopsAtItsStart(t *testing.T) {
	t.Parallel()
	bus, _ := openBus(t, Config{})
	for _, e := range mixedEvents(20) {
		bus.Publish(e)
	}
	flush(t, bus)
	n := 0
	err := Replay(t.Context(), bus.Conn(), "", Filter{}, func(e Event) error {
		n++
		bus.Publish(e) // grows the stream while the replay runs
		return nil
	})
	if err != nil || n != 20 {
		t.Errorf("Replay = %v after %d events, want 20", err, n)
	}
}

func TestReplayEmptyStreamReturnsAtOnce(t *testing.T) {
	t.Parallel()
	bus, _ := openBus(t, Config{})
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	err := Replay(ctx, bus.Conn(), "", Filter{}, func(Event) error {
		t.Error("fn called on an empty stream")
		return nil
	})
	if err != nil {
		t.Errorf("Replay = %v, want nil", err)
	}
}

func TestReplayMissingStream(t *testing.T) {
	t.Parallel()
	bus, _ := openBus(t, Config{})
	err := Replay(t.Context(), bus.Conn(), "NO_SUCH_STREAM", Filter{}, func(Event) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "NO_SUCH_STREAM") {
		t.Errorf("Replay = %v, want an error naming the stream", err)
	}
}

// A custom stream name is used by the bus and found by Replay.
func TestCustomStreamName(t *testing.T) {
	t.Parallel()
	bus, _ := openBus(t, Config{Stream: "OTHER_EVENTS", MaxAge: time.Hour, MaxBytes: 1 << 20})
	bus.Publish(Event{Kind: KindAdmin, To: "report"})
	flush(t, bus)
	var got []Event
	err := Replay(t.Context(), bus.Conn(), "OTHER_EVENTS", Filter{}, func(e Event) error {
		got = append(got, e)
		return nil
	})
	if err != nil || len(got) != 1 || got[0].To != "report" {
		t.Errorf("Replay = %v, %+v", err, got)
	}
	if err := Replay(t.Context(), bus.Conn(), "", Filter{}, func(Event) error { return nil }); err == nil {
		t.Errorf("Replay of %s found a stream that was never made", DefaultStream)
	}
}

// The file store survives a restart of the embedded server.
func TestEventsSurviveRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	evs := mixedEvents(60)

	first, _ := openBus(t, Config{DataDir: dir})
	for _, e := range evs[:50] {
		first.Publish(e)
	}
	if err := first.Close(); err != nil { // Close sends and waits for acks
		t.Fatal(err)
	}
	if s := first.Stats(); s.Published != 50 {
		t.Fatalf("first bus Stats() = %+v, want 50 published", s)
	}

	second, _ := openBus(t, Config{DataDir: dir})
	if got := messages(replay(t, second.Conn(), Filter{}), keepAll); !slices.Equal(got, messages(evs[:50], keepAll)) {
		t.Fatalf("after restart replay has %d events, want the 50 from before", len(got))
	}
	for _, e := range evs[50:] {
		second.Publish(e)
	}
	flush(t, second)
	if got := messages(replay(t, second.Conn(), Filter{}), keepAll); !slices.Equal(got, messages(evs, keepAll)) {
		t.Errorf("replay has %d events, want all 60 in order", len(got))
	}
}

// Tail follows live events on another connection until its context ends.
func TestTail(t *testing.T) {
	t.Parallel()
	bus, _ := openBus(t, Config{Listen: "127.0.0.1:0"})
	cli := connect(t, bus.ClientURL())
	subs := bus.emb.server().NumSubscriptions()

	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan Event, 10)
	done := make(chan error, 1)
	go func() { done <- Tail(ctx, cli, "ingestq.job.>", func(e Event) { got <- e }) }()
	waitFor(t, "Tail's subscription", func() bool { return bus.emb.server().NumSubscriptions() > subs })

	bus.Publish(Event{Kind: KindBatch, BatchID: "bid1", To: "Processing"}) // not on ingestq.job.>
	bus.Publish(Event{Kind: KindJob, JobID: "jid1", To: "Completed"})
	if e := receive(t, got, "tailed event"); e.JobID != "jid1" || e.To != "Completed" {
		t.Errorf("tailed %+v", e)
	}
	cancel()
	if err := receive(t, done, "Tail to return"); err != nil {
		t.Errorf("Tail = %v, want nil on cancel", err)
	}
}

func keepAll(Event) bool { return true }

// head shortens a list for a failure message.
func head(s []string) []string { return s[:min(len(s), 8)] }

// A replay right after a member restarts is whole, through any member,
// though the member's replica is still catching up: Replay's consumer may
// be placed on that replica, which then says nothing more is pending.
// Before, such a replay ended short without a word (measured: a replay
// of 405 events gave the 5 recorded before the member stopped, 14 of 90
// replays within the 3 s the replica took to catch up).
func TestReplayWholeWhileAReplicaCatchesUp(t *testing.T) {
	t.Parallel()
	ms := openCluster(t, "a", "b", "c")
	publishN(t, ms[0], "bid-0", 5)
	waitThreeCurrent(t, ms[0])
	c := ms[2]
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		publishN(t, ms[0], "bid-1", 20)
	}
	// A batch's event last: a replay of the jobs' subject ends before the stream's last sequence.
	ms[1].Publish(Event{Kind: KindBatch, BatchID: "bid-1", To: "Completed"})
	flush(t, ms[1].Bus)
	all := len(replay(t, connect(t, ms[0].ClientURL()), Filter{}))
	if all != 406 {
		t.Fatalf("a replays %d events, want 406", all)
	}
	ms[2] = openMemberWith(t, "c", func(cfg *Config) { cfg.DataDir, cfg.Cluster = c.cfg.DataDir, c.cfg.Cluster }, ms[0], ms[1])

	behind := 0 // rounds begun while a replica was behind
	for round := 0; round < 10; round++ {
		info := streamInfo(t, ms[2])
		if info.Cluster == nil || len(info.Cluster.Replicas) != 2 || !info.Cluster.Replicas[0].Current || !info.Cluster.Replicas[1].Current {
			behind++
		} else if round > 0 {
			break
		}
		for _, m := range ms {
			nc := connect(t, m.ClientURL())
			if n := len(replay(t, nc, Filter{})); n != all {
				t.Errorf("round %d: a replay through %s gave %d events of %d", round, m.cfg.Host, n, all)
			}
			if n := len(replay(t, nc, Filter{Subject: "ingestq.job.>"})); n != all-1 {
				t.Errorf("round %d: a replay of the jobs' subject through %s gave %d events of %d", round, m.cfg.Host, n, all-1)
			}
		}
	}
	t.Logf("%d rounds of replays began while a replica was behind", behind)
}

// A replay that names a job or an access request has the server read only
// the subjects whose events can carry it (Filter.subjects), one consumer
// each, and every replay delivers exactly what a replay of the whole
// stream delivers (Subject SubjectAll, as each read before), in the same
// order: on a stream of every kind of event, operators' actions on a job,
// a batch and a request among them, a recovered move, kept copies (one
// late, one stored before), identifiers whose tokens are the same
// ("jid.7", "jid_7", "jid 7"), wildcards as identifiers, and one not valid
// UTF-8. Before, the consumer's filter was ingestq.> for all of them.
func TestReplayOfAnIdentifierReadsOnlyItsSubjects(t *testing.T) {
	t.Parallel()
	bus, _ := openBus(t, Config{Listen: "127.0.0.1:0"})
	cli := connect(t, bus.ClientURL())
	prio := 3
	n := 0
	ev := func(e Event) Event { n++; e.ID = fmt.Sprintf("e%02d", n); return e }
	job := func(jid, bid, to string) Event {
		return ev(Event{Kind: KindJob, JobID: jid, BatchID: bid, From: "Pending", To: to})
	}
	admin := func(action string, e Event) Event {
		e.Kind, e.To, e.Actor = KindAdmin, action, "an operator"
		return ev(e)
	}
	access := func(ref, to string) Event { return ev(Event{Kind: KindAccess, AccessID: ref, To: to}) }
	before := []Event{
		ev(Event{Kind: KindBatch, BatchID: "bid1", To: "Pending", Actor: "op", Attrs: map[string]any{"action": "submit"}}),
		ev(Event{Kind: KindBatch, BatchID: "bid2", To: "Pending"}),
		job("jid1", "bid1", "Pending"), job("jid2", "bid1", "Pending"), job("jid3", "bid2", "Pending"),
		access("small/qid1", "Pending"), access("large/qid1", "Pending"), access("large/qid2", "Pending"),
		admin("hold", Event{JobID: "jid1", BatchID: "bid1"}),
		admin("hold", Event{Attrs: map[string]any{"queue": "small"}}),
		admin("release", Event{JobID: "jid1", BatchID: "bid1"}),
	}
	after := []Event{ // from mid on: Since cuts here
		ev(Event{Kind: KindJob, JobID: "jid1", BatchID: "bid1", To: "Downloading", Priority: &prio, Actor: "op", Attrs: map[string]any{"action": "release"}}),
		ev(Event{Kind: KindProgress, JobID: "jid1", BatchID: "bid1", To: "Downloading", Attrs: map[string]any{"files_done": float64(1)}}),
		ev(Event{Kind: KindProgress, JobID: "jid2", BatchID: "bid1", To: "Downloading"}),
		admin("requeue", Event{JobID: "jid1", BatchID: "bid1", Message: "again"}),
		ev(Event{Kind: KindJob, JobID: "jid1", BatchID: "bid1", To: "Pending", RecoveredBy: "other-host", Message: "recovered by other-host"}),
		admin("cancel", Event{BatchID: "bid2"}),
		admin("requeue", Event{AccessID: "small/qid1"}),
		access("small/qid1", "Completed"), access("large/qid1", "Expired"),
		admin("delete", Event{AccessID: "large/qid2"}),
		admin("forget", Event{Attrs: map[string]any{"host": "h"}}),
		job("jid.7", "bid2", "Pending"), job("jid_7", "bid2", "Pending"), job("jid 7", "bid2", "Failed"),
		job("*", "bid2", "Pending"), job(">", "bid2", "Pending"),
		job("jid\xff", "bid2", "Pending"), job("jid\ufffd", "bid2", "Pending"),
		ev(Event{Kind: KindBatch, BatchID: "bid2", To: "Completed", RecoveredBy: "other-host"}),
		job("jid1", "bid1", "Completed"), job("jid3", "bid2", "Completed"),
	}
	for _, e := range before {
		bus.Publish(e)
	}
	flush(t, bus)
	mid := time.Now().UTC()
	for _, e := range after {
		e.Time = mid.Add(time.Second)
		bus.Publish(e)
	}
	flush(t, bus)
	late := ev(Event{Kind: KindJob, JobID: "jid1", BatchID: "bid1", From: "Downloading", To: "Storing", Host: "test-host", Time: mid.Add(time.Second)})
	store(t, cli, late, "late-copy", true)
	store(t, cli, after[len(after)-2], "stored-before-copy", true) // jid1's Completed again: replayed once

	filters := []Filter{
		{JobID: "jid1"}, {JobID: "jid1", Since: mid}, {JobID: "jid2"}, {JobID: "jid.7"}, {JobID: "jid_7"}, {JobID: "jid 7"},
		{JobID: "*"}, {JobID: ">"}, {JobID: "jid\ufffd"}, {JobID: "nosuch"},
		{BatchID: "bid1"}, {BatchID: "bid2", Since: mid}, {BatchID: "bid1", JobID: "jid2"}, {BatchID: "bid.1"},
		{AccessID: "small/qid1"}, {AccessID: "qid1"}, {AccessID: "large/qid2"}, {AccessID: "qid1", Since: mid},
		{AccessID: "small/qid1.>"}, {AccessID: "small/*"}, {AccessID: ">"},
		{Since: mid}, {},
	}
	for _, f := range filters {
		var read map[string][]string
		earlier := consumerFilters(t, cli, nil)
		got := replayWith(t, cli, f, func() { read = consumerFilters(t, cli, earlier) })
		whole := f
		whole.Subject = SubjectAll
		want := replay(t, cli, whole)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%+v: replay gave %v, the whole stream's %v", f, ids(got), ids(want))
		}
		// The first subject's pass runs as the first event comes (here each
		// filter's first subject has events); the actions' pass is over.
		subjects := f.subjects()
		if len(want) > 0 && !slices.ContainsFunc(slices.Collect(maps.Values(read)), func(r []string) bool { return slices.Equal(r, subjects[:1]) }) {
			t.Errorf("%+v: the server's consumers read %v, want one reading %v", f, read, subjects[0])
		}
		for _, r := range read {
			if len(r) != 1 || !slices.Contains(subjects, r[0]) {
				t.Errorf("%+v: a consumer read %v, want one of %v", f, r, subjects)
			}
		}
	}
	if got, want := ids(replay(t, cli, Filter{JobID: "jid1"})), strings.Fields("e03 e09 e11 e12 e13 e15 e16 e31 e33"); !slices.Equal(got, want) {
		t.Errorf("jid1's timeline: %v, want %v", got, want)
	}
	if got := replay(t, cli, Filter{JobID: "jid1"}); !got[len(got)-1].late {
		t.Errorf("the kept copy of jid1's move to Storing is not late: %+v", got[len(got)-1])
	}
	for f, want := range map[string]string{"jid.7": "e23", "jid_7": "e24", "*": "e26", "jid\ufffd": "e28 e29"} {
		if got := strings.Join(ids(replay(t, cli, Filter{JobID: f})), " "); got != want {
			t.Errorf("job %q: %v, want %v", f, got, want)
		}
	}
	if got, want := ids(replay(t, cli, Filter{AccessID: "qid1"})), strings.Fields("e06 e07 e18 e19 e20"); !slices.Equal(got, want) {
		t.Errorf("qid1 of either queue: %v, want %v", got, want)
	}
	// A hostile request ref reads its token's subject, not a wider one.
	for ref, want := range map[string]string{"small/qid1.>": "ingestq.access.*.small/qid1__", "small/*": "ingestq.access.*.small/_",
		"small/qid1 x": "ingestq.access.*.small/qid1_x", ">": "ingestq.access.>"} {
		if got := (Filter{AccessID: ref}).subjects(); !slices.Equal(got, []string{want, adminSubjects}) {
			t.Errorf("request %q reads %v, want %v", ref, got, []string{want, adminSubjects})
		}
	}
	for _, f := range []Filter{{JobID: "jid\ufffd"}, {Since: mid}, {BatchID: "bid1"}, {Subject: "ingestq.job.>", JobID: "jid1"}} {
		if !slices.Equal(f.subjects(), []string{cmp.Or(f.Subject, SubjectAll)}) {
			t.Errorf("%+v narrowed to %v", f, f.subjects())
		}
	}
}

// replayWith returns what Replay delivers, calling first as the first
// event comes: while the replay's consumer is on the server.
func replayWith(t testing.TB, nc *nats.Conn, f Filter, first func()) []Event {
	t.Helper()
	var got []Event
	if err := Replay(t.Context(), nc, "", f, func(e Event) error {
		if got = append(got, e); len(got) == 1 {
			first()
		}
		return nil
	}); err != nil {
		t.Fatalf("Replay(%+v): %v", f, err)
	}
	return got
}

// consumerFilters gives the filter subjects of each consumer on the stream,
// by name, but those of the consumers in earlier.
func consumerFilters(t testing.TB, nc *nats.Conn, earlier map[string][]string) map[string][]string {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(t.Context(), DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for info := range s.ListConsumers(t.Context()).Info() {
		if _, ok := earlier[info.Name]; !ok {
			out[info.Name] = info.Config.FilterSubjects
			if info.Config.FilterSubject != "" {
				out[info.Name] = append(out[info.Name], info.Config.FilterSubject)
			}
		}
	}
	return out
}

// Every pass of a replay deletes its consumer as it ends, on every path:
// delivered whole, nothing to deliver, fn's error, ctx cancelled. Before,
// each stayed on the server for jetstream's 5 minutes, and a job's
// timeline left two (one per subject).
func TestReplayLeavesNoConsumer(t *testing.T) {
	t.Parallel()
	bus, _ := openBus(t, Config{Listen: "127.0.0.1:0"})
	cli := connect(t, bus.ClientURL())
	deleted := make(chan *nats.Msg, 64)
	sub, err := cli.ChanSubscribe("$JS.EVENT.ADVISORY.CONSUMER.DELETED."+DefaultStream+".*", deleted)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	for i := range 5 {
		bus.Publish(Event{ID: fmt.Sprintf("j%d", i), Kind: KindJob, JobID: "jid1", To: "Pending"})
		bus.Publish(Event{ID: fmt.Sprintf("a%d", i), Kind: KindAdmin, JobID: "jid1", To: "hold"})
	}
	flush(t, bus)
	stop := errors.New("stop")
	gone := map[string]bool{}
	deadline := time.Now().Add(10 * time.Second) // a delete takes milliseconds
	for _, c := range []struct {
		name string
		f    Filter
		fn   func(cancel context.CancelFunc) error
		want error
	}{
		{"a job's timeline", Filter{JobID: "jid1"}, func(context.CancelFunc) error { return nil }, nil},
		{"a job with no events of its own", Filter{JobID: "nosuch"}, func(context.CancelFunc) error { return nil }, nil},
		{"the whole stream", Filter{}, func(context.CancelFunc) error { return nil }, nil},
		{"fn's error", Filter{JobID: "jid1"}, func(context.CancelFunc) error { return stop }, stop},
		{"ctx cancelled", Filter{JobID: "jid1"}, func(cancel context.CancelFunc) error { cancel(); return nil }, context.Canceled},
	} {
		earlier := consumerFilters(t, cli, nil)
		ctx, cancel := context.WithCancel(t.Context())
		err := Replay(ctx, cli, "", c.f, func(Event) error { return c.fn(cancel) })
		cancel()
		if !errors.Is(err, c.want) {
			t.Fatalf("%s: Replay: %v, want %v", c.name, err, c.want)
		}
		for name := range consumerFilters(t, cli, earlier) {
			for !gone[name] {
				select {
				case m := <-deleted:
					gone[m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]] = true
				case <-time.After(time.Until(deadline)):
					t.Errorf("%s: consumer %s left on the server after the replay", c.name, name)
					gone[name] = true // said once
				}
			}
		}
	}
}
