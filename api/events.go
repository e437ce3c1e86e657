package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/ops"
)

// keepAlive is how often a quiet event stream sends a comment, so that
// proxies and clients keep the connection.
const keepAlive = 15 * time.Second

// events streams the events as server-sent events (text/event-stream): with
// ?since= first those recorded since then (as events replay), then the live
// ones, until the client goes or the daemon stops. ?batch= (bid or uuid),
// ?job=, ?access= (small/qid…, large/qid… or qid…) and ?subject= (a NATS
// subject filter under ingestq.) select, as replay's flags do. Each event is "id: ID", "event: KIND" and "data:" its
// JSON. A client that reconnects asks again with ?since= (event ids are
// not sequence numbers: Last-Event-ID is not read).
func (a *API) events(w http.ResponseWriter, r *http.Request, caller Caller) error {
	f, err := a.eventFilter(r, caller)
	if err != nil {
		return err
	}
	if a.cfg.Bus == nil {
		return &apiError{status: http.StatusServiceUnavailable, kind: "unavailable", lacks: true, msg: "this daemon has no event stream"}
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		return fmt.Errorf("events: the connection cannot stream")
	}
	// Subscribed before the answer starts: a client that has it misses no
	// event published after.
	fl, err := events.NewFollower(a.cfg.Bus.Conn(), f)
	if err != nil {
		return &apiError{status: http.StatusServiceUnavailable, kind: "unavailable", msg: err.Error()}
	}
	defer fl.Close()
	ctx, cancel := a.startStream(w, r, "text/event-stream")
	defer cancel()
	_, _ = io.WriteString(w, ": ingestq events\n\n")
	flusher.Flush()

	evs := make(chan events.Event, 256)
	followed := make(chan error, 1)
	scope := a.eventScope(caller)
	go func() {
		followed <- fl.Run(ctx, "", func(ev events.Event) error {
			if !scope.keeps(ctx, ev) {
				return nil
			}
			select {
			case evs <- ev:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		var err error
		select {
		case ev := <-evs:
			if err = a.stillHeld(r, caller); err == nil {
				err = writeEvent(w, ev)
			}
		case <-tick.C:
			if err = a.stillHeld(r, caller); err == nil {
				_, err = io.WriteString(w, ": keep-alive\n\n")
			}
		case ferr := <-followed:
			if ferr != nil && ctx.Err() == nil {
				writeStreamError(w, ferr)
				flusher.Flush()
			}
			return nil
		}
		var changed tokenChanged
		if errors.As(err, &changed) {
			writeStreamError(w, changed.err)
			flusher.Flush()
		}
		if err != nil { // the client went away, or the token changed
			cancel()
			<-followed
			return nil
		}
		flusher.Flush()
	}
}

// writeStreamError ends a stream with an error event: its problem.
func writeStreamError(w io.Writer, err error) {
	data, _ := json.Marshal(problemOf(err))
	_, _ = fmt.Fprintf(w, "event: error\ndata: %s\n\n", data)
}

// tokenChanged is a stream's token revoked, or given another role or
// scope, since the stream began.
type tokenChanged struct{ err error }

func (e tokenChanged) Error() string { return e.err.Error() }

// stillHeld tells whether the stream's token still gives the caller it
// began with: a stream is a request under way for hours, and a reload of
// the token file (SIGHUP) that revokes a token or narrows its scope must
// stop what it carries, as it stops every later request.
func (a *API) stillHeld(r *http.Request, was Caller) error {
	now, err := a.cfg.Tokens.caller(r, RoleRead)
	if err == nil && (now.Name != was.Name || now.Role != was.Role || !slices.Equal(now.Profiles, was.Profiles)) {
		err = &apiError{status: http.StatusForbidden, kind: "forbidden",
			msg: "the token of " + was.Name + " changed (its role or profiles, in the reloaded token file): ask for the stream again"}
	}
	if err != nil {
		return tokenChanged{err}
	}
	return nil
}

// startStream starts an answer of contentType, its headers sent at once,
// that goes out as it is written (the caller flushes): no cache nor proxy
// holds it. Its context ends with the request, with the daemon, or with
// cancel.
func (a *API) startStream(w http.ResponseWriter, r *http.Request, contentType string) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(a.ctx, cancel) // the daemon stops
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer
	w.WriteHeader(http.StatusOK)
	if f, ok := w.(http.Flusher); ok {
		f.Flush() // the client has its 200 before the first line, which may take a while
	}
	return ctx, func() { stop(); cancel() }
}

// writeEvent writes one event of the stream.
func writeEvent(w io.Writer, ev events.Event) error {
	data, err := json.Marshal(ev)
	if err != nil {
		return nil // cannot happen for an event read from JSON; skip it
	}
	_, err = fmt.Fprintf(w, "id: %s\nevent: %s\ndata: %s\n\n", oneLine(ev.ID), oneLine(ev.Kind), data)
	return err
}

// eventFilter reads replay's filters from the query. A batch, job or
// access request outside a scoped caller's profiles is one never made.
func (a *API) eventFilter(r *http.Request, caller Caller) (events.Filter, error) {
	v, err := readQuery(r, "since", "batch", "job", "access", "subject")
	if err != nil {
		return events.Filter{}, err
	}
	f := events.Filter{JobID: v.Get("job"), AccessID: v.Get("access"), Subject: v.Get("subject")}
	if f.AccessID != "" {
		if err := ops.CheckAccessRef(f.AccessID); err != nil {
			return f, err
		}
	}
	if s := v.Get("since"); s != "" {
		if f.Since, err = events.ParseSince(s, time.Now()); err != nil {
			return f, badRequest("since %v", err)
		}
		f = a.cfg.Ops.OfQueue(r.Context(), f)
	}
	if f.Subject != "" && !strings.HasPrefix(f.Subject, "ingestq.") {
		return f, badRequest("subject %q: want a subject under ingestq. (like ingestq.job.failed.*)", f.Subject)
	}
	// A batch or job this queue never made has no events, and never will:
	// 404, not an endless empty stream. A removed one's history is streamed.
	if id := v.Get("batch"); id != "" {
		if f.BatchID, err = a.cfg.Ops.BatchID(r.Context(), id); err != nil {
			return f, err
		}
		if err := a.cfg.Ops.CheckEverMade(r.Context(), f.BatchID, "batch"); err != nil {
			return f, err
		}
		if err := a.seesBatch(r.Context(), caller, f.BatchID); err != nil {
			if !ops.IsBatchID(id) {
				return f, missingBatch(id) // BatchID's words for a uuid no batch has: not its bid
			}
			return f, ops.NeverMade(f.BatchID, "batch")
		}
	}
	if f.JobID != "" {
		if err := ops.CheckJobID(f.JobID); err != nil {
			return f, err
		}
		if err := a.cfg.Ops.CheckEverMade(r.Context(), f.JobID, "job"); err != nil {
			return f, err
		}
		if err := a.seesJob(r.Context(), caller, f.JobID); err != nil {
			return f, ops.NeverMade(f.JobID, "job")
		}
	}
	// Likewise an access request that neither the queue nor the recorded
	// events know (a typo of its qid); one deleted or expired streams.
	if f.AccessID != "" {
		view, err := a.cfg.Ops.ShowAccess(r.Context(), f.AccessID)
		if err := a.accessGoneTo(r.Context(), caller, f.AccessID, view, err); err != nil && !errors.Is(err, ops.ErrGone) {
			return f, err
		}
		if caller.Scoped() && (err != nil || !caller.Sees(view.Token.Profile)) {
			return f, missingAccessRef(f.AccessID)
		}
	}
	return f, nil
}
