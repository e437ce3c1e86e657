package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
)

// A token scoped to profiles (auth.go) sees and acts on only their work.
// Another profile's batch, job, object or access request is answered as
// one that does not exist, worded as the queue or the inventory words a
// missing one: a 403 would tell the token that it exists.

// missing is the queue's not-found of kind id (queue.notFound's words).
func missing(kind, id string) error { return fmt.Errorf("%s %s: %w", kind, id, queue.ErrNotFound) }

// missingBatch is what ops.FindBatch answers for a batch id (bid or uuid)
// no batch has.
func missingBatch(id string) error {
	if ops.IsBatchID(id) {
		return missing("batch", id)
	}
	return missing("batch uuid", id)
}

// missingJob is what ops.FindJob answers for a jid, or an ARK, no job has.
func missingJob(id string) error {
	if strings.HasPrefix(id, "ark:") {
		return fmt.Errorf("job with ARK %s: %w", id, queue.ErrNotFound)
	}
	return missing("job", id)
}

// missingObject is what the inventory answers for an ARK it does not hold.
func missingObject(ark string) error {
	return fmt.Errorf("inventory: object %s: %w", ark, inventory.ErrNotFound)
}

// seesBatch refuses, as missing, a batch outside the caller's profiles;
// an unscoped caller is not asked about (no read).
func (a *API) seesBatch(ctx context.Context, c Caller, id string) error {
	if !c.Scoped() {
		return nil
	}
	b, err := a.cfg.Ops.FindBatch(ctx, id)
	if err != nil {
		return err
	}
	if !c.Sees(b.Profile()) {
		return missingBatch(id)
	}
	return nil
}

// seesJob refuses, as missing, a job outside the caller's profiles. An id
// that is not a jid is let through: the action refuses it, for every
// token alike.
func (a *API) seesJob(ctx context.Context, c Caller, id string) error {
	if !c.Scoped() || ops.CheckJobID(id) != nil {
		return nil
	}
	j, _, _, err := a.cfg.Ops.FindJob(ctx, id)
	if err != nil {
		return err
	}
	if !c.Sees(j.Profile()) {
		return missingJob(id)
	}
	return nil
}

// forbidScoped refuses a scoped token a route that shows the whole queue
// (the daemons, the holds): its work's own holds are on its batches and
// jobs.
func forbidScoped(h handler) handler {
	return func(w http.ResponseWriter, r *http.Request, c Caller) error {
		if c.Scoped() {
			return &apiError{status: http.StatusForbidden, kind: "forbidden",
				msg: fmt.Sprintf("%s; %s %s shows the whole queue: it needs an unscoped token", c.scopedTo(), r.Method, r.URL.Path)}
		}
		return h(w, r, c)
	}
}

// refuseSubmit refuses a scoped caller's submission to another profile.
func refuseSubmit(c Caller, profile string) error {
	if profile == "" || c.Sees(profile) {
		return nil // no profile: refused for that, as for every token
	}
	return &apiError{status: http.StatusForbidden, kind: "forbidden",
		msg: fmt.Sprintf("profile %q: %s", profile, c.scopedTo())}
}

// missingAccess is what the queue answers for the access request r's path
// names (queue/qid) when it has none.
func missingAccess(r *http.Request) error { return missingAccessRef(accessRef(r)) }

// missingAccessRef is the not found of an access request ref (queue/qid
// or qid, named as asked) the queue has never made: what a scoped caller
// hears too of one outside its profiles, or gone, whatever the queue made.
func missingAccessRef(ref string) error { return ops.NeverMade(ref, "access request") }

// RemovedTo is ops.Removed as caller may hear it: a scoped caller learns
// nothing of a batch or job removed, whose profile went with it.
func RemovedTo(ctx context.Context, s *ops.Service, c Caller, id string, err error) error {
	if c.Scoped() {
		return err
	}
	return s.Removed(ctx, id, err)
}

// seesAccess refuses, as missing, the access request r's path names when
// its object is outside the caller's profiles (a request another tool
// made, with no profile in its token, is outside every scope).
func (a *API) seesAccess(ctx context.Context, c Caller, r *http.Request) error {
	if !c.Scoped() {
		return nil
	}
	v, err := a.cfg.Ops.ShowAccess(ctx, accessRef(r))
	if err != nil {
		return a.accessGoneTo(ctx, c, accessRef(r), v, err)
	}
	if !c.Sees(v.Token.Profile) {
		return missingAccess(r)
	}
	return nil
}

// accessGoneTo is ops.AccessGone as the caller may hear it: to a scoped
// caller, a request no longer in the queue is one never made, as its
// profile (its token's) went with it, and the 410 names its object, who
// deleted it and when; one not found is too, whatever its number, as
// another profile's is.
func (a *API) accessGoneTo(ctx context.Context, c Caller, ref string, v ops.AccessView, err error) error {
	gone := a.cfg.Ops.AccessGone(ctx, ref, v, err)
	if c.Scoped() && err != nil && (errors.Is(gone, ops.ErrGone) || errors.Is(gone, queue.ErrNotFound)) {
		return missingAccessRef(ref)
	}
	return gone
}

// seesObject refuses, as the inventory not holding it, an access request
// for an object outside the caller's profiles; a request bad in itself is
// refused for that first, as for every token.
func (a *API) seesObject(ctx context.Context, c Caller, req ops.AccessRequest) error {
	if !c.Scoped() {
		return nil
	}
	if err := ops.CheckAccessRequest(req); err != nil {
		return err
	}
	d, err := a.cfg.Inventory.Object(ctx, req.ARK)
	if errors.Is(err, inventory.ErrNotFound) || err == nil && !c.Sees(d.Object.Profile) {
		return ops.MissingObject(req.ARK)
	}
	return err
}

// eventScope keeps the events of a scoped caller's profiles' items: an
// event's batch (a job's event names it too), else its job, else its
// access request, read once a stream. An event of none (a queue's hold),
// or of an item no longer there to read, is not kept.
type eventScope struct {
	a       *API
	c       Caller
	profile map[string]string // by batch, job or access id; "" for unreadable
}

func (a *API) eventScope(c Caller) *eventScope {
	return &eventScope{a: a, c: c, profile: map[string]string{}}
}

// keeps tells whether the caller may see ev. It is called from one
// goroutine: the stream's follower.
func (s *eventScope) keeps(ctx context.Context, ev events.Event) bool {
	if !s.c.Scoped() {
		return true
	}
	id := cmp.Or(ev.BatchID, ev.JobID, ev.AccessID)
	if id == "" {
		return false
	}
	p, known := s.profile[id]
	if !known {
		p = s.read(ctx, ev)
		s.profile[id] = p
	}
	return p != "" && s.c.Sees(p)
}

// read finds the profile of ev's item; "" when it cannot be read.
func (s *eventScope) read(ctx context.Context, ev events.Event) string {
	q := s.a.cfg.Ops
	switch {
	case ev.BatchID != "":
		if b, err := q.Q.LoadBatch(ctx, ev.BatchID); err == nil {
			return b.Profile()
		}
	case ev.JobID != "":
		if j, err := q.Q.LoadJob(ctx, ev.JobID); err == nil {
			return j.Profile()
		}
	default:
		if v, err := q.ShowAccess(ctx, ev.AccessID); err == nil {
			return v.Token.Profile
		}
	}
	return ""
}
