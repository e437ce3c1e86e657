package events

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkJobTimeline replays one job's timeline as api.Timeline asks it
// (Filter{JobID, Since: the job's creation}) from an embedded server's
// stream of 200,000 events of 2,000 other jobs (moves and progress, their
// batches' moves) and the job's 20, spread among them; and the timeline of
// a busy job among the others, 20,000 progress events (a 3-hour download).
// "whole stream" is the same replay with Subject SubjectAll: what it read
// before its subjects (decision 1001). Run:
// go test -run '^$' -bench BenchmarkJobTimeline -benchtime 5x ./events
func BenchmarkJobTimeline(b *testing.B) {
	const others, mine = 200_000, 20
	bus, _ := openBus(b, Config{})
	js, err := jetstream.New(bus.Conn())
	if err != nil {
		b.Fatal(err)
	}
	created := time.Now().UTC()
	every := others / mine
	busy := 0
	for i := range others + mine {
		e := Event{ID: fmt.Sprintf("e%d", i), Time: time.Now().UTC(), Host: "bench-host", Kind: KindProgress,
			BatchID: fmt.Sprintf("bid%d", i%200), JobID: fmt.Sprintf("jid%d", i%2000), To: "Downloading",
			Attrs: map[string]any{"files_done": i % 50, "files_total": 50, "bytes_done": i * 1000, "bytes_total": 50_000_000}}
		switch {
		case i%(every+1) == every/2:
			e.BatchID, e.JobID, e.Kind, e.From, e.To = "bid-mine", "jid-mine", KindJob, "Pending", "Downloading"
		case i%10 == 5:
			e.BatchID, e.JobID = "bid-busy", "jid-busy"
			busy++
		case i%10 == 0:
			e.Kind, e.From, e.Attrs = KindJob, "Pending", nil
		case i%1000 == 1:
			e.Kind, e.JobID, e.From, e.To, e.Attrs = KindBatch, "", "Pending", "Processing", nil
		}
		data, err := marshal(e)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := js.PublishAsync(e.Subject(), data, jetstream.WithMsgID(e.ID)); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(5 * time.Minute):
		b.Fatal("the stream did not take the 200,020 events within 5 minutes")
	}
	for _, c := range []struct {
		name string
		f    Filter
		want int
	}{
		{"job", Filter{JobID: "jid-mine", Since: created}, mine},
		{"job/whole stream", Filter{JobID: "jid-mine", Since: created, Subject: SubjectAll}, mine},
		{"busy job", Filter{JobID: "jid-busy", Since: created}, busy},
		{"busy job/whole stream", Filter{JobID: "jid-busy", Since: created, Subject: SubjectAll}, busy},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if got := len(replay(b, bus.Conn(), c.f)); got != c.want {
					b.Fatalf("%d events, want %d", got, c.want)
				}
			}
		})
	}
}
