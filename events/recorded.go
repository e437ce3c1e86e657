package events

import (
	"context"
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
	s, err := b.streamHandle(ctx)
	if err != nil {
		return false, err
	}
	m, err := s.GetLastMsgForSubject(ctx, e.Subject())
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return false, nil
	case err != nil:
		b.lookup.Store(nil) // asked again next time: the stream may have moved
		return false, fmt.Errorf("events: last event on %s: %w", e.Subject(), err)
	}
	got, err := decode(m.Data)
	return err == nil && got.ID == e.ID, nil
}

// streamHandle is the stream's handle, read once (a STREAM.INFO request)
// and kept while lookups through it succeed.
func (b *Bus) streamHandle(ctx context.Context) (jetstream.Stream, error) {
	if s := b.lookup.Load(); s != nil {
		return *s, nil
	}
	s, err := b.js.Stream(ctx, b.cfg.Stream)
	if err != nil {
		return nil, fmt.Errorf("events: stream %s: %w", b.cfg.Stream, err)
	}
	b.lookup.Store(&s)
	return s, nil
}

// PlaceRecovered moves each recovered event of one job's timeline (published
// late, by the daemon that found the move without one) to just before the
// first move out of the state it entered.
func PlaceRecovered(evs []Event) []Event {
	for i := 0; i < len(evs); i++ {
		rec := evs[i]
		if rec.RecoveredBy == "" {
			continue
		}
		at := slices.IndexFunc(evs, func(e Event) bool { return e.From == rec.To && !e.Time.Before(rec.Time) })
		if at < 0 || at > i {
			continue
		}
		evs = slices.Insert(slices.Delete(evs, i, i+1), at, rec)
	}
	return evs
}
