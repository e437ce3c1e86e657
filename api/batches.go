package api

import (
	"context"
	"net/http"
	"strings"

	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
)

func (a *API) batchRoutes() {
	a.handle("GET", "/batches", RoleRead, a.listBatches)
	a.handle("POST", "/batches", RoleOperate, a.submit)
	a.handle("GET", "/batches/{id}", RoleRead, a.getBatch)
	a.handle("DELETE", "/batches/{id}", RoleAdmin, a.batchAction(a.cfg.Ops.DeleteBatch))
	a.handle("POST", "/batches/{id}/cancel", RoleOperate, a.cancelBatch)
	a.handle("POST", "/batches/{id}/report", RoleOperate, a.batchAction(a.cfg.Ops.ReportBatch))
	a.handle("POST", "/batches/{id}/hold", RoleOperate, a.batchAction(a.cfg.Ops.HoldBatch))
	a.handle("POST", "/batches/{id}/release", RoleOperate, a.batchAction(a.cfg.Ops.ReleaseBatch))
}

// batchRow is a batch in a listing: its jobs counted per bucket.
type batchRow struct {
	BID          string         `json:"bid"`
	Status       queue.State    `json:"status"`
	State        queue.State    `json:"state"` // the same as status: the batch detail's name (decision 249)
	UUID         string         `json:"uuid"`
	Profile      string         `json:"profile"`
	Jobs         map[string]int `json:"jobs"` // by bucket; null when unreadable
	LastModified string         `json:"last_modified"`
}

func (a *API) listBatches(w http.ResponseWriter, r *http.Request, _ Caller) error {
	v, err := readQuery(r, "state", "profile", "limit", "after")
	if err != nil {
		return err
	}
	p, err := pageOf(v)
	if err != nil {
		return err
	}
	if err := checkCursor(p.After, bidCursor, "a bid"); err != nil {
		return err
	}
	f := ops.BatchFilter{Profile: v.Get("profile")}
	if s := v.Get("state"); s != "" {
		if f.State, err = queue.ParseBatchState(s); err != nil {
			return badRequest("state: %v", err)
		}
	}
	list, err := a.cfg.Ops.ListBatches(r.Context(), f, p)
	if err != nil {
		return err
	}
	rows, errs := a.cfg.Ops.BatchRows(r.Context(), list.Batches)
	out := make([]batchRow, len(rows))
	for i, row := range rows {
		out[i] = batchRow{BID: row.BID, Status: row.Status, State: row.Status, UUID: row.UUID, Profile: row.Profile,
			LastModified: queue.JSONTime(row.LastModified)}
		if errs[i] != nil {
			list.Problems = append(list.Problems, errs[i])
			continue
		}
		out[i].Jobs = map[string]int{}
		for _, bucket := range queue.Buckets {
			out[i].Jobs[bucket] = len(row.Jobs[bucket])
		}
	}
	writeJSON(w, http.StatusOK, newPage(out, list.Next, list.Problems))
	return nil
}

// submitBody is a submission: where the payload is, for which profile,
// and what the depositor says of it.
type submitBody struct {
	PayloadURL string `json:"payload_url"`
	Profile    string `json:"profile"`
	Type       string `json:"type"`      // auto (default), file, container, manifest
	Submitter  string `json:"submitter"` // default: the token's name
	Priority   *int   `json:"priority"`
	UUID       string `json:"uuid"` // the batch's uuid; default a new one. Submitting a uuid again is refused (409): a retry cannot make two batches
	// The one object of a file or container payload.
	LocalID       string `json:"local_id"`
	PrimaryID     string `json:"primary_id"`
	FileName      string `json:"file_name"`
	HashAlgorithm string `json:"hash_algorithm"`
	HashValue     string `json:"hash_value"`
	ERCWho        string `json:"erc_who"`
	ERCWhat       string `json:"erc_what"`
	ERCWhen       string `json:"erc_when"`
	ERCWhere      string `json:"erc_where"`
}

// fields are the submission's keys the body gives beyond the request's own.
func (b submitBody) fields() map[string]any {
	m := map[string]any{}
	for k, v := range map[string]string{"batchID": b.UUID, "local_id": b.LocalID, "primary_id": b.PrimaryID,
		"file_name": b.FileName, "hash_algorithm": b.HashAlgorithm, "hash_value": b.HashValue,
		"erc_who": b.ERCWho, "erc_what": b.ERCWhat, "erc_when": b.ERCWhen, "erc_where": b.ERCWhere} {
		if v != "" {
			m[k] = v
		}
	}
	return m
}

func (a *API) submit(w http.ResponseWriter, r *http.Request, caller Caller) error {
	if _, err := readQuery(r); err != nil {
		return err
	}
	var body submitBody
	if err := decodeBody(w, r, &body); err != nil {
		return err
	}
	if strings.Contains(body.UUID, "/") {
		return badRequest("uuid %q: must not contain '/'", body.UUID)
	}
	req := ops.SubmitRequest{Profile: body.Profile, Submitter: body.Submitter, PayloadURL: body.PayloadURL,
		Type: body.Type, Priority: body.Priority, Fields: body.fields()}
	if req.Submitter == "" {
		req.Submitter = caller.Name
	}
	sub, err := ops.Submission(req)
	if err != nil {
		return err
	}
	b, err := a.cfg.Ops.Submit(r.Context(), sub)
	if err != nil {
		return err
	}
	loc := Prefix + "batches/" + b.ID
	w.Header().Set("Location", loc)
	writeJSON(w, http.StatusCreated, map[string]string{"bid": b.ID, "uuid": b.UUID(), "location": loc})
	return nil
}

func (a *API) getBatch(w http.ResponseWriter, r *http.Request, _ Caller) error {
	if _, err := readQuery(r); err != nil {
		return err
	}
	st, err := a.cfg.Ops.BatchStatus(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	out := newBatchStatus(st)
	out.Hold = a.cfg.Ops.Situation(r.Context()).HoldOf("batch", st.BID, st.State, st.Profile, st.LastModified, ops.HTTP)
	writeJSON(w, http.StatusOK, out)
	return nil
}

// batchAction answers a change of a batch with its outcome.
func (a *API) batchAction(do func(ctx context.Context, id string) (ops.Outcome, error)) handler {
	return func(w http.ResponseWriter, r *http.Request, _ Caller) error {
		if _, err := readQuery(r); err != nil {
			return err
		}
		o, err := do(r.Context(), r.PathValue("id"))
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, apiOutcome(o))
		return nil
	}
}

func (a *API) cancelBatch(w http.ResponseWriter, r *http.Request, caller Caller) error {
	if _, err := readQuery(r); err != nil {
		return err
	}
	o, err := a.cfg.Ops.CancelBatch(r.Context(), r.PathValue("id"), caller.Name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, o)
	return nil
}
