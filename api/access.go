package api

import (
	"context"
	"net/http"
	"slices"
	"strconv"

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
	if err := a.seesObject(r.Context(), caller, req); err != nil {
		return err
	}
	v, err := a.cfg.Ops.RequestAccess(r.Context(), req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", Prefix+"access/"+v.Ref)
	v.LastModified = queue.JSONTime(v.LastModified)
	writeJSON(w, http.StatusCreated, v)
	return nil
}

func (a *API) listAccess(w http.ResponseWriter, r *http.Request, caller Caller) error {
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
	if caller.Scoped() {
		list = slices.DeleteFunc(list, func(v ops.AccessView) bool { return !caller.Sees(v.Token.Profile) })
	}
	for i := range list {
		list[i].LastModified = queue.JSONTime(list[i].LastModified)
	}
	writeJSON(w, http.StatusOK, newPage(list, "", problems))
	return nil
}

// accessRef is the request a route's path names: queue/qid.
func accessRef(r *http.Request) string { return r.PathValue("queue") + "/" + r.PathValue("qid") }

// getAccess answers a request; one made and no more to be had (its
// package expired, it was deleted) is gone (410), saying what became of it.
func (a *API) getAccess(w http.ResponseWriter, r *http.Request, caller Caller) error {
	if _, err := readQuery(r); err != nil {
		return err
	}
	v, err := a.cfg.Ops.ShowAccess(r.Context(), accessRef(r))
	if err == nil && !caller.Sees(v.Token.Profile) {
		return missingAccess(r)
	}
	if err := a.accessGoneTo(r.Context(), caller, accessRef(r), v, err); err != nil {
		return err
	}
	v.LastModified, v.Unreachable = queue.JSONTime(v.LastModified), a.cfg.Ops.Unreachable(r.Context(), v)
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (a *API) accessAction(do func(ctx context.Context, ref string) (ops.Outcome, error)) handler {
	return func(w http.ResponseWriter, r *http.Request, caller Caller) error {
		if _, err := readQuery(r); err != nil {
			return err
		}
		if err := a.seesAccess(r.Context(), caller, r); err != nil {
			return err
		}
		o, err := do(r.Context(), accessRef(r))
		if err != nil {
			return a.cfg.Ops.AccessGone(r.Context(), accessRef(r), ops.AccessView{}, err)
		}
		writeJSON(w, http.StatusOK, apiOutcome(o))
		return nil
	}
}
