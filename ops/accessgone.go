package ops

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor/queue"
)

// ErrGone marks an access request that was made and is no more to be had:
// its package expired, or it was deleted. Match it with errors.Is.
var ErrGone = errors.New("gone")

type goneError struct{ msg string }

func (e *goneError) Error() string        { return e.msg }
func (e *goneError) Is(target error) bool { return target == ErrGone }

// recordWait bounds a read of the recorded events (replayed).
const recordWait = 10 * time.Second

// AccessGone is what each door (the API, the dashboard, the CLI) answers
// for access request ref in place of v and err (what ShowAccess gave, or
// an action's error with no v): an ErrGone saying what became of a
// request that was made and is no more to be had (its package expired, it
// is Deleted, or it is no longer in the queue and its recorded events
// tell that it was made), else err. A request ZooKeeper and the events
// know nothing of stays not found, named as asked, saying whether the
// queue has made it (accessMissing).
func (s *Service) AccessGone(ctx context.Context, ref string, v AccessView, err error) error {
	switch {
	case errors.Is(err, queue.ErrNotFound):
		rec := s.recordedAccess(ctx, ref)
		switch {
		case !rec.expired.IsZero():
			return accessGone(ref, rec.ark, "expired at %s (removed with its package at %s)", cmp.Or(queue.NodeText(rec.expires), stamp(rec.expired)), stamp(rec.expired))
		case !rec.deleted.Time.IsZero():
			return accessGone(ref, rec.ark, "%s", deletedBy(rec.deleted.Actor, stamp(rec.deleted.Time)))
		case rec.last.To != "":
			return accessGone(ref, rec.ark, "is no longer in the queue, and no event records who removed it (its last recorded move: %s at %s)",
				rec.last.To, stamp(rec.last.Time))
		}
		return s.accessMissing(ctx, ref)
	case err != nil:
		return err
	case v.State == queue.Deleted:
		return accessGone(v.Ref, v.Token.ARK, "%s", deletedBy(s.recordedAccess(ctx, v.Ref).deleted.Actor, queue.NodeText(v.LastModified)))
	case v.State == queue.Completed && v.Token.Package != nil && v.Token.Package.Expired(time.Now()):
		return accessGone(v.Ref, v.Token.ARK, "expired at %s (its package goes at the next sweep)", queue.NodeText(v.Token.Package.Expires))
	}
	return nil
}

// accessMissing is the not found of access request ref (as asked: a ref
// or a bare qid) that neither ZooKeeper nor the events know, in a job's
// words: never made (its number is past the queue's sequence), or made
// and gone. The queue's folder keeps nothing of a removed request, and its
// sequence passes over a number at each removal, so a number it has
// passed is said to be either.
func (s *Service) accessMissing(ctx context.Context, ref string) error {
	if err := s.CheckEverMade(ctx, ref, "access request"); err != nil {
		return err
	}
	return queue.Missing("access request %s: no such access request (this queue has made it and it is gone, or passed over its number; "+
		"no event records which)", ref)
}

// deletedBy says who deleted a request at when, as far as recorded (an
// older ingestq's delete event, or another tool's Deleted, names no one).
func deletedBy(who, at string) string {
	if who == "" {
		return "was deleted at " + at + " (who deleted it is not recorded)"
	}
	return "was deleted by " + who + " at " + at
}

// accessGone is the ErrGone of request ref, of object ark ("" when not
// known): what became of it, and how to ask again at each door.
func accessGone(ref, ark, what string, args ...any) error {
	body, arg := `{"ark": `+strconv.Quote(ark)+`}`, ark
	if ark == "" {
		body, arg = `{"ark": ARK}`, "ARK"
	}
	err := &goneError{msg: "access request " + ref + " " + fmt.Sprintf(what, args...)}
	return queue.Advised(err, "`ingestq access request "+arg+"` asks again, with the version, files and format wanted",
		"ask again with POST /api/v1/access "+body+", and the version, files and format wanted", "")
}

// accessRecord is what the recorded events tell of an access request.
type accessRecord struct {
	ark, expires string       // its object; its package's expiry (its Completed move)
	expired      time.Time    // when a daemon's sweep removed it (its Expired event)
	deleted      events.Event // the last operator's delete of it
	last         events.Event // its last move
}

// recordedAccess reads request ref's recorded events: its moves, and the
// operators' deletes naming it (events.Replay reads the subjects of its
// moves and the operators' actions). Events that cannot be read tell
// nothing.
func (s *Service) recordedAccess(ctx context.Context, ref string) accessRecord {
	var rec accessRecord
	s.replayed(ctx, events.Filter{AccessID: ref}, func(ev events.Event) {
		if ark, ok := ev.Attrs["ark"].(string); ok {
			rec.ark = ark
		}
		switch {
		case ev.Kind == events.KindAdmin:
			if ev.To == "delete" { // a requeue is no delete
				rec.deleted = ev
			}
		case ev.To == "Expired":
			rec.expired = ev.Time
		default:
			rec.last = ev
			if ev.To == string(queue.Completed) {
				rec.expires, _ = ev.Attrs["expires"].(string)
			}
		}
	})
	return rec
}
