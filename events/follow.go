package events

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// flushWait bounds the round trip that makes a new subscription live.
const flushWait = 5 * time.Second

// Follower follows the events a filter selects: when its Since is set,
// first those recorded since then (as Replay does), then the live ones.
// NewFollower subscribes to the live events (once it returns, none
// published later is missed), Run delivers.
type Follower struct {
	nc     *nats.Conn
	sub    *nats.Subscription
	f      Filter
	recent time.Time // events from about the subscription's time on can come twice
}

// NewFollower subscribes to the live events f selects.
func NewFollower(nc *nats.Conn, f Filter) (*Follower, error) {
	subject := cmp.Or(f.Subject, SubjectAll)
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		return nil, fmt.Errorf("events: follow %s: %w", subject, err)
	}
	if err := nc.FlushTimeout(flushWait); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("events: follow %s: %w", subject, err)
	}
	return &Follower{nc: nc, sub: sub, f: f, recent: time.Now().Add(-clockSkew)}, nil
}

// Close ends the subscription.
func (fl *Follower) Close() { _ = fl.sub.Unsubscribe() }

// Run calls fn for each event, recorded (from stream, DefaultStream when
// "") then live, until ctx is done (nil) or fn fails (its error); fn runs
// on the caller's goroutine. An event both deliver (recorded after the
// subscription, before the replay's end) is passed once, by its ID.
func (fl *Follower) Run(ctx context.Context, stream string, fn func(Event) error) error {
	seen := map[string]bool{}
	if !fl.f.Since.IsZero() {
		err := Replay(ctx, fl.nc, stream, fl.f, func(e Event) error {
			if !e.Time.Before(fl.recent) {
				seen[e.ID] = true
			}
			return fn(e)
		})
		if err != nil {
			return err
		}
	}
	return deliver(ctx, fl.sub, func(e Event) error {
		if seen[e.ID] {
			delete(seen, e.ID)
			return nil
		}
		if !fl.f.match(e) {
			return nil
		}
		return fn(e)
	})
}
