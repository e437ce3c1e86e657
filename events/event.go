package events

import (
	"crypto/rand"
	"encoding/json"
	"strings"
	"time"
)

// Event kinds.
const (
	KindJob      = "job"      // a job changed state
	KindBatch    = "batch"    // a batch changed state
	KindProgress = "progress" // progress within a job's step, or a Pending batch's wait (no JobID); an access request taken over (AccessID)
	KindAdmin    = "admin"    // an operator's action
	KindAccess   = "access"   // an access (assembly) request changed state
)

// SubjectAll is the subject filter of everything the stream records.
const SubjectAll = "ingestq.>"

// progressSubjectPrefix starts a job's progress subject, one a job: the
// job's next progress event says all its last one did (parked.go).
const progressSubjectPrefix = "ingestq.job.progress."

// InternalPrefix starts the subjects of internal signals (watcher
// wake-ups). They travel on core NATS only and are never recorded.
const InternalPrefix = "_ingestq."

// SignalSubject is where a bus whose Config.Host is host sends and hears
// the signal subject: InternalPrefix, the host, then subject. A daemon's
// wake-ups thus reach its own pools only, however many daemons share NATS.
func SignalSubject(host, subject string) string {
	return InternalPrefix + token(host) + "." + subject
}

// NewID is a new event's ID: crypto/rand's, not a nuid, whose shared
// prefix and small steps let whoever reads the events foresee the next
// IDs (an operate token published them first, and the duplicate window
// dropped the daemon's events) and the process's other nuids (its inboxes,
// its consumers' names).
func NewID() string { return rand.Text() }

// Event is the envelope of everything ingestq publishes.
type Event struct {
	ID       string    `json:"id"`                  // unique (NewID), set by Publish if empty
	Time     time.Time `json:"time"`                // set by Publish if zero
	Kind     string    `json:"kind"`                // KindJob, KindBatch, KindProgress or KindAdmin
	BatchID  string    `json:"batch_id,omitempty"`  // the batch concerned
	JobID    string    `json:"job_id,omitempty"`    // the job concerned
	AccessID string    `json:"access_id,omitempty"` // the access request concerned (small/qid… or large/qid…)
	From     string    `json:"from,omitempty"`      // state before (job/batch transitions)
	To       string    `json:"to,omitempty"`        // state after; for admin events the action name (hold, release, requeue, fail, delete, report, cleanup)
	Priority *int      `json:"priority,omitempty"`  // the job's or batch's priority, when known
	Host     string    `json:"host,omitempty"`      // set by Publish from Config.Host if empty, unless RecoveredBy is set
	// RecoveredBy names the host that published the event for a move it
	// found in ZooKeeper without one: the move's maker (unknown, Host empty)
	// stopped before publishing it, or is an operator or another program.
	RecoveredBy string `json:"recovered_by,omitempty"`
	// Actor names who asked for the change: an operator (the CLI's user)
	// or an API or dashboard token's name. Set on every admin event and on
	// the job and batch moves an operator's action made (their
	// attrs.action names it), and on a submission's event.
	Actor   string         `json:"actor,omitempty"`
	Message string         `json:"message,omitempty"` // free text for people
	Attrs   map[string]any `json:"attrs,omitempty"`   // anything else, JSON-encodable

	// late marks what Replay read from a kept event's copy (keptHeaderKey):
	// sent again at the next start or after a split (parked.go), it was
	// recorded after moves made after it, and PlaceRecovered places it as a
	// recovered event. Not on the wire.
	late bool
}

// Subject returns the NATS subject the event is published on:
//
//	job      ingestq.job.<lower(To)>.<JobID>
//	batch    ingestq.batch.<lower(To)>.<BatchID>
//	progress ingestq.job.progress.<JobID>
//	         ingestq.batch.progress.<BatchID> (a batch's, without JobID)
//	         ingestq.access.progress.<AccessID> (an access request's)
//	admin    ingestq.admin.<To>
//	access   ingestq.access.<lower(To)>.<AccessID>
//
// Any other kind goes to ingestq.<lower(Kind)>.<lower(To)>. Every token is
// sanitised: '.', '*', '>' and white space become '_', and an empty token
// becomes "_", so an identifier can never split or widen a subject.
func (e Event) Subject() string {
	switch e.Kind {
	case KindJob:
		return "ingestq.job." + token(strings.ToLower(e.To)) + "." + token(e.JobID)
	case KindBatch:
		return "ingestq.batch." + token(strings.ToLower(e.To)) + "." + token(e.BatchID)
	case KindProgress:
		if e.AccessID != "" { // heard where the request's moves are (ingestq.access.>)
			return "ingestq.access.progress." + token(e.AccessID)
		}
		if e.JobID == "" {
			// A batch's wait: heard where its moves are (ingestq.batch.>),
			// by a follower of the batch's events.
			return "ingestq.batch.progress." + token(e.BatchID)
		}
		return progressSubjectPrefix + token(e.JobID)
	case KindAdmin:
		return "ingestq.admin." + token(e.To)
	case KindAccess:
		return "ingestq.access." + token(strings.ToLower(e.To)) + "." + token(e.AccessID)
	default:
		return "ingestq." + token(strings.ToLower(e.Kind)) + "." + token(strings.ToLower(e.To))
	}
}

// token makes s safe as one NATS subject token.
func token(s string) string {
	if s == "" {
		return "_"
	}
	if !strings.ContainsFunc(s, unsafeRune) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if unsafeRune(r) {
			return '_'
		}
		return r
	}, s)
}

// unsafeRune reports whether r may not appear inside a subject token.
func unsafeRune(r rune) bool {
	switch r {
	case '.', '*', '>', ' ', '\t', '\r', '\n', '\f', '\v':
		return true
	}
	return r < 0x20 || r == 0x7f
}

// marshal encodes an event for the wire.
func marshal(e Event) ([]byte, error) { return json.Marshal(e) }

// decode reads an event from the wire.
func decode(data []byte) (Event, error) {
	var e Event
	err := json.Unmarshal(data, &e)
	return e, err
}
