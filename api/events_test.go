package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor/queue"
)

// stream is one client of the event stream.
type stream struct {
	events <-chan events.Event // closed when the stream ends
	cancel context.CancelFunc
}

// openStream connects to the event stream with query and reads its events
// until it ends or the test does.
func (b *bundle) openStream(query string) stream {
	b.t.Helper()
	return b.openStreamAs(readToken, query)
}

// openStreamAs is openStream with token.
func (b *bundle) openStreamAs(token, query string) stream {
	b.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b.t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", b.base+"events?"+query, nil)
	must(b.t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	must(b.t, err)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b.t.Fatalf("events?%s: %d %s", query, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	ch := make(chan events.Event, 1000)
	go readStream(resp, ch)
	return stream{events: ch, cancel: cancel}
}

// readStream parses server-sent events: each event's id and kind lines
// must agree with its data.
func readStream(resp *http.Response, ch chan<- events.Event) {
	defer close(ch)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var id, kind string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			kind = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var ev events.Event
			if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev) != nil || ev.ID != id || ev.Kind != kind {
				return // a malformed event ends the stream: the test sees it short
			}
			ch <- ev
		}
	}
}

// next waits for the stream's next event.
func (s stream) next(t *testing.T) events.Event {
	t.Helper()
	select {
	case ev, ok := <-s.events:
		if !ok {
			t.Fatal("the event stream ended")
		}
		return ev
	case <-time.After(30 * time.Second):
		t.Fatal("no event in 30 s")
	}
	return events.Event{}
}

// The stream replays what was recorded since ?since=, then goes on live,
// without a gap and without an event twice; ?batch= keeps that batch's
// events only. It ends when the daemon stops.
func TestEventStream(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mine, other := b.batch("uuid-sse", "demo"), b.batch("uuid-sse-other", "demo")
	publish := func(bid, msg string) {
		b.bus.Publish(events.Event{Kind: events.KindBatch, BatchID: bid, From: "Pending", To: "Processing", Message: msg})
	}
	// An event older than the queue is another queue's (a stream kept
	// while its queue was made anew): not replayed.
	b.bus.Publish(events.Event{Time: time.Now().Add(-2 * time.Hour), Kind: events.KindBatch, BatchID: mine.ID,
		From: "Pending", To: "Failed", Message: "another queue's"})
	publish(mine.ID, "recorded")
	publish(other.ID, "recorded elsewhere")
	flush(t, b.bus)

	replayed := b.openStream("since=3h&batch=uuid-sse")
	live := b.openStream("batch=" + mine.ID)
	if ev := replayed.next(t); ev.Message != "recorded" || ev.BatchID != mine.ID {
		t.Fatalf("first event %+v, want the recorded one of %s", ev, mine.ID)
	}
	publish(other.ID, "live elsewhere")
	publish(mine.ID, "live")
	publish(mine.ID, "last")
	for _, s := range []stream{replayed, live} {
		for _, want := range []string{"live", "last"} {
			if ev := s.next(t); ev.Message != want || ev.BatchID != mine.ID {
				t.Fatalf("event %+v, want %q of %s (once, in order)", ev, want, mine.ID)
			}
		}
	}
	// The daemon stops: the streams end.
	b.api.Close()
	for _, s := range []stream{replayed, live} {
		select {
		case ev, ok := <-s.events:
			if ok {
				t.Fatalf("an event %+v after the last", ev)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the stream did not end with the daemon")
		}
	}
}

// ?access= keeps one access request's events: by its ref, or by its bare
// qid (each queue numbers its own, so that is either queue's).
func TestEventStreamOfAnAccessRequest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	publish := func(ref, to string) {
		b.bus.Publish(events.Event{Kind: events.KindAccess, AccessID: ref, From: "Pending", To: to})
	}
	publish("small/qid0000000001", "Processing")
	publish("small/qid0000000002", "Processing")
	publish("large/qid0000000001", "Failed")
	flush(t, b.bus)
	byRef := b.openStream("since=1h&access=small/qid0000000001")
	byQID := b.openStream("since=1h&access=qid0000000001")
	if ev := byRef.next(t); ev.AccessID != "small/qid0000000001" || ev.To != "Processing" {
		t.Fatalf("by ref: %+v, want small/qid0000000001's", ev)
	}
	for _, want := range []string{"small/qid0000000001", "large/qid0000000001"} {
		if ev := byQID.next(t); ev.AccessID != want {
			t.Fatalf("by qid: %+v, want %s's", ev, want)
		}
	}
	publish("small/qid0000000002", "Completed")
	publish("small/qid0000000001", "Completed")
	if ev := byRef.next(t); ev.AccessID != "small/qid0000000001" || ev.To != "Completed" {
		t.Fatalf("by ref, live: %+v, want small/qid0000000001 Completed (not qid0000000002's)", ev)
	}
}

// Bad filters are refused before the stream starts.
func TestEventStreamRefusesBadFilters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.do("GET", "events?since=yesterday", readToken, nil).problem(t, 400, "invalid", `since "yesterday"`)
	b.do("GET", "events?subject=_ingestq.test.>", readToken, nil).problem(t, 400, "invalid", "under ingestq.")
	b.do("GET", "events?batch=no-such-uuid", readToken, nil).problem(t, 404, "not-found")
	b.do("GET", "events?jobs=x", readToken, nil).problem(t, 400, "invalid", `query parameter "jobs"`)
	b.do("GET", "events?access=medium/qid0000000001", readToken, nil).problem(t, 400, "invalid", `"medium/qid0000000001" is not an access request`)

	// A batch or job the queue never made is a 404 naming it, not an
	// endless empty stream; a removed one's history is still streamed.
	b.do("GET", "events?batch=bid9999999999", readToken, nil).problem(t, 404, "not-found", "batch bid9999999999: no such batch")
	b.do("GET", "events?job=jid9999999999", readToken, nil).problem(t, 404, "not-found", "job jid9999999999: no such job")
	b.do("GET", "events?job=bogus", readToken, nil).problem(t, 400, "invalid", `"bogus" is not a job id`)
	bt := b.batch("uuid-events-made", "demo")
	jid := b.job(bt.ID, 5, 0, queue.Estimating, queue.Failed)
	_, _, err := b.q.DeleteJob(t.Context(), jid, true)
	must(t, err)
	b.openStream("since=1h&job=" + jid).cancel()
	b.openStream("batch=" + bt.ID).cancel()
}
