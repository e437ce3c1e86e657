package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Access requests: packages of stored objects to download.
func (a *API) accessRoutes() {
	a.handle("POST", "/access", RoleOperate, a.requestAccess)
	a.handle("GET", "/access", RoleRead, a.listAccess)
	a.handle("GET", "/access/{queue}/{qid}", RoleRead, a.getAccess)
	a.handle("POST", "/access/{queue}/{qid}/requeue", RoleOperate, a.accessAction(a.cfg.Ops.RequeueAccess))
	a.handle("DELETE", "/access/{queue}/{qid}", RoleAdmin, a.accessAction(a.cfg.Ops.DeleteAccess))
}

// accessBody is an access request as the API takes it: ops.AccessRequest
// with its version a pointer, so that 0 is told from absent.
type accessBody struct {
	ARK         string   `json:"ark"`
	Version     *int     `json:"version"`
	Files       []string `json:"files"`
	Format      string   `json:"format"`
	RequestedBy string   `json:"requested_by"`
}

func (a *API) requestAccess(w http.ResponseWriter, r *http.Request, caller Caller) error {
	if _, err := readQuery(r); err != nil {
		return err
	}
	if _, err := a.inventory(); err != nil {
		return err // the size is estimated from it
	}
	var body accessBody
	if err := decodeBody(w, r, &body); err != nil {
		return err
	}
	req := ops.AccessRequest{ARK: body.ARK, Files: body.Files, Format: body.Format, RequestedBy: body.RequestedBy}
	if v := body.Version; v != nil {
		// Absent asks for every version; 0 is no version (the document's
		// minimum is 1), not a second way to say every version.
		if *v < 1 {
			return &ops.FieldError{Field: "version", Value: strconv.Itoa(*v), Problem: "want 1 or more (leave version out for every version)"}
		}
		req.Version = *v
	}
	if req.RequestedBy == "" {
		req.RequestedBy = caller.Name
	}
	v, err := a.cfg.Ops.RequestAccess(r.Context(), req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", Prefix+"access/"+v.Ref)
	v.LastModified = apiTime(v.LastModified)
	writeJSON(w, http.StatusCreated, v)
	return nil
}

func (a *API) listAccess(w http.ResponseWriter, r *http.Request, _ Caller) error {
	v, err := readQuery(r, "state")
	if err != nil {
		return err
	}
	var st queue.State
	if s := v.Get("state"); s != "" {
		if st, err = ops.ParseAccessState(s); err != nil {
			return err
		}
	}
	list, problems, err := a.cfg.Ops.ListAccess(r.Context(), st)
	if err != nil {
		return err
	}
	for i := range list {
		list[i].LastModified = apiTime(list[i].LastModified)
	}
	writeJSON(w, http.StatusOK, newPage(list, "", problems))
	return nil
}

// accessRef is the request a route's path names: queue/qid.
func accessRef(r *http.Request) string { return r.PathValue("queue") + "/" + r.PathValue("qid") }

// getAccess answers a request; one whose package has expired is gone
// (410), whether a daemon's sweep has removed it yet or not.
func (a *API) getAccess(w http.ResponseWriter, r *http.Request, _ Caller) error {
	if _, err := readQuery(r); err != nil {
		return err
	}
	v, err := a.cfg.Ops.ShowAccess(r.Context(), accessRef(r))
	if errors.Is(err, queue.ErrNotFound) {
		if gone := a.expiredAccess(r.Context(), accessRef(r)); gone != nil {
			return gone
		}
	}
	if err != nil {
		return err
	}
	if p := v.Token.Package; v.State == queue.Completed && p != nil {
		if p.Expired(time.Now()) {
			return accessGone(v.Ref, p.Expires, "its package goes at the next sweep", v.Token.ARK)
		}
	}
	v.LastModified = apiTime(v.LastModified)
	writeJSON(w, http.StatusOK, v)
	return nil
}

// expiredAccess is the 410 of a request that a daemon's sweep removed
// when its package expired, as its recorded events tell (its Expired
// event); nil when they do not (a request never made, or deleted).
func (a *API) expiredAccess(ctx context.Context, ref string) error {
	if a.cfg.Bus == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timelineWait)
	defer cancel()
	var expires, ark string
	var removed time.Time
	err := events.Replay(ctx, a.cfg.Bus.Conn(), "", events.Filter{AccessID: ref, Subject: "ingestq.access.>"}, func(ev events.Event) error {
		switch ev.To {
		case "Expired":
			removed = ev.Time
		case string(queue.Completed):
			expires, _ = ev.Attrs["expires"].(string)
		}
		if s, ok := ev.Attrs["ark"].(string); ok {
			ark = s
		}
		return nil
	})
	if err != nil || removed.IsZero() {
		return nil
	}
	at := removed.UTC().Format(time.RFC3339)
	return accessGone(ref, cmp.Or(expires, at), "removed with its package at "+at, ark)
}

// accessGone is the 410 of request ref, whose package expired at
// expired: what became of it, and how to ask again.
func accessGone(ref, expired, then, ark string) error {
	body := `{"ark": ` + strconv.Quote(ark) + `}`
	if ark == "" {
		body = `{"ark": ARK}`
	}
	return &apiError{status: http.StatusGone, kind: "gone", msg: fmt.Sprintf("access request %s expired at %s (%s): "+
		"ask again with POST %saccess %s, and the version, files and format wanted", ref, expired, then, Prefix, body)}
}

func (a *API) accessAction(do func(ctx context.Context, ref string) (ops.Outcome, error)) handler {
	return func(w http.ResponseWriter, r *http.Request, _ Caller) error {
		if _, err := readQuery(r); err != nil {
			return err
		}
		o, err := do(r.Context(), accessRef(r))
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, apiOutcome(o))
		return nil
	}
}
