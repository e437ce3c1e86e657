package events

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// recordedWait bounds one Recorded lookup: a step's worker waits on it.
const recordedWait = 2 * time.Second

// Recorded tells whether the stream's last message on e's subject is e
// (the same ID): whether a move's event is in the stream. A daemon asks it
// for the moves it finds in ZooKeeper but did not make itself, and
// publishes the missing ones (Event.RecoveredBy). Should the maker's own
// copy land after that, JetStream drops it as a duplicate (same ID, within
// the stream's two-minute window), so the stream holds the move once.
func (b *Bus) Recorded(ctx context.Context, e Event) (bool, error) {
	if b == nil {
		return true, nil
	}
	ctx, cancel := context.WithTimeout(ctx, recordedWait)
	defer cancel()
	data, err := b.lastOn(ctx, e.Subject())
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("events: last event on %s: %w", e.Subject(), err)
	}
	got, err := decode(data)
	return err == nil && got.ID == e.ID, nil
}

// lookupMaxBytes is the max_bytes of a lookup: far above any event.
const lookupMaxBytes = 8 << 20

// lastOn is the data of the stream's last message on subject, asked of any
// replica (a direct get: the stream allows them). It is the request the
// jetstream package's GetLastMsgForSubject sends, but with max_bytes:
// nats-server 2.15.2 fills in a missing one from its options unlocked
// (stream.getDirectRequest), which races with the ReloadOptions of a route
// change; a -race daemon reported it in CI. It does not cross a reload
// either: the reload rewrites every account's service imports
// (configureAccounts) while the server, taking a request through the
// JetStream API's import, reads them unlocked (setupResponseServiceImport).
// The same pointer is written, so the race is harmless, but every test
// daemon runs with -race, and lookups are its most frequent requests.
func (b *Bus) lastOn(ctx context.Context, subject string) ([]byte, error) {
	req, err := json.Marshal(struct {
		LastFor  string `json:"last_by_subj"`
		MaxBytes int    `json:"max_bytes"`
	}{subject, lookupMaxBytes})
	if err != nil {
		return nil, err
	}
	b.reloading.RLock()
	m, err := b.nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+b.cfg.Stream, req)
	b.reloading.RUnlock()
	if err != nil {
		return nil, err
	}
	switch status := m.Header.Get("Status"); {
	case status == "404":
		return nil, jetstream.ErrMsgNotFound
	case status != "":
		return nil, fmt.Errorf("direct get: %s %s", status, m.Header.Get("Description"))
	}
	return m.Data, nil
}

// PlaceRecovered moves each recovered event of one job's timeline (published
// late, by the daemon that found the move without one), and each kept or
// parked one (sent again late by its maker: Replay marks them), to just
// before the first move out of the state it entered.
func PlaceRecovered(evs []Event) []Event {
	return placeRecovered(evs, func(e Event) Event { return e })
}

// placeRecovered is PlaceRecovered on anything that holds an event. A pass
// may place an event before one placed later in it (two parked moves of a
// job, recorded after its next): passes go on until none moves, at most
// one per event.
func placeRecovered[T any](s []T, event func(T) Event) []T {
	for range len(s) {
		moved := false
		for i := 0; i < len(s); i++ {
			x := s[i]
			rec := event(x)
			if rec.RecoveredBy == "" && !rec.late {
				continue
			}
			at := slices.IndexFunc(s, func(x T) bool { e := event(x); return e.From == rec.To && !e.Time.Before(rec.Time) })
			if at < 0 || at >= i {
				continue
			}
			s = slices.Insert(slices.Delete(s, i, i+1), at, x)
			moved = true
		}
		if !moved {
			break
		}
	}
	return s
}

// Timeline orders events read in stream order (a batch's and its jobs', or
// one job's) as they happened. Each job's events, and the others (the
// batch's own, admin events without a job), keep their order, with their
// recovered events placed by PlaceRecovered; these timelines are then
// merged by time, events of the same time in stream order. The stream's
// order alone is not the moves' order: a recovered event is recorded late,
// and hosts publish at their own pace.
func Timeline(evs []Event) []Event {
	var order []string
	lanes := map[string][]timelineItem{}
	for i, e := range evs {
		k := e.JobID
		if _, ok := lanes[k]; !ok {
			order = append(order, k)
		}
		lanes[k] = append(lanes[k], timelineItem{e, i})
	}
	h := &timelineHeap{}
	for _, k := range order {
		items := placeRecovered(lanes[k], func(it timelineItem) Event { return it.e })
		h.lanes = append(h.lanes, &timelineLane{items: items})
	}
	heap.Init(h)
	out := make([]Event, 0, len(evs))
	for h.Len() > 0 {
		l := h.lanes[0]
		out = append(out, l.items[l.at].e)
		if l.at++; l.at == len(l.items) {
			heap.Pop(h)
		} else {
			heap.Fix(h, 0)
		}
	}
	return out
}

// LastOfProgressRuns keeps, of each run of a job's progress events (a
// download's bytes, published twice a second), its last: a run is the
// job's progress events from one host with none of its other events
// between them, so a move, a wait or an operator's action, or another
// host taking the download over, ends one. A wait's progress event
// (attrs.waiting: it says why the job waits) and a batch's own (no job)
// are always kept. It returns the events kept, in their order, and how
// many were left out. Text for people (events replay, the dashboard's
// timeline) shows these; machines (-o json, the API) get every event.
func LastOfProgressRuns(evs []Event) ([]Event, int) {
	inRun := func(ev Event) bool {
		return ev.Kind == KindProgress && ev.JobID != "" && ev.Attrs["waiting"] != true
	}
	// later is, by job, the host of the job's next event when that one is
	// of a run: an event of the run before it is left out.
	later := map[string]string{}
	kept := make([]Event, 0, len(evs))
	for i := len(evs) - 1; i >= 0; i-- {
		ev := evs[i]
		switch {
		case ev.JobID == "":
		case !inRun(ev):
			delete(later, ev.JobID)
		default:
			host, ok := later[ev.JobID]
			later[ev.JobID] = ev.Host
			if ok && host == ev.Host {
				continue
			}
		}
		kept = append(kept, ev)
	}
	slices.Reverse(kept)
	return kept, len(evs) - len(kept)
}

// timelineLane is one job's events (or the batch's), in their order, and
// the next to merge.
type timelineLane struct {
	items []timelineItem
	at    int
}

// timelineItem is an event and its position in the stream.
type timelineItem struct {
	e   Event
	seq int
}

// timelineHeap holds the lanes by their next event: earliest time first,
// then stream order.
type timelineHeap struct{ lanes []*timelineLane }

func (h *timelineHeap) Len() int { return len(h.lanes) }
func (h *timelineHeap) Less(i, j int) bool {
	a, b := h.lanes[i].items[h.lanes[i].at], h.lanes[j].items[h.lanes[j].at]
	if c := a.e.Time.Compare(b.e.Time); c != 0 {
		return c < 0
	}
	return a.seq < b.seq
}
func (h *timelineHeap) Swap(i, j int) { h.lanes[i], h.lanes[j] = h.lanes[j], h.lanes[i] }
func (h *timelineHeap) Push(x any)    { h.lanes = append(h.lanes, x.(*timelineLane)) }
func (h *timelineHeap) Pop() any {
	l := h.lanes[len(h.lanes)-1]
	h.lanes = h.lanes[:len(h.lanes)-1]
	return l
}
