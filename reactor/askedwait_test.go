package reactor

import (
	"errors"
	"testing"
	"time"

	"github.com/ingestq/ingestq/reactor/queue"
)

// askedErr is a back end's busy answer asking to be left until at (an HTTP
// Retry-After, as fetch.StatusError's).
type askedErr struct{ at time.Time }

func (e askedErr) Error() string        { return "busy" }
func (e askedErr) NotBefore() time.Time { return e.at }

// A job whose back end asked to be left a while (a Retry-After) waits that
// long at least, beside the others or alone (decision 925), at most
// outageMax; never shorter than the back-off.
func TestBackEndOutWaitsAsAsked(t *testing.T) {
	o := newOutages(nil, func(queue.State, string, time.Time) {})
	near, far := time.Now().Add(3*time.Second), time.Now().Add(time.Hour)
	cases := []struct {
		name     string
		asked    time.Time
		least    time.Time
		atMost   time.Duration
		answered bool // another job's step got an answer first: this one waits alone
	}{
		{name: "asked 3 s", asked: near, least: near, atMost: 4 * time.Second},
		{name: "asked an hour", asked: far, least: time.Now().Add(outageMax - time.Second), atMost: outageMax},
		{name: "asked the past", asked: time.Now().Add(-time.Hour), least: time.Now().Add(time.Second - time.Millisecond), atMost: 2 * time.Second},
		{name: "alone, asked 3 s", asked: near, least: near, atMost: 4 * time.Second, answered: true},
	}
	for i, c := range cases {
		ref := "05-jid" + string(rune('a'+i))
		what := "storage target " + c.name
		if c.answered {
			o.down(queue.Storing, ref, Unavailable(what, errors.New("out")), time.Millisecond)
			o.answered([]string{what})
		}
		until, alone := o.down(queue.Storing, ref, Unavailable(what, askedErr{c.asked}), time.Second)
		if alone != c.answered || until.Before(c.least) || time.Until(until) > c.atMost {
			t.Errorf("%s: waits until %v (in %v), alone %v; want from %v, in at most %v, alone %v",
				c.name, until, time.Until(until).Round(time.Millisecond), alone, c.least, c.atMost, c.answered)
		}
	}
}
