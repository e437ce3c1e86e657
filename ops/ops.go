// Package ops is the service layer the CLI and the HTTP API share: every
// operation an operator or a depositor's tool asks of the queue, with its
// checks, its refusal messages and the admin event it announces. The CLI
// prints an operation's Outcome.Message; the API returns it as JSON, and
// maps its errors to HTTP statuses by kind:
//
//	ErrInvalid                                      bad input          400
//	queue.ErrNotFound                               unknown id         404
//	ErrGone                                         access gone        410
//	queue.ErrRefused, ErrLocked, ErrIllegalTransition, ErrStale   409
//	ZooKeeper out of reach (queue.Unreachable)      try again          503
//
// Everything else is a 500: the queue's or the code's trouble. An
// Outcome's advice names a command line for the CLI and a request for the
// API (Outcome.For).
package ops

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Service runs operations on one queue.
type Service struct {
	Q *queue.Queue
	// Publish sends an operator's action as an admin event, best effort:
	// the daemon's bus, or the CLI's own connection. Daemons wake on it
	// (a release changes no folder, so no watch would fire). The job and
	// batch moves an action makes go through it too, each as its move's
	// event under the move's arrival ID. nil sends none.
	Publish func(events.Event)
	// Actor names who acts when the context names no one (WithActor): the
	// CLI's user. The API and the dashboard put each request's token name
	// in its context.
	Actor string
	// Recorded replays the recorded events (the bus's Replay): what became
	// of an access request no longer in the queue is read from them. nil
	// reads none.
	Recorded func(ctx context.Context, f events.Filter, fn func(events.Event) error) error
	// Pace gives the estimates of time left; nil gives none.
	Pace *Pace
	// Inventory is what access requests are estimated from; nil refuses
	// them. AccessThreshold is the estimate above which a request goes to
	// the large queue (0: DefaultAccessThreshold).
	Inventory       ObjectReader
	AccessThreshold int64
	// RemovePackage deletes an S3 package at once when its request is
	// deleted (access.RemovePackage); nil, or an error, leaves it to the
	// next sweep of a daemon writing there.
	RemovePackage func(ctx context.Context, p *queue.AccessPackage) error
}

// ErrInvalid marks bad input: a malformed id, a missing or bad field, an
// unknown profile. Match it with errors.Is.
var ErrInvalid = errors.New("invalid")

// InvalidError is bad input, said in one line.
type InvalidError struct{ Msg string }

func (e *InvalidError) Error() string        { return e.Msg }
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

func invalid(msg string) error { return &InvalidError{Msg: msg} }

// Outcome is what a change did: Changed is false when the item already was
// as asked (holding what is held is not an error).
type Outcome struct {
	ID      string      `json:"id"`
	Changed bool        `json:"changed"`
	State   queue.State `json:"state,omitempty"`
	Message string      `json:"message"`
	// API is Message for a program calling the HTTP API, when its advice
	// names a request where Message names a command line (decision 249);
	// the API answers it as message. UI is Message on the dashboard, when
	// its advice names a button there ("" says API's). For gives each.
	API string `json:"-"`
	UI  string `json:"-"`
}

// Door is the way a caller acts on the queue, which advice names: the
// CLI's command lines, the HTTP API's requests, or the dashboard's
// buttons (a job's page has Hold, Release, Requeue, Fail and Delete; what
// no button does is said there as the API's request, which a dashboard
// token may make).
type Door int

// The doors.
const (
	CLI Door = iota
	HTTP
	Dashboard
)

// For is o as a caller at door d reads it: its message's advice names d.
func (o Outcome) For(d Door) Outcome {
	switch d {
	case HTTP:
		o.Message = cmp.Or(o.API, o.Message)
	case Dashboard:
		o.Message = cmp.Or(o.UI, o.API, o.Message)
	}
	return o
}

// Detail is err's message for a caller at door d: a refusal's advice
// (queue.AdvisedError) names d's way to act, where Error names the CLI's.
func Detail(err error, d Door) string {
	msg := err.Error()
	var adv *queue.AdvisedError
	if d == CLI || !errors.As(err, &adv) {
		return msg
	}
	advice := adv.API
	if d == Dashboard {
		advice = cmp.Or(adv.UI, adv.API)
	}
	return strings.Replace(msg, adv.Error(), adv.Err.Error()+"; "+advice, 1)
}

// Announce publishes an admin action (ingestq.admin.<action>), naming its
// actor. A job's batch is filled in from the queue when it can still be
// read.
func (s *Service) Announce(ctx context.Context, action string, ev events.Event) {
	if s.Publish == nil {
		return
	}
	ev.Kind, ev.To, ev.Actor = events.KindAdmin, action, s.actor(ctx)
	if ev.JobID != "" && ev.BatchID == "" {
		if j, err := s.Q.LoadJob(ctx, ev.JobID); err == nil {
			ev.BatchID = j.BatchID
		}
	}
	s.publish(ev)
}

// publish sends an event, stamped with an id and the time unless it has
// them.
func (s *Service) publish(ev events.Event) {
	if s.Publish == nil {
		return
	}
	if ev.ID == "" {
		ev.ID = events.NewID()
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	s.Publish(ev)
}

type actorKey struct{}

// WithActor returns ctx naming who acts (an API or dashboard token's
// name): the actor of the admin events and moves made under it, and the
// WHO of "failed by WHO" and "cancelled by WHO".
func WithActor(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, actorKey{}, name)
}

// actor is who acts under ctx: its WithActor name, else Service.Actor.
func (s *Service) actor(ctx context.Context) string {
	name, _ := ctx.Value(actorKey{}).(string)
	return cmp.Or(name, s.Actor, "an operator")
}

// moving returns ctx with an observer that publishes each job and batch
// move an action's queue writes land, as soon as it lands, as the move's
// event: under the move's arrival ID (queue.Job.ArrivalID,
// queue.Batch.ArrivalID), the ID a daemon that finds the move looks up
// before it publishes a recovered copy (decisions 131, 222). So the move is
// recorded once whoever publishes it first: the daemon finds this one, or,
// when it looked first, JetStream drops this copy as a duplicate.
// attrs.action names the action; actor who asked for it.
func (s *Service) moving(ctx context.Context, action string) context.Context {
	if s.Publish == nil {
		return ctx
	}
	actor := s.actor(ctx)
	return queue.WithMoved(ctx, func(m queue.Moved) {
		ev := events.Event{Time: time.Now().UTC(), From: string(m.From), Actor: actor, Attrs: map[string]any{"action": action}}
		switch {
		case m.Job != nil:
			prio := m.Job.Priority
			ev.Kind, ev.ID, ev.BatchID, ev.JobID = events.KindJob, m.Job.ArrivalID(), m.Job.BatchID, m.Job.ID
			ev.To, ev.Priority, ev.Message = string(m.Job.State()), &prio, m.Job.Status.Message
		case m.Batch != nil:
			ev.Kind, ev.ID, ev.BatchID = events.KindBatch, m.Batch.ArrivalID(), m.Batch.ID
			ev.To, ev.Message = string(m.Batch.State()), m.Batch.Status.Message
		default:
			return
		}
		s.publish(ev)
	})
}

// CheckJobID refuses what is not a job id (jid followed by digits).
func CheckJobID(id string) error { return checkID(id, "jid", "job") }

// checkID refuses an id that is not prefix followed by digits (jid…, bid…).
func checkID(id, prefix, kind string) error {
	rest, ok := strings.CutPrefix(id, prefix)
	if ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
		return nil
	}
	article := "a"
	if strings.ContainsRune("aeiou", rune(kind[0])) {
		article = "an"
	}
	return invalid(fmt.Sprintf("%q is not %s %s id (want %s followed by digits)", id, article, kind, prefix))
}
