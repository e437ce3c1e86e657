package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/ingestq/ingestq/handlers/audit"
)

// The audit: every object the inventory records, compared with each
// storage target of its profile. An admin's: with fixity it reads every
// stored byte, and without it still reads every object's OCFL inventory
// and asks the size of each of its files.
func (a *API) auditRoutes() {
	a.handle("GET", "/audit", RoleAdmin, a.audit)
}

// The lines of the audit's NDJSON answer: a type, and the finding,
// counts or summary beside it.
type (
	findingLine struct {
		Type string `json:"type"` // finding
		audit.Finding
	}
	progressLine struct {
		Type string `json:"type"` // progress
		audit.Counts
	}
	// repairedLine is a version the repair recorded from storage: not a
	// finding (what it found is put right).
	repairedLine struct {
		Type string `json:"type"` // repaired
		audit.Repaired
	}
	// summaryLine is the last line, with the error that ended the audit
	// early ("" when it went to the end). A stream without it was cut.
	summaryLine struct {
		Type string `json:"type"` // summary
		audit.Summary
		Error string `json:"error,omitempty"`
	}
)

// audit streams the audit as NDJSON, each line flushed as it comes: a
// finding line for each thing found wrong (by ARK), a progress line at
// least every 10 s (the counts so far), and a summary line last.
func (a *API) audit(w http.ResponseWriter, r *http.Request, _ Caller) error {
	opt, err := auditOptions(r)
	if err != nil {
		return err
	}
	if a.cfg.Audit == nil {
		return &apiError{status: http.StatusNotImplemented, kind: "not-implemented",
			msg: "this daemon has no storage to audit (its pipeline is passthrough): ask a daemon whose pipeline is ingest"}
	}
	if err := a.cfg.Audit.CheckRepair(r.Context(), opt); errors.Is(err, audit.ErrNotHeld) {
		return &apiError{status: http.StatusConflict, kind: "refused", msg: err.Error()}
	} else if err != nil {
		return err
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		return fmt.Errorf("audit: the connection cannot stream")
	}
	ctx, cancel := a.startStream(w, r, "application/x-ndjson")
	defer cancel()
	enc := json.NewEncoder(w)
	var cut error // a write that failed: the client went away
	line := func(v any) error {
		if cut = enc.Encode(v); cut != nil {
			return cut
		}
		flusher.Flush()
		return nil
	}
	sum, err := a.cfg.Audit.Run(ctx, opt, audit.Report{
		Finding:  func(f audit.Finding) error { return line(findingLine{"finding", f}) },
		Progress: func(c audit.Counts) error { return line(progressLine{"progress", c}) },
		Repaired: func(rp audit.Repaired) error { return line(repairedLine{"repaired", rp}) },
	})
	if cut != nil {
		return nil // no one to tell
	}
	last := summaryLine{Type: "summary", Summary: sum}
	if err != nil {
		last.Error = oneLine(err.Error())
		if r.Context().Err() == nil { // not the client leaving
			a.cfg.Logger.Warn("api: the audit ended early", "err", err, "last", sum.Last)
		}
	}
	_ = line(last)
	return nil
}

// auditOptions reads the audit's query: ark (repeatable), after, limit,
// fixity, record and repair.
func auditOptions(r *http.Request) (audit.Options, error) {
	v, err := readQueryRepeating(r, []string{"ark"}, "ark", "after", "limit", "fixity", "record", "repair")
	if err != nil {
		return audit.Options{}, err
	}
	opt := audit.Options{ARKs: v["ark"], After: v.Get("after")}
	for _, ark := range opt.ARKs {
		if !strings.HasPrefix(ark, "ark:") {
			return opt, badRequest("ark %q: not an ARK (want ark:/NAAN/NAME)", ark)
		}
	}
	if s := v.Get("limit"); s != "" {
		if opt.Limit, err = strconv.Atoi(s); err != nil || opt.Limit < 1 {
			return opt, badRequest("limit %q: want a number of objects, 1 or more (leave it out for every one)", s)
		}
	}
	if opt.Fixity, err = boolParam(v, "fixity"); err != nil {
		return opt, err
	}
	if opt.Record, err = boolParam(v, "record"); err != nil {
		return opt, err
	}
	if opt.Repair, err = boolParam(v, "repair"); err != nil {
		return opt, err
	}
	return opt, opt.Check()
}
