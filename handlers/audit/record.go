package audit

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/ingestq/ingestq/handlers/inventory"
)

// The evidence of an audit with Options.Record: a PREMIS "fixity check"
// event in the inventory for each recorded version at each target where
// its bytes were read back, with the outcome, and a failure for each
// recorded version a target lacks (its copy there is lost: the target's
// last check must not stay a success). A target that could not be read
// (out of reach) gets none: nothing was checked, and the last event's
// time says when something was. Neither does a storage service's target
// that serves each object's latest version alone: its bytes are not read
// back.
//
// One event is about one version at one target, not one file, as
// Storing's check of each copy is; a failure's detail names each file
// that failed and how (its finding's kind). Every event of one object's
// audit has the same time, the end of that audit, so its checks at every
// target read as one (ingestq object shows them as the last fixity check).

// tally is what a check read back of one version.
type tally struct {
	files int   // read back and hashed, or tried to
	bytes int64 // read
}

// maxNamed is how many failed files an event's detail names; the
// audit's findings name each.
const maxNamed = 100

// record writes each version's fixity check events into the inventory,
// with the version's content as recorded (ErrMismatch otherwise) and no
// replica: Record adds the events and changes nothing else. The recorder
// writes them, with those of the objects whose audits ended meanwhile, in
// one transaction. When that fails, each version is recorded alone, so a
// version the inventory does not take is a finding of its own and the
// others are recorded. The walk goes on.
func (w *walk) record(ctx context.Context, o *audited, d inventory.ObjectDetail, checks []*check) {
	at := time.Now().UTC()
	rec := &recording{src: o.src, done: make(chan error, 1)}
	for _, v := range d.Versions {
		var evs []inventory.Event
		for _, c := range checks {
			if detail, ok := c.eventDetail(v.Version); ok {
				evs = append(evs, w.event(at, detail))
			}
		}
		if len(evs) > 0 {
			r := v
			r.Replicas, r.Events = nil, evs
			rec.rs = append(rec.rs, r)
		}
	}
	if len(rec.rs) == 0 {
		return
	}
	select {
	case w.recordings <- rec:
	case <-ctx.Done():
		return
	}
	select {
	case err := <-rec.done:
		if err == nil {
			for _, r := range rec.rs {
				o.events += len(r.Events)
			}
			return
		}
	case <-ctx.Done():
		return
	}
	for _, r := range rec.rs {
		if err := o.src.inv.Record(ctx, r); err != nil {
			if ctx.Err() != nil {
				return
			}
			o.findings = append(o.findings, Finding{Kind: RecordFailed, ARK: o.ark, Version: r.Version,
				Message: fmt.Sprintf("the inventory did not take the %d fixity check events of version %d of %s: %v; "+
					"the findings above stand, but the inventory does not show this check: audit it again with ark=%s, "+
					"fixity and record", len(r.Events), r.Version, o.ark, err, o.ark)})
			continue
		}
		o.events += len(r.Events)
	}
}

// recording is one object's fixity check events, handed to the recorder.
type recording struct {
	src  *source
	rs   []inventory.Record
	done chan error // its outcome; buffered, so the recorder never waits
}

// maxGroup bounds the objects whose events one transaction takes.
const maxGroup = 64

// recorder writes the recordings handed to it until the channel closes:
// each with those that came while the one before was written, one
// transaction per inventory (a group commit: bbolt commits one at a time,
// each with its fsyncs, and the workers' records queued behind each other).
// A transaction that fails is each recording's error.
func (w *walk) recorder(ctx context.Context) {
	for first := range w.recordings {
		group := []*recording{first}
	more:
		for len(group) < maxGroup {
			select {
			case rec := <-w.recordings:
				group = append(group, rec)
			default:
				break more
			}
		}
		for len(group) > 0 {
			src := group[0].src
			var same, rest []*recording
			var rs []inventory.Record
			for _, rec := range group {
				if rec.src != src {
					rest = append(rest, rec)
					continue
				}
				same = append(same, rec)
				rs = append(rs, rec.rs...)
			}
			err := inventory.RecordAll(ctx, src.inv, rs)
			for _, rec := range same {
				rec.done <- err
			}
			group = rest
		}
	}
}

// event is a fixity check with detail, its outcome the detail's.
func (w *walk) event(at time.Time, detail eventDetail) inventory.Event {
	return inventory.Event{ID: uuid.NewString(), Type: inventory.EventFixityCheck, At: at,
		Outcome: detail.outcome, Agent: w.a.Agent, Detail: detail.text}
}

type eventDetail struct{ outcome, text string }

// eventDetail is the fixity check of version n at this check's target;
// ok is false when there is none (not read back, not recorded).
func (c *check) eventDetail(n int) (d eventDetail, ok bool) {
	where := "audit with fixity at storage target " + c.t.Name
	if c.lacksFrom > 0 && n >= c.lacksFrom && n <= c.last {
		kind := VersionsMissing
		if c.lacksFrom == 1 {
			kind = ObjectMissing
		}
		return eventDetail{inventory.OutcomeFailure, fmt.Sprintf("%s: the target has no version %d of this object (%s): "+
			"nothing to read back", where, n, kind)}, true
	}
	if n > c.hashedTo {
		return eventDetail{}, false
	}
	read := c.tally[n]
	text := fmt.Sprintf("%s: %d of %d recorded files of version %d read back and hashed (%d bytes)",
		where, read.files, len(c.recorded[n]), n, read.bytes)
	var failed []string
	for _, f := range c.found() {
		if f.Version == n && f.File != "" {
			failed = append(failed, fmt.Sprintf("%q (%s)", f.File, f.Kind))
		}
	}
	if len(failed) == 0 {
		return eventDetail{inventory.OutcomeSuccess, text + ", each matching its recorded SHA-256"}, true
	}
	text = fmt.Sprintf("%s; %d failed: ", text, len(failed))
	if len(failed) > maxNamed {
		text += strings.Join(failed[:maxNamed], ", ") + fmt.Sprintf(" and %d more (the audit's findings name each)", len(failed)-maxNamed)
	} else {
		text += strings.Join(failed, ", ")
	}
	return eventDetail{inventory.OutcomeFailure, text}, true
}

// found are this check's findings.
func (c *check) found() []Finding { return c.o.findings[c.from:c.to] }
