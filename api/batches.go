package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
)

func (a *API) batchRoutes() {
	a.handle("GET", "/batches", RoleRead, a.listBatches)
	a.handle("POST", "/batches", RoleOperate, a.submit)
	a.handle("GET", "/batches/{id}", RoleRead, a.getBatch)
	a.handle("DELETE", "/batches/{id}", RoleAdmin, a.batchAction(a.cfg.Ops.DeleteBatch)) // admin: never scoped
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
	Message      string         `json:"message"` // a Pending batch's: why it is not taken yet
}

func (a *API) listBatches(w http.ResponseWriter, r *http.Request, caller Caller) error {
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
	if caller.Scoped() {
		f.Keep = func(b *queue.Batch) bool { return caller.Sees(b.Profile()) }
	}
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
			LastModified: queue.JSONTime(row.LastModified), Message: row.Message}
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
	if err := checkUUID(body.UUID); err != nil {
		return err
	}
	if err := refuseSubmit(caller, body.Profile); err != nil {
		return err
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
		return a.uuidTaken(r.Context(), caller, body.UUID, err)
	}
	loc := Prefix + "batches/" + b.ID
	w.Header().Set("Location", loc)
	writeJSON(w, http.StatusCreated, map[string]string{"bid": b.ID, "uuid": b.UUID(), "location": loc})
	return nil
}

// maxUUID is the longest batch uuid taken, in characters: it names a
// ZooKeeper node (batch-uuids/UUID) and is kept in the batch's submission
// too, and one request to ZooKeeper holds both (a uuid of 900 KB failed it).
const maxUUID = 256

// checkUUID refuses a batch uuid that could not name its batch: one in
// the form of a bid or a jid (GET /batches/{id} would read it as one), one
// ZooKeeper takes as no node's name (it answered 500), or a long one.
func checkUUID(u string) error {
	bad := func(problem string) error {
		return &ops.FieldError{Field: "uuid", Value: strconv.Quote(u), Problem: problem}
	}
	switch {
	case ops.IsBatchID(u) || ops.CheckJobID(u) == nil:
		return bad("has the form of a bid or jid, which GET /api/v1/batches/{id} reads as one: want another (a uuid, or bid-… as Merritt's)")
	case u == "." || u == "..":
		return bad("not a name ZooKeeper takes")
	case utf8.RuneCountInString(u) > maxUUID:
		return bad(fmt.Sprintf("%d characters: want at most %d", utf8.RuneCountInString(u), maxUUID))
	}
	for _, c := range u {
		if c == '/' {
			return bad("must not contain '/'")
		}
		if !zkNameRune(c) {
			return bad(fmt.Sprintf("holds %U, which ZooKeeper refuses in a node's name", c))
		}
	}
	return nil
}

// zkNameRune tells whether ZooKeeper takes c in a node's name: not a
// control character, nor one of Java's UTF-16 ranges its path check
// refuses (U+D800–U+F8FF, U+FFF0–U+FFFF, and a surrogate pair: any
// character above U+FFFF); U+FFFD stands for bytes that are not UTF-8.
func zkNameRune(c rune) bool {
	switch {
	case c <= 0x1f, c >= 0x7f && c <= 0x9f, c >= 0xd800 && c <= 0xf8ff, c >= 0xfff0:
		return false
	}
	return true
}

// uuidTaken is err of a submission, or, when a batch already has its uuid
// (a retried request), a refusal that names that batch and how to read
// it: the queue's own words name its node's key (batchID), not the field.
// Another profile's batch is not named to a scoped caller.
func (a *API) uuidTaken(ctx context.Context, caller Caller, uuid string, err error) error {
	if uuid == "" || !errors.Is(err, queue.ErrRefused) || a.seesBatch(ctx, caller, uuid) != nil {
		return err
	}
	bid, ferr := a.cfg.Ops.BatchID(ctx, uuid)
	if ferr != nil {
		return err
	}
	return fmt.Errorf("%w: uuid %q is batch %s's, submitted before (a retried request makes no second batch): GET %sbatches/%s shows it",
		queue.ErrRefused, uuid, bid, Prefix, bid)
}

func (a *API) getBatch(w http.ResponseWriter, r *http.Request, caller Caller) error {
	if _, err := readQuery(r); err != nil {
		return err
	}
	st, err := a.cfg.Ops.BatchStatus(r.Context(), r.PathValue("id"))
	if err != nil {
		return RemovedTo(r.Context(), a.cfg.Ops, caller, r.PathValue("id"), err)
	}
	if !caller.Sees(st.Profile) {
		return missingBatch(r.PathValue("id"))
	}
	st.Submission = shownRecord(st.Submission, caller)
	out := newBatchStatus(st)
	out.Hold = a.cfg.Ops.Situation(r.Context()).HoldOf("batch", st.BID, st.State, st.Profile, st.LastModified, ops.HTTP)
	writeJSON(w, http.StatusOK, out)
	return nil
}

// batchAction answers a change of a batch with its outcome.
func (a *API) batchAction(do func(ctx context.Context, id string) (ops.Outcome, error)) handler {
	return func(w http.ResponseWriter, r *http.Request, caller Caller) error {
		if _, err := readQuery(r); err != nil {
			return err
		}
		if err := a.seesBatch(r.Context(), caller, r.PathValue("id")); err != nil {
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
	if err := a.seesBatch(r.Context(), caller, r.PathValue("id")); err != nil {
		return err
	}
	o, err := a.cfg.Ops.CancelBatch(r.Context(), r.PathValue("id"), caller.Name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, o)
	return nil
}
